"""Reference peer for `benchmarks.data.pretraining_data`: google-research/bert's create_pretraining_data.py algorithm.

    .venv/bin/python -m benchmarks.peers.reference_create_pretraining_data --input FILE[.gz] --vocab VOCAB \\
        --output OUT.tfrecord [--dupe_factor 5] [--max_seq_length 128] [--max_predictions_per_seq 20] \\
        [--masked_lm_prob 0.15] [--short_seq_prob 0.1] [--seed 12345]

A straightforward single-process, pure-Python implementation of the original script's algorithm, written
from scratch for this benchmark (no code fetched or copied), keeping the original's structure and costs:
  - every document is loaded into memory first (one sentence per line, a blank line between documents), each
    line tokenized on its own, as the original does line by line; empty documents are dropped;
  - the per-line tokenizer is, by default (`--tokenizer original`), the original's algorithm in pure Python
    (`OriginalTokenizer`: basic tokenizer, then greedy longest-match-first WordPiece), as the original
    script runs it; `--tokenizer hf` swaps in HuggingFace `tokenizers`' `BertWordPieceTokenizer(vocab,
    lowercase=True).encode(line, add_special_tokens=False).tokens` (Rust): the same pieces, about 3x faster
    end to end, a stronger peer than the original;
  - one `random.Random(seed)` drives everything: the documents are shuffled, then for each duplicate pass
    and each document `create_instances_from_document` runs (target length `max_seq_length - 3`, or with
    probability `short_seq_prob` `randint(2, max)`; sentences gathered into a chunk until the target;
    `a_end = randint(1, len(chunk) - 1)`; B is the rest of the chunk or, with probability 0.5 and always for
    a one-sentence chunk, a span of a random other document (up to 10 tries to pick one that is not the
    current one) with the chunk's unused sentences put back; `truncate_seq_pair` pops one token at a time
    from the front or back of the longer segment; `[CLS] A [SEP] B [SEP]`; `create_masked_lm_predictions`:
    candidate indexes shuffled, `min(max_pred, max(1, round(len * prob)))` predictions, 80% [MASK], 10% kept,
    10% a random vocabulary word);
  - as in the original, all instances are kept in memory and shuffled with the same generator before
    writing;
  - each instance is written as a `tf.train.Example` (input_ids, input_mask, segment_ids padded to
    max_seq_length; masked_lm_positions, masked_lm_ids, masked_lm_weights (float) padded to
    max_predictions_per_seq; next_sentence_labels) with `tf.io.TFRecordWriter`, to one output file.
Prints the number of instances written.
"""

import argparse
import gzip
import os
import random
import sys
import time
import unicodedata

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one line at a time: no threads to speak of


class OriginalTokenizer:
    """The original script's tokenizer, in pure Python as it is there (written here from its description):
    a basic tokenizer (drop control characters and U+FFFD, spaces around CJK ideographs, whitespace split,
    lower case and accents stripped, split on punctuation) and greedy longest-match-first WordPiece per word
    (words over 200 characters are `[UNK]`). `encode(line).tokens` gives the line's pieces, like the
    HuggingFace tokenizer it can replace."""

    class _Encoding:
        __slots__ = ("tokens",)

        def __init__(self, tokens):
            self.tokens = tokens

    def __init__(self, vocab: dict[str, int], max_word_chars: int = 200):
        self.vocab = vocab
        self.max_word_chars = max_word_chars

    def encode(self, line: str, add_special_tokens: bool = False):
        pieces = []
        for word in self._basic(line):
            pieces.extend(self._wordpiece(word))
        return self._Encoding(pieces)

    @staticmethod
    def _is_cjk(cp: int) -> bool:
        return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
                or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
                or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

    @staticmethod
    def _is_punctuation(char: str) -> bool:
        cp = ord(char)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(char).startswith("P")

    def _basic(self, text: str) -> list[str]:
        cleaned = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD:
                continue
            if char in " \t\n\r" or unicodedata.category(char) == "Zs":
                cleaned.append(" ")
            elif unicodedata.category(char) in ("Cc", "Cf"):
                continue
            elif self._is_cjk(cp):
                cleaned.append(f" {char} ")
            else:
                cleaned.append(char)
        words = []
        for token in "".join(cleaned).split():
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(c for c in token if unicodedata.category(c) != "Mn")
            current = []
            for char in token:
                if self._is_punctuation(char):
                    if current:
                        words.append("".join(current))
                        current = []
                    words.append(char)
                else:
                    current.append(char)
            if current:
                words.append("".join(current))
        return words

    def _wordpiece(self, word: str) -> list[str]:
        if len(word) > self.max_word_chars:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = piece
                    break
                end -= 1
            if found is None:
                return ["[UNK]"]
            pieces.append(found)
            start = end
        return pieces


class TrainingInstance:
    __slots__ = ("tokens", "segment_ids", "is_random_next", "masked_lm_positions", "masked_lm_labels")

    def __init__(self, tokens, segment_ids, is_random_next, masked_lm_positions, masked_lm_labels):
        self.tokens = tokens
        self.segment_ids = segment_ids
        self.is_random_next = is_random_next
        self.masked_lm_positions = masked_lm_positions
        self.masked_lm_labels = masked_lm_labels


