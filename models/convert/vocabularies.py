"""The vocabulary a converted model_dir gets (`models.convert --from`), checked against the checkpoint's own.

A checkpoint's word embeddings are rows learned for the words of the vocabulary it was trained with: id i is
line i. So a `--vocab` may stand in for the vocabulary that comes with the checkpoint (`vocab.txt` beside it,
a keras-hub preset's `assets/tokenizer/vocabulary.txt`) only with the same lines: one that differs is refused,
saying how many lines differ, unless `--allow_vocab_change`. Where the checkpoint has no vocabulary of its own
(an openai-gpt folder's BPE files, a bilm-tf `weights.hdf5` alone), nothing can check `--vocab`: the file used
and its sha256 are said on stderr and recorded in config.json (`data.vocab_file`, `data.vocab_check`, beside
`data.vocab_sha256`).

Example:
    choice = choose("my_vocab.txt", "hf/vocab.txt", rows=30522, config_path="hf/config.json", allow_change=False)
    # ConversionError: --vocab my_vocab.txt differs from the checkpoint's own vocabulary hf/vocab.txt in 30517
    # of 30522 lines (the first, line 6: 'the' where it has 'a'): ...
"""

import dataclasses
import itertools
import os

from models.convert.common import ConversionError, require_file
from preprocessing.vocabulary import Vocabulary, VocabularyError


@dataclasses.dataclass(frozen=True)
class VocabChoice:
    """The vocabulary used (`vocab`, read from `path`), the checkpoint's own file (`own`, None when it has
    none) and how many lines of `vocab` differ from it (`differing`)."""

    vocab: Vocabulary
    path: str
    own: str | None
    differing: int = 0

    @property
    def check(self) -> str:
        """How `vocab` was checked against the checkpoint, as config.json records it."""
        if self.own is None:
            return "unchecked: the checkpoint has no vocabulary of its own"
        if self.differing:
            return f"differs from {os.path.abspath(self.own)} in {self.differing} lines (--allow_vocab_change)"
        return f"the checkpoint's own ({os.path.abspath(self.own)})"

    def record(self) -> dict:
        """config.json's `data` fields for the vocabulary's origin (its sha256 is `data.vocab_sha256`)."""
        return {"vocab_file": os.path.abspath(self.path), "vocab_check": self.check}

    def note(self) -> str | None:
        """What the user is told on stderr, or None when the vocabulary is the checkpoint's own."""
        said = f"vocabulary {self.path} (sha256 {self.vocab.sha256[:12]}, {len(self.vocab)} entries)"
        if self.own is None:
            return (f"{said}, from --vocab: the checkpoint has no vocabulary of its own to check it against, so "
                    f"it must be the one the checkpoint was trained with (recorded in config.json: data.vocab_file, "
                    f"data.vocab_sha256)")
        if self.differing:
            return (f"{said} differs from the checkpoint's own {self.own} in {self.differing} lines "
                    f"(--allow_vocab_change): those ids start from rows learned for other words")
        return None


def read(path: str, rows: int | None, config_path: str) -> Vocabulary:
    """`path`'s vocabulary, which must have `rows` entries (the word embeddings' rows; None: any size)."""
    try:
        vocab = Vocabulary.from_file(require_file(path, "vocabulary", "--vocab"))
    except VocabularyError as e:
        raise ConversionError(str(e)) from None
    if rows is not None and len(vocab) != rows:
        raise ConversionError(f"the vocabulary {path} has {len(vocab)} entries but the word embeddings have "
                              f"{rows} rows (vocab_size in {config_path})")
    return vocab


def choose(given: str | None, own: str, rows: int | None, config_path: str, allow_change: bool) -> VocabChoice:
    """The vocabulary of a conversion: `given` (`--vocab`), checked against `own` (where the checkpoint's own
    vocabulary is; it may not exist), else `own`. Raises `ConversionError` for a `given` that differs from an
    existing `own` without `allow_change`."""
    has_own = os.path.isfile(own)
    if given is None:
        return VocabChoice(read(own, rows, config_path), own, own)
    vocab = read(given, rows, config_path)
    if not has_own:
        return VocabChoice(vocab, given, None)
    theirs = _lines(own)
    differing = [i for i, (a, b) in enumerate(itertools.zip_longest(vocab.tokens, theirs)) if a != b]
    if differing and not allow_change:
        first = differing[0]
        mine = vocab.tokens[first] if first < len(vocab) else "(no line)"
        there = theirs[first] if first < len(theirs) else "(no line)"
        raise ConversionError(
            f"--vocab {given} differs from the checkpoint's own vocabulary {own} in {len(differing)} of "
            f"{max(len(vocab), len(theirs))} lines (the first, line {first + 1}: {mine!r} where it has {there!r}): "
            f"each id would name another word than the one its embedding row learned; leave out --vocab to use "
            f"{own}, or pass --allow_vocab_change if the new lines are meant")
    return VocabChoice(vocab, given, own, len(differing))


def _lines(path: str) -> list[str]:
    """The entries of a vocabulary file as lines, without judging them (the checkpoint's own file may be one
    this project would not load)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]
