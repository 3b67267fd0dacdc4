"""Left-to-right (GPT) and bidirectional (biLM) language-model examples: token streams cut into windows.

GPT: each document's token ids followed by an end-of-document id (`[SEP]` in a BERT vocabulary), the
documents of a group concatenated, cut into windows of `max_seq_length + 1` ids with a stride of
`max_seq_length`, so every id but the stream's first is a target exactly once and nothing is padding.
The tail shorter than a window is dropped (and counted by the job).

biLM (ELMo): each sentence as `<S> w_1 ... w_n </S>` (BERT words, as the basic tokenizer splits them),
sentences concatenated into one stream like bilm-tf does, cut into windows of `num_steps + 2` tokens with a
stride of `num_steps`. Position `t` in `1..num_steps` of a window is an input; its forward target is the token
at `t + 1` and its backward target the token at `t - 1`, so one window serves both directions with aligned
positions and no reversed copy of the data. Every stream token but the first and last is an input exactly
once. The softmax ids are the token's id in the WordPiece vocabulary when the word is a whole entry, else
`[UNK]`; `<S>` and `</S>` take `[CLS]` and `[SEP]`. The strings are kept too: the character CNN's ids are
computed from them at read time (`elmo_chars`).
"""

from typing import Sequence

import numpy as np


def windows(stream: np.ndarray, width: int, stride: int) -> np.ndarray:
    """`[S, ...]` stream -> `[N, width, ...]` windows starting every `stride` items; the tail is dropped."""
    if len(stream) < width:
        return np.zeros((0, width) + stream.shape[1:], stream.dtype)
    count = (len(stream) - width) // stride + 1
    starts = np.arange(count) * stride
    return stream[starts[:, None] + np.arange(width)[None, :]]


def gpt_stream(documents: Sequence[np.ndarray], end_of_document_id: int) -> np.ndarray:
    """Concatenates documents' ids, each followed by the end-of-document id."""
    eod = np.array([end_of_document_id], np.int64)
    parts = [p for doc in documents for p in (np.asarray(doc, np.int64), eod)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def bilm_stream(sentences: Sequence[tuple[Sequence[bytes], np.ndarray]], bos_id: int,
                eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """`(words, ids)` per sentence -> the `<S> ... </S>` stream of strings `[S]` and of ids `[S]`."""
    words, ids = [], []
    for sentence_words, sentence_ids in sentences:
        words.extend([b"<S>", *sentence_words, b"</S>"])
        ids.extend([bos_id, *np.asarray(sentence_ids).tolist(), eos_id])
    return np.array(words, dtype=object), np.array(ids, np.int64)
