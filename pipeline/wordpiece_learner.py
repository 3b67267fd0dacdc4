"""Learning a WordPiece vocabulary from word counts (the single-worker step after distributed counting).

The counting happens in Beam; this step turns the `(word, count)` table into a BERT-style `vocab.txt`.
The merge learning is delegated to HuggingFace `tokenizers`' `WordPieceTrainer` (Rust, seconds for a
Wikipedia-sized count table; tensorflow-text's own learner did not finish 7.6 MB in 15 minutes). The words it
sees are the project's own normalized BERT words, fed with their counts, so its normalizer and splitter play
no part: the vocabulary is learned on exactly the units the project's tokenizer will cover.

Layout of the result, BERT's practice: special tokens, optional `[unused*]` slots, every kept character both
as a word start and as a `##` continuation, then the learned pieces in the trainer's order.
"""

import collections
import dataclasses
from typing import Iterable, Iterator

from commands.job_fields import COUNT, NON_NEGATIVE, checked
from commands.user_errors import UserError
from preprocessing.vocabulary import SPECIAL_TOKENS, SUFFIX_INDICATOR

# Words are fed to the trainer as space-joined text in chunks of about this many characters.
_CHUNK_CHARS = 1 << 20


@checked({"vocab_size": COUNT, "num_unused": NON_NEGATIVE, "min_frequency": COUNT, "limit_alphabet": COUNT})
@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """Args:
      vocab_size: entries in the result, special and unused tokens included.
      reserved_tokens: tokens placed first, in order (BERT's five special tokens by default).
      num_unused: `[unused0]`..`[unusedN-1]` slots after the reserved tokens, for later task tokens.
      min_frequency: words seen fewer times do not drive merges.
      limit_alphabet: at most this many distinct characters (the most frequent) are kept.
    """

    vocab_size: int = 30522
    reserved_tokens: tuple[str, ...] = SPECIAL_TOKENS
    num_unused: int = 0
    min_frequency: int = 2
    limit_alphabet: int = 1000


def _as_text_chunks(word_counts: Iterable[tuple[str, int]]) -> Iterator[str]:
    """Yields text in which each word occurs exactly `count` times (the trainer has no count input)."""
    parts, size = [], 0
    for word, count in word_counts:
        piece = (word + " ") * count
        parts.append(piece)
        size += len(piece)
        if size >= _CHUNK_CHARS:
            yield "".join(parts)
            parts, size = [], 0
    if parts:
        yield "".join(parts)


def learn_vocabulary(word_counts: Iterable[tuple[str, int]], config: LearnerConfig) -> list[str]:
    """Returns the vocabulary (a list of tokens, id = position) learned from `(word, count)` pairs.

    Raises:
      UserError: when there is nothing to learn from, or the size cannot hold the reserved tokens.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    word_counts = sorted((w, c) for w, c in word_counts if w and " " not in w and c > 0)
    if not word_counts:
        raise UserError("the corpus holds no words to learn a vocabulary from: check --input")
    reserved = list(config.reserved_tokens) + [f"[unused{i}]" for i in range(config.num_unused)]
    if config.vocab_size <= len(reserved):
        raise UserError(f"--vocab_size {config.vocab_size} leaves no room after {len(reserved)} reserved tokens: "
                        f"use --vocab_size > {len(reserved)}")

    alphabet = _alphabet(word_counts, config.limit_alphabet)
    continuations = [SUFFIX_INDICATOR + c for c in alphabet]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=SUFFIX_INDICATOR))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=config.vocab_size, min_frequency=config.min_frequency, show_progress=False,
        # The `##` forms are declared up front (as special tokens) so that their ids do not depend on the
        # trainer's hash-map order; with every id fixed, its tie-breaking and so its merges are deterministic.
        special_tokens=reserved + continuations, limit_alphabet=config.limit_alphabet, initial_alphabet=alphabet,
        continuing_subword_prefix=SUFFIX_INDICATOR)
    tokenizer.train_from_iterator(_as_text_chunks(word_counts), trainer=trainer)
    learned = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])

    characters = alphabet + continuations
    head = reserved + characters
    seen = set(head)
    tail = [t for t, _ in learned if t not in seen][:max(0, config.vocab_size - len(head))]
    return (head + _by_frequency(tokenizer, tail, word_counts))[:config.vocab_size]


def _by_frequency(tokenizer, tokens: list[str], word_counts: list[tuple[str, int]]) -> list[str]:
    """Orders learned pieces by how often the corpus uses them (ties by text), BERT's layout. The trainer's
    own order breaks ties by hash-map order, which changes from run to run; this order does not."""
    ids = tokenizer.get_vocab()
    uses = collections.Counter()
    words = [w for w, _ in word_counts]
    for (_, count), encoding in zip(word_counts, tokenizer.encode_batch(words, add_special_tokens=False)):
        for piece_id in encoding.ids:
            uses[piece_id] += count
    return sorted(tokens, key=lambda t: (-uses[ids[t]], t))


def _alphabet(word_counts: list[tuple[str, int]], limit: int) -> list[str]:
    """The `limit` most frequent characters (ties by code point), sorted by code point."""
    freq: dict[str, int] = {}
    for word, count in word_counts:
        for ch in word:
            freq[ch] = freq.get(ch, 0) + count
    kept = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return sorted(ch for ch, _ in kept)
