"""BERT's sentence pairs: turning documents into `[CLS] A [SEP] B [SEP]` instances with next-sentence labels.

Semantics of google-research/bert's `create_instances_from_document`, per document and duplicate pass:
  - a target length `max_seq_length - 3`, or with probability `short_seq_prob` a random one in
    `[2, max_seq_length - 3]` (chosen once per document and pass, as the original does);
  - sentences are gathered into a chunk until it reaches the target (or the document ends);
  - segment A is the chunk's first `a_end` sentences, `a_end` uniform in `[1, len(chunk) - 1]` (1 for a
    one-sentence chunk);
  - segment B is the rest of the chunk, or, with probability 0.5 and always for a one-sentence chunk, a
    span of another document starting at a random sentence, long enough for the target; the chunk's unused
    sentences are then put back and start the next chunk;
  - the pair is truncated to `max_seq_length - 3` by removing tokens from the longer segment, each from its
    front or its back with probability 0.5 (here the counts are drawn at once: the same distribution).
Random documents come from the `others` this function is given (the Beam job passes the other documents
of the same hash bucket), so no worker needs the corpus. The random generator is injected.

A document is one flat id array plus sentence boundaries, so that segments (always runs of consecutive
sentences) are array views, never copies.
"""

import dataclasses
import random
from typing import NamedTuple, Sequence

import numpy as np

MIN_SEQ_LENGTH = 5

class Document(NamedTuple):
    """`ids[bounds[i]:bounds[i + 1]]` is sentence `i`; sentences are non-empty."""

    ids: np.ndarray  # [T] token ids
    bounds: list[int]  # [S + 1], bounds[0] == 0

    @classmethod
    def from_sentences(cls, sentences: Sequence[Sequence[int]]) -> "Document":
        lengths = [len(s) for s in sentences]
        return cls(np.concatenate([np.asarray(s, np.int32) for s in sentences]),
                   [0] + np.cumsum(lengths).tolist())

    def __len__(self) -> int:
        return len(self.bounds) - 1


@dataclasses.dataclass(frozen=True)
class PairConfig:
    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    random_next_prob: float = 0.5

    def __post_init__(self):
        if self.max_seq_length < MIN_SEQ_LENGTH:  # a random target is drawn from [2, max_seq_length - 3]
            raise ValueError(f"max_seq_length {self.max_seq_length} is below {MIN_SEQ_LENGTH}, the shortest "
                             f"pair: [CLS] a [SEP] b [SEP]")


class Instance(NamedTuple):
    """One pair before packing and masking. `is_random_next` is the next-sentence label (1 = random);
    `target_length` the pass's target and `forced_random` whether B had to be random (a one-sentence
    chunk): both for statistics."""

    tokens_a: np.ndarray
    tokens_b: np.ndarray
    is_random_next: bool
    target_length: int
    forced_random: bool = False


def truncated_lengths(len_a: int, len_b: int, max_tokens: int) -> tuple[int, int]:
    """Final lengths after BERT's `truncate_seq_pair` (remove from the longer one; ties cut B)."""
    if len_a + len_b <= max_tokens:
        return len_a, len_b
    excess = len_a + len_b - max_tokens
    if len_a > len_b:
        len_a -= min(len_a - len_b, excess)
    elif len_b > len_a:
        len_b -= min(len_b - len_a, excess)
    if len_a + len_b > max_tokens:  # equal now: cuts alternate, B first
        len_a, len_b = (max_tokens + 1) // 2, max_tokens // 2
    return len_a, len_b


def _trim(tokens: np.ndarray, keep: int, rng: random.Random) -> np.ndarray:
    removed = len(tokens) - keep
    if removed <= 0:
        return tokens
    front = rng.getrandbits(removed).bit_count()  # Binomial(removed, 0.5): each cut front or back
    return tokens[front:front + keep]


def _random_span(others: Sequence[Document], target: int, below) -> np.ndarray:
    ids, bounds = others[below(len(others))]
    last = len(bounds) - 1
    start = below(last)
    end = start + 1  # sentences start..end-1, the first that reaches the target included
    while end < last and bounds[end] - bounds[start] < target:
        end += 1
    return ids[bounds[start]:bounds[end]]


