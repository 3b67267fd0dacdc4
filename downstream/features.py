"""Feature-based use of the exported modules: contextual vectors per word and per layer, as users get them.

`ModuleEncoder` loads any of the three exports (`serving.export`'s `hub/` modules) and maps sentences to
per-word vectors for every hidden layer, lowest first:

| export | hidden layers (`layer_names`) | extra |
|---|---|---|
| BERT `hub/encoder` (+ sibling `hub/preprocessor`) | `embeddings` (`embedding_output`), `layer_1`..`layer_L` | |
| GPT `hub/module` | `embeddings` (`embedding_output`), `layer_1`..`layer_L` (`layer_outputs`) | |
| biLM `hub/module` | `word_emb` (doubled to the LSTM width, as ELMo's mix does: `models.scalar_mix.elmo_layers`), `lstm_outputs1`, ... | `elmo` |

Words are BERT's basic-tokenizer words (`preprocessing.basic_tokenizer`, the splitter every export uses;
`downstream.words` splits texts into them, bounded in time and memory).
A word's vector is the mean of its word pieces' vectors (BERT, GPT); the biLM is word-level already. GPT
sees each sentence as a document start (after `[SEP]`, as in pretraining) and only its left context.
Character spans map to the words they overlap (`span_words`), counted with the same splitter, so
punctuation, accents and repeated words map exactly.

Layer choices (`LAYER_CHOICES`, the BERT paper's feature-based comparison, Table 7) combine the hidden
layers `h_0..h_K` (`h_0` = the embeddings): `embeddings`, `last`, `second_to_last`, `sum_last4`,
`concat_last4` (lowest first; with fewer than 4 layers, all of them), `weighted_all` (`sum_k w_k h_k`,
`w_k = 1/(K+1)` unless given); any hidden layer's own name; and for the biLM `elmo`, the module's scalar mix.

CLI (one sentence a line; `--pool none` writes per-word vectors, `mean` one vector per sentence, the mean
of its words' vectors):
    python -m downstream.features --module export/bert --input corpus.txt --output feats.npz \\
        [--layers last,sum_last4,...] [--pool none|mean] [--weights 0.2,0.3,0.5] [--batch_size 64]
`.npz`: one array per layer choice (`[words, D]` or `[sentences, D]`), `row_splits` ([S + 1]: sentence s's
words are rows `row_splits[s]:row_splits[s+1]`), `words`, `sentences`. `.tfrecord`: one `tf.train.Example`
per sentence with `text`, `words`, and per choice `features/<choice>` (flattened `[W, D]` or `[D]`);
a sidecar `<output>.json` records the module, choices, dimensions and pooling for both formats.

The same from Python is one call on a `FeaturesJob`, whose fields are the flags; it writes the same files and
returns a `FeaturesResult` (what the sidecar holds):

    result = run(FeaturesJob(module="export/bert", input="corpus.txt", output="feats.npz",
                             choices=("last", "sum_last4"), pool="mean"))
    result.dims["last"], result.sentences
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the exported graphs use)

from commands.job_fields import COUNT, checked, output_of
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status
from downstream.module import ExportedModule
from downstream.words import span_words, split_words
from models.scalar_mix import elmo_layers

LAYER_CHOICES = ("embeddings", "last", "second_to_last", "sum_last4", "concat_last4", "weighted_all")
DEFAULT_CHOICES = ("last", "second_to_last", "sum_last4", "concat_last4", "weighted_all", "embeddings")
POOLS = ("none", "mean")
OUTPUT_FORMATS = (".npz", ".tfrecord")
def combine(hidden: np.ndarray, choice: str, weights: list[float] | None = None) -> np.ndarray:
    """`[K, ..., D]` hidden layers (lowest first) -> the `choice`'s `[..., D']`."""
    if choice == "embeddings":
        return hidden[0]
    if choice == "last":
        return hidden[-1]
    if choice == "second_to_last":
        return hidden[-2]
    if choice == "sum_last4":
        return hidden[-4:].sum(axis=0)
    if choice == "concat_last4":
        return np.concatenate(list(hidden[-4:]), axis=-1)
    if choice == "weighted_all":
        w = np.full(len(hidden), 1.0 / len(hidden)) if weights is None else np.asarray(weights, np.float64)
        if w.shape != (len(hidden),):
            raise ValueError(f"weighted_all needs {len(hidden)} weights (one per hidden layer), got {len(w)}")
        return np.tensordot(w.astype(hidden.dtype), hidden, axes=1)
    raise ValueError(f"unknown layer choice {choice!r}")


@dataclasses.dataclass
class SentenceVectors:
    """One sentence's words and their vectors: `hidden` [K, W, D] (lowest layer first), `extra` name -> [W, D]."""
    words: list[str]
    hidden: np.ndarray
    extra: dict[str, np.ndarray]


class ModuleEncoder:
    """Sentences -> per-word vectors per layer, for a BERT, GPT or biLM export.

    Loading, the family, the vocabulary, the word grouping and the layer list are `downstream.module`'s
    (`ExportedModule`, the loader fine-tuning uses too).

    Args:
      path: an `--export_dir` of `serving.export`, or its `hub/encoder` (BERT) or `hub/module` (GPT, biLM).

    Example:
      encoder = ModuleEncoder("export/bert")
      [sent] = encoder.encode(["The river bank flooded."])
      encoder.select(sent, "sum_last4")  # [5 words, H]
    """

    def __init__(self, path: str):
        self.path = path.rstrip("/")
        self.exported = ExportedModule.load(self.path)
        self.module, self.kind = self.exported.module, self.exported.kind
        self.preprocessor = self.exported.preprocessor  # BERT's; None for GPT and the biLM
        self.max_pieces = self.exported.max_pieces
        self.layer_names = self.exported.layer_names
        self.extra_names = ["elmo"] if self.kind == "bilm" else []

    @property
    def choices(self) -> list[str]:
        """Every name `select` accepts."""
        return list(LAYER_CHOICES) + self.layer_names + self.extra_names

    def select(self, encoded: SentenceVectors, choice: str, weights: list[float] | None = None) -> np.ndarray:
        return select_layers(self.layer_names, encoded.hidden, encoded.extra, choice, weights)

    def encode(self, sentences: list[str], batch_size: int = 64) -> list[SentenceVectors]:
        """Sentences -> `SentenceVectors` each, in order. Words past the module's window are dropped (BERT, GPT):
        they are never split into word pieces, and of a long line only a window's worth of words is split
        (`split_words`); of any line only its first MiB."""
        out = []
        for i in range(0, len(sentences), batch_size):
            words = split_words(list(sentences[i:i + batch_size]), self.max_pieces)
            if self.kind == "bilm":
                out.extend(self._encode_bilm(words))
            else:  # every word has at least one piece: more than max_pieces words cannot fit
                out.extend(self._encode_pieces([w[:self.max_pieces] for w in words]))
        return out

    def _encode_bilm(self, words):
        out = self.exported.bilm_outputs(words)
        hidden = np.stack([np.asarray(x) for x in elmo_layers(out)], 0)  # [K, B, T, D]
        elmo = out["elmo"].numpy()
        return [SentenceVectors(w, hidden[:, b, :len(w)], {"elmo": elmo[b, :len(w)]}) for b, w in enumerate(words)]

    def _pieces(self, words) -> list[list[list[int]]]:
        """Each sentence's word pieces grouped by word (`ExportedModule.word_pieces`), cut to the window."""
        out = []
        for grouped in self.exported.word_pieces(words):
            kept, total = [], 0
            for p in grouped:
                if total + len(p) > self.max_pieces:
                    break
                kept.append(p)
                total += len(p)
            out.append(kept)
        return out

    def _encode_pieces(self, words):
        cls_id, sep_id = self.exported.token_id("[CLS]"), self.exported.token_id("[SEP]")
        grouped = self._pieces(words)
        lead = cls_id if self.kind == "bert" else sep_id  # GPT: a document start, as in pretraining
        rows = [[lead] + [i for p in g for i in p] + ([sep_id] if self.kind == "bert" else []) for g in grouped]
        width = max(len(r) for r in rows)
        ids = np.array([r + [0] * (width - len(r)) for r in rows], np.int32)  # [B, T]
        hidden = np.stack([x.numpy() for x in self.exported.hidden(ids)], 0)  # [K, B, T, D]
        result = []
        for b, g in enumerate(grouped):
            ends = np.cumsum([len(p) for p in g]) + 1  # position 0 is [CLS] / [SEP]
            vectors = [hidden[:, b, e - len(p):e].mean(axis=1) for p, e in zip(g, ends)]  # each [K, D]
            stacked = np.stack(vectors, 1) if vectors else np.zeros(hidden.shape[:1] + (0,) + hidden.shape[-1:])
            result.append(SentenceVectors(words[b][:len(g)], stacked.astype(np.float32), {}))
        return result

    def embed_spans(self, sentences: list[str], spans: list[tuple[int, int]], choices: list[str],
                    batch_size: int = 64) -> dict[str, np.ndarray]:
        """The word(s) at each character span, in context -> choice -> `[N, D]` (the mean over the span's
        words; NaN rows where the span lies past the module's window)."""
        unique = sorted(set(sentences), key=lambda t: (len(t), t))  # batches of like lengths pad little
        encoded = dict(zip(unique, self.encode(unique, batch_size)))
        rows = {c: [] for c in choices}
        for text, (first, last) in zip(sentences, span_words(sentences, spans)):
            enc = encoded[text]
            for c in choices:
                vectors = self.select(enc, c)  # [W, D]
                rows[c].append(vectors[first:last].mean(0) if last <= len(enc.words)
                               else np.full(vectors.shape[-1], np.nan, np.float32))
        return {c: np.stack(v).astype(np.float32) for c, v in rows.items()}


def select_layers(layer_names, hidden, extra, choice, weights=None) -> np.ndarray:
    if choice in extra:
        return extra[choice]
    if choice in layer_names:
        return hidden[layer_names.index(choice)]
    return combine(hidden, choice, weights)


def choice_vectors(encoder: ModuleEncoder, encoded: SentenceVectors, choices: list[str], pool: str = "none",
                   weights: list[float] | None = None) -> dict[str, np.ndarray]:
    """One sentence's vectors per layer choice: `[W, D]` (`pool="none"`) or `[1, D]`, the mean of its words
    (`"mean"`). What `write_features` writes, and `downstream.embed`'s job too."""
    out = {}
    for c in choices:
        v = select_layers(encoder.layer_names, encoded.hidden, encoded.extra, c, weights)  # [W, D]
        out[c] = v if pool == "none" else v.mean(0, keepdims=True)  # [W, D] or [1, D]
    return out


def _write_npz(path, sentences, encoded, features, pool):
    arrays = {c: np.concatenate(v, 0) if v else np.zeros((0, 0), np.float32) for c, v in features.items()}
    lengths = [len(e.words) for e in encoded]
    arrays["row_splits"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    arrays["words"] = np.array([w for e in encoded for w in e.words], dtype=str)
    arrays["sentences"] = np.array(sentences, dtype=str)
    np.savez(path, **arrays)


def _write_tfrecord(path, sentences, encoded, features, pool):
    def floats(x):
        return tf.train.Feature(float_list=tf.train.FloatList(value=x.reshape(-1)))

    with tf.io.TFRecordWriter(path) as writer:
        for i, (text, enc) in enumerate(zip(sentences, encoded)):
            feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()])),
                       "words": tf.train.Feature(bytes_list=tf.train.BytesList(value=[w.encode() for w in enc.words]))}
            feature.update({f"features/{c}": floats(v[i]) for c, v in features.items()})
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


@checked({"batch_size": COUNT, "output": output_of("input", "module")})
@dataclasses.dataclass(frozen=True)
class FeaturesJob:
    """One run of `python -m downstream.features`; the fields are the flags.

    Args:
      module: an export dir, or its `hub/encoder` (BERT) or `hub/module` (GPT, biLM).
      input: a text file, one sentence a line (blank lines skipped).
      output: `OUT.npz` or `OUT.tfrecord`; `OUT.<ext>.json` goes beside it.
      choices: layer choices (`LAYER_CHOICES`, any hidden layer's name, `elmo` for the biLM): `--layers`.
      pool: none (a vector per word) or mean (one per sentence, the mean of its words).
      weights: `weighted_all`'s, one per hidden layer (default: equal).
      batch_size: sentences per model call.
    """

    module: str
    input: str
    output: str
    choices: tuple[str, ...] = DEFAULT_CHOICES
    pool: str = "none"
    weights: tuple[float, ...] | None = None
    batch_size: int = 64

    def check(self) -> None:
        """What can be refused before the module loads; raises `UserError`."""
        if self.pool not in POOLS:
            raise UserError(f"--pool {self.pool}: use one of {', '.join(POOLS)}")
        if not self.output.endswith(OUTPUT_FORMATS):
            raise UserError(f"--output must end in .npz or .tfrecord, got {self.output!r}")


@dataclasses.dataclass(frozen=True)
class FeaturesResult:
    """What a features run wrote: `output` and its sidecar `<output>.json` (`summary()`, also the command's
    last line): the module's family and hidden layers, the choices and their dimensions, the pooling and
    weights, and how many sentences and words were encoded."""

    output: str
    module_kind: str
    layer_names: tuple[str, ...]
    choices: tuple[str, ...]
    dims: dict
    pool: str
    weights: tuple[float, ...] | None
    sentences: int
    words: int

    @property
    def sidecar(self) -> str:
        return self.output + ".json"

    def summary(self) -> dict:
        """The sidecar's content, under its fixed keys."""
        return {"module_kind": self.module_kind, "layer_names": list(self.layer_names),
                "choices": list(self.choices), "dims": self.dims, "pool": self.pool,
                "weights": list(self.weights) if self.weights is not None else None,
                "sentences": self.sentences, "words": self.words}


def run(job: FeaturesJob) -> FeaturesResult:
    """Reads `job.input`, encodes it with the module and writes `job.output` and its sidecar; raises `UserError`
    (a missing or unreadable input, no module there, a layer choice the module lacks, weights of the wrong
    count) with the message the command prints."""
    job.check()
    sentences = read_sentences(job.input)
    try:
        return write_features(ModuleEncoder(job.module), sentences, job.output, list(job.choices), job.pool,
                              list(job.weights) if job.weights is not None else None, job.batch_size)
    except ValueError as e:  # a ModuleError (a UserError), or a choice or weights the module cannot take
        if isinstance(e, UserError):
            raise
        raise UserError(str(e)) from e


def write_features(encoder: ModuleEncoder, sentences: list[str], output: str, choices: list[str],
                   pool: str = "none", weights: list[float] | None = None, batch_size: int = 64) -> FeaturesResult:
    """Encodes `sentences` and writes the `choices` to `output` (`.npz` or `.tfrecord`) and `<output>.json`."""
    unknown = [c for c in choices if c not in encoder.choices]
    if unknown:
        raise ValueError(f"unknown layer choice(s) {unknown}; this module has {encoder.choices}")
    encoded = encoder.encode(sentences, batch_size)
    features = {c: [] for c in choices}
    for enc in encoded:
        for c, v in choice_vectors(encoder, enc, choices, pool, weights).items():
            features[c].append(v)
    if output.endswith(".npz"):
        _write_npz(output, sentences, encoded, features, pool)
    elif output.endswith(".tfrecord"):
        _write_tfrecord(output, sentences, encoded, features, pool)
    else:
        raise ValueError(f"--output must end in .npz or .tfrecord, got {output!r}")
    result = FeaturesResult(output=output, module_kind=encoder.kind, layer_names=tuple(encoder.layer_names),
                            choices=tuple(choices), dims={c: int(v[0].shape[-1]) if v else 0
                                                          for c, v in features.items()},
                            pool=pool, weights=tuple(weights) if weights is not None else None,
                            sentences=len(sentences), words=int(sum(len(e.words) for e in encoded)))
    with open(result.sidecar, "w") as f:
        json.dump(result.summary(), f, indent=2)
    return result


def read_sentences(path: str) -> list[str]:
    """The non-blank lines of `path`, stripped; `UserError` naming `--input` for a folder, a missing or a
    non-UTF-8 file."""
    import os

    if not os.path.exists(path):
        raise UserError(f"--input {path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"--input {path} is a folder; give a text file, one sentence a line")
    try:
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f if line.strip()]
    except UnicodeDecodeError as e:
        raise UserError(f"--input {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UserError(f"--input {path} cannot be read ({e.strerror})") from None


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m downstream.features", description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="an export dir, or its hub/encoder or hub/module")
    parser.add_argument("--input", required=True, help="text file, one sentence a line (blank lines skipped)")
    parser.add_argument("--output", required=True, help="OUT.npz or OUT.tfrecord")
    parser.add_argument("--layers", default=",".join(DEFAULT_CHOICES),
                        help="comma-separated layer choices (also any hidden layer's name, and elmo for the biLM)")
    parser.add_argument("--pool", choices=POOLS, default="none",
                        help="none: a vector per word; mean: per sentence, the mean of its words")
    parser.add_argument("--weights", default=None, help="weighted_all's weights, one per hidden layer")
    parser.add_argument("--batch_size", type=int, default=64)
    return parser.parse_args(argv)


def parse_weights(text: str | None) -> tuple[float, ...] | None:
    """`--weights 0.2,0.3,0.5` -> the numbers; `UserError` for text that is not numbers."""
    try:
        return tuple(float(w) for w in text.split(",")) if text else None
    except ValueError as e:
        raise UserError(str(e)) from None


def job_from_args(args) -> FeaturesJob:
    return FeaturesJob(module=args.module, input=args.input, output=args.output,
                       choices=tuple(args.layers.split(",")), pool=args.pool, weights=parse_weights(args.weights),
                       batch_size=args.batch_size)


@quiet_command
def main(argv=None) -> int:
    """`python -m downstream.features`: parse, build the job, run it; the sidecar's content as the last line."""
    args = parse_args(argv)
    try:
        result = run(job_from_args(args))
    except Exception as e:  # noqa: BLE001 - user errors (no module there, bad layer choices, an unreadable
        return exit_status(e)  # input) become one line, others keep their traceback
    print(json.dumps(result.summary()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
