"""Reference peer for `benchmarks.pretraining_data`: google-research/bert's create_pretraining_data.py algorithm.

    .venv/bin/python -m benchmarks.reference_create_pretraining_data --input FILE[.gz] --vocab VOCAB \\
        --output OUT.tfrecord [--dupe_factor 5] [--max_seq_length 128] [--max_predictions_per_seq 20] \\
        [--masked_lm_prob 0.15] [--short_seq_prob 0.1] [--seed 12345]

A straightforward single-process, pure-Python implementation of the original script's algorithm, written
from scratch for this benchmark (no code fetched or copied), keeping the original's structure and costs:
  - every document is loaded into memory first (one sentence per line, a blank line between documents), each
    line tokenized on its own, as the original does line by line; empty documents are dropped;
  - the per-line tokenizer is HuggingFace `tokenizers`' `BertWordPieceTokenizer(vocab, lowercase=True)`
    `.encode(line, add_special_tokens=False).tokens` (Rust) instead of the original's pure-Python
    `FullTokenizer`: the same WordPiece pieces, but much faster, so this makes the peer faster, not slower;
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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one line at a time: no threads to speak of


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
    args = parser.parse_args(argv)

    from tokenizers import BertWordPieceTokenizer

    started = time.perf_counter()
    vocab = load_vocab(args.vocab)
    vocab_words = list(vocab.keys())
    tokenizer = BertWordPieceTokenizer(args.vocab, lowercase=True)
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
