"""Beam DoFns that turn documents into serialized examples, batching all TF work.

`TokenizeDocuments` tokenizes many documents per call; `MakeExamples` receives one hash bucket of
documents (after a `GroupByKey`), builds the model's examples with the pure functions of `preprocessing/`
(`sentence_pairs`, `masking`, `lm_windows`, `schema`) and writes them as the bucket's shard: serialized
examples never travel through a shuffle (they are 10x the size of the tokenized documents). Every random
choice is seeded from `(seed, document id, duplicate pass, ...)` through `stable_random`, so the bytes do not
depend on the runner, the workers or the bundles. DoFns hold only picklable config; TF objects are built in
`setup` and never pickled (`SetupDoFn`). Each bucket's counters travel in its shard summary.
"""

import collections
import dataclasses
import random

import numpy as np

from pipeline.beam_options import Counts, SetupDoFn
from pipeline.documents import NAMESPACE
from pipeline.pretraining_job import PretrainingDataJob
from preprocessing import stable_random

_CHUNK = 4096  # examples per TF call
# The example fields' defaults are the job's: one place says what a run without the flag makes.
_JOB_DEFAULTS = {f.name: f.default for f in dataclasses.fields(PretrainingDataJob)}


@dataclasses.dataclass(frozen=True)
class ExampleConfig:
    """What the DoFns need to make one model's examples: the part of a `PretrainingDataJob` they see, resolved
    (the vocabulary's tokens, its case, the sequence length). Fields as the job's (`pipeline.pretraining_job`)."""

    model: str
    vocab_tokens: tuple[str, ...]
    lower_case: bool
    max_seq_length: int
    max_predictions_per_seq: int = _JOB_DEFAULTS["max_predictions_per_seq"]
    masked_lm_prob: float = _JOB_DEFAULTS["masked_lm_prob"]
    dupe_factor: int = _JOB_DEFAULTS["dupe_factor"]
    short_seq_prob: float = _JOB_DEFAULTS["short_seq_prob"]
    whole_word_mask: bool = _JOB_DEFAULTS["whole_word_mask"]
    masking: str = _JOB_DEFAULTS["masking"]
    seed: int = _JOB_DEFAULTS["seed"]

    def features(self) -> tuple:
        """The records' features (`preprocessing.schema`), as `metadata.json` describes them."""
        from preprocessing import schema

        return schema.features_for({"model": self.model, "config": {
            "max_seq_length": self.max_seq_length, "max_predictions_per_seq": self.max_predictions_per_seq,
            "masking": self.masking}})


def _tokenizer(config: ExampleConfig):
    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer

    return WordPieceTokenizer(Vocabulary(config.vocab_tokens), lower_case=config.lower_case)


class TokenizeDocuments(SetupDoFn):
    """A batch of `(doc id, sentences)` -> `(doc id, tokenized document)`; empty sentences dropped.

    bert/gpt: a `sentence_pairs.Document` (flat ids + sentence bounds). bilm: a list of `(words,
    whole-word ids)` pairs, one per sentence.
    """

    setup_state = ("_encode", "_tf")

    def __init__(self, config: ExampleConfig):
        self.config = config

    def setup(self):
        import tensorflow as tf

        tokenizer = _tokenizer(self.config)
        encode = tokenizer.words_and_ids if self.config.model == "bilm" else tokenizer.tokenize
        # One trace (fixed signature), no autograph: there is no tensor-dependent Python control flow.
        self._encode = tf.function(encode, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        self._tf = tf

    def process(self, batch):
        lines = [line for _, sentences in batch for line in sentences]
        if self.config.model == "bilm":
            yield from self._bilm(batch, lines)
            return
        ids = self._encode(self._tf.constant(lines))  # [lines, (pieces)]
        values = ids.flat_values.numpy().astype(np.int32)
        splits = ids.row_splits.numpy()
        from preprocessing.sentence_pairs import Document

        line = 0
        for doc_id, sentences in batch:
            bounds = splits[line:line + len(sentences) + 1]
            line += len(sentences)
            kept = np.concatenate([[True], np.diff(bounds) > 0])  # drop empty sentences
            bounds = bounds[kept]
            if len(bounds) > 1:
                yield doc_id, Document(values[bounds[0]:bounds[-1]], (bounds - bounds[0]).tolist())

    def _bilm(self, batch, lines):
        words, ids = self._encode(self._tf.constant(lines))
        per_line = list(zip(_split(words), _split(ids)))
        line = 0
        for doc_id, sentences in batch:
            rows = [r for r in per_line[line:line + len(sentences)] if len(r[1])]
            line += len(sentences)
            if rows:
                yield doc_id, rows


def _split(ragged):
    values = ragged.flat_values.numpy()
    if values.dtype != object:
        values = values.astype(np.int32)
    splits = ragged.row_splits.numpy()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]