def read_documents(path: str, tokenizer) -> list[list[list[str]]]:
    """All documents of the corpus, each a list of tokenized sentences (lists of WordPiece strings)."""
    opener = gzip.open if path.endswith(".gz") else open
    documents = [[]]
    with opener(path, "rt", encoding="utf-8", errors="replace") as reader:
        for line in reader:
            line = line.strip()
            if not line:  # empty lines delimit documents
                documents.append([])
                continue
            tokens = tokenizer.encode(line, add_special_tokens=False).tokens
            if tokens:
                documents[-1].append(tokens)
    return [d for d in documents if d]


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Truncates the pair in place to max_num_tokens, one token at a time from the longer one."""
    while True:
        if len(tokens_a) + len(tokens_b) <= max_num_tokens:
            break
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1
        if rng.random() < 0.5:  # from the front or the back, to add more randomness and avoid biases
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng):
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token == "[CLS]" or token == "[SEP]":
            continue
        cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms = []
    covered_indexes = set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        if any(index in covered_indexes for index in index_set):
            continue
        for index in index_set:
            covered_indexes.add(index)
            if rng.random() < 0.8:  # 80%: [MASK]
                masked_token = "[MASK]"
            elif rng.random() < 0.5:  # 10%: keep the original
                masked_token = tokens[index]
            else:  # 10%: a random word
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append((index, tokens[index]))
    assert len(masked_lms) <= num_to_predict
    masked_lms.sort(key=lambda x: x[0])
    return output_tokens, [p for p, _ in masked_lms], [label for _, label in masked_lms]


def create_instances_from_document(all_documents, document_index, max_seq_length, short_seq_prob,
                                   masked_lm_prob, max_predictions_per_seq, vocab_words, rng):
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3  # [CLS], [SEP], [SEP]
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])

                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(current_chunk) - a_end  # put the unused segments back
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                assert len(tokens_a) >= 1
                assert len(tokens_b) >= 1

                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = create_masked_lm_predictions(
                    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng)
                instances.append(TrainingInstance(tokens, segment_ids, is_random_next, positions, labels))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def create_training_instances(path, tokenizer, vocab_words, max_seq_length, dupe_factor, short_seq_prob,
                              masked_lm_prob, max_predictions_per_seq, rng):
    all_documents = read_documents(path, tokenizer)
    rng.shuffle(all_documents)
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(all_documents)):
            instances.extend(create_instances_from_document(
                all_documents, document_index, max_seq_length, short_seq_prob, masked_lm_prob,
                max_predictions_per_seq, vocab_words, rng))
    rng.shuffle(instances)
    return all_documents, instances


def write_instances(instances, vocab, max_seq_length, max_predictions_per_seq, output):
    import tensorflow as tf

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    def float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=list(values)))

    written = 0
    with tf.io.TFRecordWriter(output) as writer:
        for instance in instances:
            input_ids = [vocab[t] for t in instance.tokens]
            input_mask = [1] * len(input_ids)
            segment_ids = list(instance.segment_ids)
            assert len(input_ids) <= max_seq_length
            while len(input_ids) < max_seq_length:
                input_ids.append(0)
                input_mask.append(0)
                segment_ids.append(0)
            masked_lm_positions = list(instance.masked_lm_positions)
            masked_lm_ids = [vocab[t] for t in instance.masked_lm_labels]
            masked_lm_weights = [1.0] * len(masked_lm_ids)
            while len(masked_lm_positions) < max_predictions_per_seq:
                masked_lm_positions.append(0)
                masked_lm_ids.append(0)
                masked_lm_weights.append(0.0)
            features = {
                "input_ids": int_feature(input_ids),
                "input_mask": int_feature(input_mask),
                "segment_ids": int_feature(segment_ids),
                "masked_lm_positions": int_feature(masked_lm_positions),
                "masked_lm_ids": int_feature(masked_lm_ids),
                "masked_lm_weights": float_feature(masked_lm_weights),
                "next_sentence_labels": int_feature([1 if instance.is_random_next else 0]),
            }
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
            written += 1
    return written


def load_vocab(path: str) -> dict[str, int]:
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for index, line in enumerate(f):
            token = line.rstrip("\n").strip()
            if token:
                vocab.setdefault(token, index)
    return vocab


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="one corpus file in BERT format (.gz ok)")
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--output", required=True, help="one .tfrecord file")
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--masked_lm_prob", type=float, default=0.15)
    parser.add_argument("--short_seq_prob", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--tokenizer", choices=["original", "hf"], default="original",
                        help="original: the pure-Python tokenizer of the original script; hf: HuggingFace "
                             "`tokenizers` (Rust; same pieces, faster)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    vocab = load_vocab(args.vocab)
    vocab_words = list(vocab.keys())
    if args.tokenizer == "hf":
        from tokenizers import BertWordPieceTokenizer

        tokenizer = BertWordPieceTokenizer(args.vocab, lowercase=True)
    else:
        tokenizer = OriginalTokenizer(vocab)
    rng = random.Random(args.seed)
    documents, instances = create_training_instances(
        args.input, tokenizer, vocab_words, args.max_seq_length, args.dupe_factor, args.short_seq_prob,
        args.masked_lm_prob, args.max_predictions_per_seq, rng)
    made = time.perf_counter()
    written = write_instances(instances, vocab, args.max_seq_length, args.max_predictions_per_seq, args.output)
    print(f"reference: {len(documents)} documents, {written} instances, created in {made - started:.1f} s, "
          f"written in {time.perf_counter() - made:.1f} s -> {args.output}", file=sys.stderr)
    print(written)


if __name__ == "__main__":
    main()