def sentence_pairs(document: Document, others: Sequence[Document], config: PairConfig,
                   rng: random.Random) -> list[Instance]:
    """All instances of one document for one duplicate pass.

    Args:
      document: its token ids and sentence bounds.
      others: documents random next segments may come from (must not include `document`; may be empty,
        then every pair is a true continuation and one-sentence chunks are dropped).
      rng: the pass's generator (the Beam job seeds it from `(seed, document id, pass)`).
    """
    # `rng.randint(a, b)` and `rng.randrange(n)` are `a + rng._randbelow(b - a + 1)` and `rng._randbelow(n)`
    # in CPython: called directly (always with a positive bound), they make the same draws without the
    # argument checks, which cost as much as the rest of a pair.
    below = rng._randbelow
    max_tokens = config.max_seq_length - 3
    target = max_tokens
    if rng.random() < config.short_seq_prob:
        target = 2 + below(max_tokens - 1)  # randint(2, max_tokens)
    ids, bounds = document
    n_sentences = len(bounds) - 1
    random_next_prob = config.random_next_prob
    instances, first, i = [], 0, 0  # the chunk is sentences first..i
    while i < n_sentences:
        if i == n_sentences - 1 or bounds[i + 1] - bounds[first] >= target:
            n_chunk = i + 1 - first
            a_end = first + (1 + below(n_chunk - 1) if n_chunk >= 2 else 1)  # randint(1, n_chunk - 1)
            tokens_a = ids[bounds[first]:bounds[a_end]]
            random_next = bool(others) and (n_chunk == 1 or rng.random() < random_next_prob)
            tokens_b = None
            if random_next:
                tokens_b = _random_span(others, target - len(tokens_a), below)
                i = a_end - 1  # put the unused sentences back
            elif n_chunk >= 2:
                tokens_b = ids[bounds[a_end]:bounds[i + 1]]
            if tokens_b is not None:  # else: one sentence and nowhere to draw B from
                keep_a, keep_b = truncated_lengths(len(tokens_a), len(tokens_b), max_tokens)
                instances.append(Instance(_trim(tokens_a, keep_a, rng), _trim(tokens_b, keep_b, rng),
                                          random_next, target, n_chunk == 1))
            first = i + 1
        i += 1
    return instances


def pack(instances: Sequence[Instance], max_seq_length: int, cls_id: int, sep_id: int) -> dict[str, np.ndarray]:
    """`[CLS] A [SEP] B [SEP]`, 0-padded: `input_ids`, `input_mask`, `segment_ids` `[N, L]` and
    `next_sentence_labels` `[N, 1]`, int64. Vectorized: one scatter per segment for the whole batch."""
    n = len(instances)
    len_a = np.fromiter((len(i.tokens_a) for i in instances), np.int64, n)  # [N]
    len_b = np.fromiter((len(i.tokens_b) for i in instances), np.int64, n)  # [N]
    input_ids = np.zeros((n, max_seq_length), np.int64)
    rows = np.arange(n)
    for tokens, lengths, first in (([i.tokens_a for i in instances], len_a, 1),
                                   ([i.tokens_b for i in instances], len_b, 2 + len_a)):
        flat = np.concatenate(tokens)  # [sum(lengths)]
        row = np.repeat(rows, lengths)
        within = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        input_ids[row, np.repeat(first, lengths) + within if np.ndim(first) else first + within] = flat
    total = 3 + len_a + len_b  # [N]
    input_ids[:, 0] = cls_id
    input_ids[rows, 1 + len_a] = sep_id
    input_ids[rows, total - 1] = sep_id
    position = np.arange(max_seq_length)[np.newaxis, :]  # [1, L]
    input_mask = (position < total[:, np.newaxis]).astype(np.int64)
    segment_ids = ((position >= (2 + len_a)[:, np.newaxis]) & (position < total[:, np.newaxis])).astype(np.int64)
    labels = np.fromiter((i.is_random_next for i in instances), np.int64, n).reshape(n, 1)
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "next_sentence_labels": labels}