class MakeExamples(SetupDoFn):
    """`((bucket, num_shards), [(doc id, document) or None, ...])` -> the bucket's shard file, and `{"file",
    "examples", "num_shards", "counters"}` (documents and tokens in the bucket, instances, masked tokens, ...).
    The shard count travels in the key (`pipeline.buckets`: no side input); a bare `bucket` key takes it from
    the `num_shards` argument instead.

    Examples are written in chunks of 4096, each chunk in a pseudo-random order drawn from `(seed, bucket,
    chunk)`, so instances of one document are spread apart; the reader's shuffle mixes further.
    """

    setup_state = ("_special", "_info", "_masking", "_features", "_mask", "_schema")

    def __init__(self, config: ExampleConfig, output_dir: str, gzip: bool):
        self.config = config
        self.output_dir, self.gzip = output_dir, gzip

    def setup(self):
        import tensorflow as tf

        from preprocessing import masking, schema
        from preprocessing.vocabulary import Vocabulary

        c = self.config
        vocab = Vocabulary(c.vocab_tokens)
        self._special = vocab.special_ids()
        self._info = masking.VocabInfo.from_vocabulary(vocab, c.whole_word_mask)
        self._masking = masking.MaskingConfig(c.masked_lm_prob, c.max_predictions_per_seq, c.whole_word_mask)
        self._features = c.features()
        spec = [tf.TensorSpec([None, c.max_seq_length], tf.int64)] * 2 + [tf.TensorSpec([None], tf.int64)]
        self._mask = tf.function(lambda ids, m, s: masking.mask_tokens(ids, m, s, self._info, self._masking),
                                 input_signature=spec, autograph=False)
        self._schema = schema

    def process(self, element, num_shards: int = 0):
        from pipeline.shard_writer import ShardWriter

        key, members = element
        bucket, num_shards = key if isinstance(key, tuple) else (key, num_shards)
        members = sorted(m for m in members if m is not None)
        make = {"bert": self._bert, "gpt": self._gpt, "bilm": self._bilm}[self.config.model]
        counts = collections.Counter({k: 0 for k in _COUNTERS[self.config.model]})
        counts["documents_with_tokens"] = len(members)
        counts["tokens"] = sum(_token_count(doc) for _, doc in members)
        with ShardWriter(self.output_dir, self.config.model, bucket, num_shards, self.gzip) as writer:
            for chunk, serialized in enumerate(make(members, counts) if members else ()):
                order = random.Random(stable_random.stable_hash(self.config.seed, bucket, chunk))
                order.shuffle(serialized)
                writer.write_all(serialized)
        yield {**writer.summary(), "num_shards": num_shards, "counters": dict(Counts(counts).report(NAMESPACE))}

    def _emit(self, batch: dict, counts) -> list[bytes]:
        serialized = self._schema.serialize(batch, self._features)
        counts["instances"] += len(serialized)
        return serialized

    def _bert(self, members, counts):
        from preprocessing.sentence_pairs import PairConfig, pack, sentence_pairs

        c = self.config
        pair_config = PairConfig(c.max_seq_length, c.short_seq_prob)
        documents = [doc for _, doc in members]
        pending, seeds = [], []
        for index, (doc_id, document) in enumerate(members):
            others = documents[:index] + documents[index + 1:]
            for dupe in range(c.dupe_factor):
                rng = random.Random(stable_random.stable_hash(c.seed, doc_id, dupe))
                instances = sentence_pairs(document, others, pair_config, rng)
                if instances:
                    counts["document_passes"] += 1
                    counts["short_target_passes"] += int(instances[0].target_length < c.max_seq_length - 3)
                pending += instances
                pass_seed = stable_random.stable_hash(c.seed, doc_id, dupe, "mask") >> 16  # room for + k
                seeds += [pass_seed + k for k in range(len(instances))]
                if len(pending) >= _CHUNK:
                    yield self._bert_chunk(pending, seeds, pack, counts)
                    pending, seeds = [], []
        if pending:
            yield self._bert_chunk(pending, seeds, pack, counts)

    def _bert_chunk(self, instances, seeds, pack, counts):
        batch = pack(instances, self.config.max_seq_length, self._special["[CLS]"], self._special["[SEP]"])
        counts["random_next_instances"] += int(batch["next_sentence_labels"].sum())
        counts["forced_random_next_instances"] += sum(i.forced_random for i in instances)
        if self.config.masking == "static":
            masked = self._mask(batch["input_ids"], batch["input_mask"], np.array(seeds, np.int64))
            batch.update({k: v.numpy() for k, v in masked.items()})
            counts["masked_tokens"] += int(batch["masked_lm_weights"].sum())
        return self._emit(batch, counts)

    def _gpt(self, members, counts):
        from preprocessing.lm_windows import gpt_stream, windows

        c = self.config
        stream = gpt_stream([doc.ids for _, doc in members], self._special["[SEP]"])
        cut = windows(stream, c.max_seq_length + 1, c.max_seq_length)
        counts["tail_tokens_dropped"] += _tail(len(stream), len(cut), c.max_seq_length + 1, c.max_seq_length)
        yield from self._windows({"input_ids": cut}, counts)

    def _bilm(self, members, counts):
        from preprocessing.lm_windows import bilm_stream, windows

        c = self.config
        words, ids = bilm_stream([s for _, doc in members for s in doc], self._special["[CLS]"],
                                 self._special["[SEP]"])
        cut_ids = windows(ids, c.max_seq_length + 2, c.max_seq_length)
        counts["tail_tokens_dropped"] += _tail(len(ids), len(cut_ids), c.max_seq_length + 2, c.max_seq_length)
        yield from self._windows({"tokens": windows(words, c.max_seq_length + 2, c.max_seq_length),
                                  "token_ids": cut_ids}, counts)

    def _windows(self, batch, counts):
        n = len(next(iter(batch.values())))
        for start in range(0, n, _CHUNK):
            yield self._emit({k: v[start:start + _CHUNK] for k, v in batch.items()}, counts)


# Counters each model reports (0 included), besides documents_with_tokens and tokens.
_COUNTERS = {"bert": ("instances", "masked_tokens", "random_next_instances", "forced_random_next_instances",
                      "document_passes", "short_target_passes"),
             "gpt": ("instances", "tail_tokens_dropped"),
             "bilm": ("instances", "tail_tokens_dropped")}


def _token_count(document) -> int:
    """Tokens of a tokenized document: a `sentence_pairs.Document` (bert, gpt) or biLM `(words, ids)` rows."""
    if isinstance(document, list):
        return sum(len(ids) for _, ids in document)
    return len(document.ids)


def _tail(stream_length: int, n_windows: int, width: int, stride: int) -> int:
    """Stream items after the last window."""
    covered = (n_windows - 1) * stride + width if n_windows else 0
    return stream_length - covered
