"""Texts into the words every export splits them into (BERT's basic tokenizer, case kept), bounded in time and
memory: of a text only its first MiB is ever split, a long text is split slice by slice, and only as far as a
model's window reads. `split_words` for texts, `span_words` for the words under character spans,
`window_text` / `word_bytes_cut` for what fine-tuning gives its module's own tokenizer.
"""

import re

import tensorflow as tf

from preprocessing.basic_tokenizer import BasicTokenizer

SPLITTER = BasicTokenizer(lower_case=False)  # cased: words keep their case; the modules normalize
UNCASED_SPLITTER = BasicTokenizer(lower_case=True)


MAX_LINE_BYTES = 1 << 20  # of a text, only the first MiB is ever split (as `pipeline.corpus_io` reads lines)
SLICE_BYTES = 1024  # a longer text is split slice by slice (see `split_words`)
SLICES_PER_CALL = 64
_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]")
_NOT_WORD_CHAR = re.compile(rb"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")  # ASCII but letters and digits


def _split(texts: list[str]) -> list[list[str]]:
    words = SPLITTER.split_words(SPLITTER.normalize(tf.constant(texts)))
    return [[w.decode("utf-8") for w in row] for row in words.to_list()]


def text_slices(text: str, size: int = SLICE_BYTES) -> tuple[list[str], bool]:
    """`(slices, cut)`: the text's first `MAX_LINE_BYTES` (`cut`: there was more) as consecutive slices of at
    most `size` UTF-8 bytes, each ending after an ASCII space where the window has one, else after an ASCII
    punctuation character, else at a character boundary. Splitting the slices one by one gives the words of
    the whole: the splitter splits at spaces and around punctuation anyway; only a run of more than `size`
    bytes with neither (a "word" far over the 100-character word limit, which becomes `[UNK]` either way) is
    split in two."""
    data = text.encode("utf-8")
    cut = len(data) > MAX_LINE_BYTES
    if cut:
        end = MAX_LINE_BYTES
        while end and (data[end] & 0xC0) == 0x80:  # back to a character boundary
            end -= 1
        data = data[:end]
    slices, start = [], 0
    while start < len(data):
        end = min(start + size, len(data))
        if end < len(data):
            window = data[start:end]
            boundary = max((m.end() for m in _SPACE.finditer(window)), default=0) or \
                max((m.end() for m in _NOT_WORD_CHAR.finditer(window)), default=0)
            if boundary:
                end = start + boundary
            else:
                while end > start + 1 and (data[end] & 0xC0) == 0x80:
                    end -= 1
        slices.append(data[start:end].decode("utf-8"))
        start = end
    return slices, cut


def window_text(text: str, max_words: int, lower_case: bool = False) -> str:
    """The shortest prefix of `text` (whole slices, `text_slices`) that holds more than `max_words` words (or
    all of its first MiB): what a model that reads at most `max_words` words (every word has a piece) needs
    of it, with the same words. What fine-tuning gives its module's tokenizer, which splits a whole text at
    once (`split_words` says why that matters for a long one). `lower_case`: the module's (accent stripping
    deletes marks that a cased split counts as words)."""
    if len(text) * 4 <= SLICE_BYTES or len(text.encode("utf-8")) <= SLICE_BYTES:
        return text
    split = _split if not lower_case else _split_uncased
    slices, words, start, step = text_slices(text)[0], 0, 0, 1
    while start < len(slices) and words <= max_words:
        words += sum(len(row) for row in split(slices[start:start + step]))
        start, step = start + step, min(2 * step, SLICES_PER_CALL)
    return "".join(slices[:start])


def word_bytes_cut(word: str) -> str:
    """A given word (a CoNLL token) cut to its first slice (`text_slices`, at most `SLICE_BYTES`): far past
    BERT's 100-character word limit already, and split whole it would cost words x bytes."""
    return word if len(word) * 4 <= SLICE_BYTES else text_slices(word)[0][0] if word else word


def _split_uncased(texts: list[str]) -> list[list[str]]:
    words = UNCASED_SPLITTER.split_words(UNCASED_SPLITTER.normalize(tf.constant(texts)))
    return [[w.decode("utf-8") for w in row] for row in words.to_list()]


def split_words(texts: list[str], max_words: int | None = None) -> list[list[str]]:
    """The basic tokenizer's words (case kept), as every export splits them, of each text's first MiB.

    With `max_words`, a text's words are split only until more than `max_words` are known (the caller keeps
    what its window reads): the rest of a long line is never split. Time and memory grow linearly with the
    text: the splitter's own memory grows with words x bytes of what one call splits (it repeats each text
    once per word), so a text over `SLICE_BYTES` is split in slices (`text_slices`), 1, 2, 4, ... and then
    `SLICES_PER_CALL` at a time (a 40k-word line took +6.5 GB when split whole)."""
    if not texts:
        return []
    short = [i for i, t in enumerate(texts) if len(t) * 4 <= SLICE_BYTES or len(t.encode("utf-8")) <= SLICE_BYTES]
    out = dict(zip(short, _split([texts[i] for i in short]))) if short else {}
    for i in (i for i in range(len(texts)) if i not in out):
        slices, words, start, step = text_slices(texts[i])[0], [], 0, 1
        while start < len(slices) and (max_words is None or len(words) <= max_words):
            words.extend(w for row in _split(slices[start:start + step]) for w in row)
            start, step = start + step, min(2 * step, SLICES_PER_CALL)  # few slices first: a window is small
        out[i] = words
    return [out[i] for i in range(len(texts))]


def span_words(texts: list[str], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """For each text, the words `[first, last)` that overlap its characters `[start, end)`.

    Counts the splitter's words in prefixes: a span boundary inside a word (the prefix and the rest together
    have one word more than the text) puts that word in the span.
    """
    parts = [p for t, (s, e) in zip(texts, spans) for p in (t[:s], t[:e], t[s:], t)]
    counts = [len(w) for w in split_words(parts)]
    out = []
    for i, (text, (start, end)) in enumerate(zip(texts, spans)):
        head, upto, tail, whole = counts[4 * i:4 * i + 4]
        first = head - 1 if head + tail > whole else head
        if upto <= first:
            raise ValueError(f"span {start}:{end} ({text[start:end]!r}) covers no word of {text!r}")
        out.append((first, upto))
    return out
