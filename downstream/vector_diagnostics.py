"""What a module's contextual vectors are made of, per layer: cheap diagnostics on an export.

For every hidden layer of a BERT, GPT or biLM export (`downstream.features.ModuleEncoder`), over the word
occurrences of some sentences (held-out text, one sentence a line):

- `anisotropy`: the mean cosine of random pairs of occurrences (of any words). Near 0 for isotropic vectors;
  near 1 when every vector shares one large common direction, which then dominates every cosine.
- `top_dimension_share`: the share of the total variance in the single largest dimension (a "rogue"
  dimension, Timkey and van Schijndel 2021), and `top_component_share`, the same for the first principal
  component.
- Shares of the variance explained, as adjusted R^2 of a least-squares fit on one-hot groups (so a grouping
  with many small groups is not credited with noise): `word` (the lower-cased word itself), `position` (the
  word's index in its sentence), `word+position` (both, additively, fitted by backfitting), `sentence` (what
  all words of one sentence share), and `context`, `1 - word+position`: what neither the word nor its
  position explains, i.e. what the rest of the sentence contributes (with their interactions and noise).

Only occurrences of words seen at least `min_count` times, at positions under `max_position`, take part, so
every group has several members. A static layer has `word` near 1 (BERT's and GPT's embeddings also carry
the position); a contextual layer that tells senses apart needs a large `context` share that is not one
common direction (`anisotropy`).

    python -m downstream.vector_diagnostics --module export/bert --input heldout.txt \\
        [--max_sentences 2000] [--min_count 5] [--max_position 40] [--seed 0]

Prints a table per layer and, last, one JSON line: `{"module_kind", "occurrences", "words", "sentences",
"layers": {name: {...}}}`. The same from Python is one call on a `DiagnosticsJob`, whose fields are the flags;
it prints the same table and returns a `Diagnostics` (`summary()` is the JSON line):

    result = run(DiagnosticsJob(module="export/bert", input="heldout.txt", min_count=3))
    result.layers["layer_2"]["anisotropy"]
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import sys

import numpy as np

from commands.job_fields import COUNT, NON_NEGATIVE, checked
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, run_to_summary

PAIRS = 20000


def anisotropy(vectors: np.ndarray, rng: np.random.Generator, pairs: int = PAIRS) -> float:
    """Mean cosine of `pairs` random pairs of distinct rows of `vectors` [N, D]."""
    n = len(vectors)
    a = rng.integers(0, n, pairs)
    b = (a + rng.integers(1, n, pairs)) % n  # never the same row
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # [N, D]
    return float(np.mean(np.sum(unit[a] * unit[b], axis=1)))


def top_dimension_share(vectors: np.ndarray) -> float:
    variance = vectors.var(axis=0)  # [D]
    return float(variance.max() / max(variance.sum(), 1e-30))


def top_component_share(vectors: np.ndarray) -> float:
    centred = vectors - vectors.mean(axis=0)
    singular = np.linalg.svd(centred, compute_uv=False)  # [min(N, D)]
    energy = singular ** 2
    return float(energy[0] / max(energy.sum(), 1e-30))


def _group_means(values: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
    """Per-group mean of `values` [N, D] by `groups` [N] in 0..count-1 -> [count, D]."""
    sums = np.zeros((count, values.shape[1]), np.float64)
    np.add.at(sums, groups, values)
    sizes = np.bincount(groups, minlength=count)[:, None]
    return sums / np.maximum(sizes, 1)


def adjusted_r2(residual_ss: float, total_ss: float, n: int, parameters: int) -> float:
    """1 - (RSS / TSS) * (n - 1) / (n - parameters): R^2 corrected for the groups' count."""
    if total_ss <= 0:
        return 0.0
    return float(1.0 - (residual_ss / total_ss) * (n - 1) / max(n - parameters, 1))


def explained_share(vectors: np.ndarray, groups: np.ndarray) -> float:
    """Adjusted R^2 of the group means of `vectors` [N, D] by `groups` [N] (integer labels)."""
    labels, index = np.unique(groups, return_inverse=True)
    centred = vectors - vectors.mean(axis=0)  # [N, D]
    residual = centred - _group_means(centred, index, len(labels))[index]
    return adjusted_r2(float(np.sum(residual ** 2)), float(np.sum(centred ** 2)), len(vectors), len(labels))


def additive_share(vectors: np.ndarray, first: np.ndarray, second: np.ndarray, sweeps: int = 20) -> float:
    """Adjusted R^2 of `vectors` ~ effect(first) + effect(second), fitted by backfitting (alternating
    group means of the other factor's residual), exact for a balanced or purely additive design."""
    first_labels, a = np.unique(first, return_inverse=True)
    second_labels, b = np.unique(second, return_inverse=True)
    centred = vectors - vectors.mean(axis=0)  # [N, D]
    effect_b = np.zeros((len(second_labels), vectors.shape[1]))
    for _ in range(sweeps):
        effect_a = _group_means(centred - effect_b[b], a, len(first_labels))  # [A, D]
        effect_b = _group_means(centred - effect_a[a], b, len(second_labels))  # [B, D]
    residual = centred - effect_a[a] - effect_b[b]
    parameters = len(first_labels) + len(second_labels) - 1
    return adjusted_r2(float(np.sum(residual ** 2)), float(np.sum(centred ** 2)), len(vectors), parameters)


def layer_diagnostics(vectors: np.ndarray, words: np.ndarray, positions: np.ndarray, sentences: np.ndarray,
                      rng: np.random.Generator) -> dict:
    """Every diagnostic of one layer's occurrence vectors [N, D] with their word, position and sentence ids."""
    vectors = vectors.astype(np.float64)
    word_position = additive_share(vectors, words, positions)
    return {"anisotropy": anisotropy(vectors, rng), "top_dimension_share": top_dimension_share(vectors),
            "top_component_share": top_component_share(vectors),
            "word": explained_share(vectors, words), "position": explained_share(vectors, positions),
            "word+position": word_position, "sentence": explained_share(vectors, sentences),
            "context": 1.0 - word_position}


def occurrences(encoded, min_count: int, max_position: int) -> tuple[np.ndarray, ...]:
    """The occurrences that take part: (sentence index, word index) pairs and their word, position and
    sentence labels, from `SentenceVectors` (`ModuleEncoder.encode`). Words are lower-cased."""
    rows = [(s, i, w.lower()) for s, enc in enumerate(encoded) for i, w in enumerate(enc.words) if i < max_position]
    counts = {}
    for _, _, w in rows:
        counts[w] = counts.get(w, 0) + 1
    rows = [r for r in rows if counts[r[2]] >= min_count]
    vocabulary = {w: k for k, w in enumerate(sorted({r[2] for r in rows}))}
    sentence = np.array([r[0] for r in rows], np.int64)
    position = np.array([r[1] for r in rows], np.int64)
    word = np.array([vocabulary[r[2]] for r in rows], np.int64)
    return sentence, position, word


@checked({"max_sentences": COUNT, "min_count": COUNT, "max_position": COUNT, "seed": NON_NEGATIVE,
          "batch_size": COUNT})
@dataclasses.dataclass(frozen=True)
class DiagnosticsJob:
    """One run of `python -m downstream.vector_diagnostics`; the fields are the flags.

    Args:
      module: an export dir, or its `hub/encoder` (BERT) or `hub/module` (GPT, biLM).
      input: a text file, one sentence a line (blank lines skipped); its first `max_sentences` are read.
      min_count: only words seen this often take part; max_position: only words at positions under this.
      seed: of the random pairs for `anisotropy`; batch_size: sentences per model call.
    """

    module: str
    input: str
    max_sentences: int = 2000
    min_count: int = 5
    max_position: int = 40
    seed: int = 0
    batch_size: int = 64


@dataclasses.dataclass(frozen=True)
class Diagnostics:
    """Every layer's diagnostics (`layers`: name -> {`anisotropy`, ..., `context`}) over `occurrences`
    occurrences of `words` distinct words in `sentences` sentences of a `module_kind` export."""

    module_kind: str
    occurrences: int
    words: int
    sentences: int
    layers: dict

    def summary(self) -> dict:
        """The command's last line."""
        return {"module_kind": self.module_kind, "occurrences": self.occurrences, "words": self.words,
                "sentences": self.sentences, "layers": self.layers}


def run(job: DiagnosticsJob) -> Diagnostics:
    """Reads `job.input`, measures every layer of the module and prints the table the command prints; raises
    `UserError` (no module there, an unreadable input, too little text) with the command's message."""
    from downstream.features import ModuleEncoder, read_sentences

    sentences = read_sentences(job.input)[:job.max_sentences]
    try:
        result = diagnose(ModuleEncoder(job.module), sentences, job.min_count, job.max_position, job.seed,
                          job.batch_size)
    except ValueError as e:  # a ModuleError (a UserError), too little text
        if isinstance(e, UserError):
            raise
        raise UserError(str(e)) from e
    print_report(result.summary())
    return result


def diagnose(encoder, sentences: list[str], min_count: int = 5, max_position: int = 40, seed: int = 0,
             batch_size: int = 64) -> Diagnostics:
    """Encodes `sentences` with `encoder` (a `ModuleEncoder`) and measures every layer it has."""
    encoded = encoder.encode(sentences, batch_size)
    sentence, position, word = occurrences(encoded, min_count, max_position)
    if len(sentence) < 2:
        raise ValueError(f"only {len(sentence)} occurrences of words seen {min_count} times or more: give more text")
    names = encoder.layer_names + encoder.extra_names
    layers = {}
    for name in names:
        vectors = np.stack([encoder.select(encoded[s], name)[p] for s, p in zip(sentence, position)])  # [N, D]
        layers[name] = layer_diagnostics(vectors, word, position, sentence, np.random.default_rng(seed))
    return Diagnostics(module_kind=encoder.kind, occurrences=int(len(sentence)), words=int(word.max() + 1),
                       sentences=int(len(set(sentence.tolist()))), layers=layers)


COLUMNS = ("anisotropy", "top_dimension_share", "top_component_share", "word", "position", "word+position",
           "sentence", "context")


def print_report(result: dict) -> None:
    print(f"module: {result['module_kind']}; {result['occurrences']} occurrences of {result['words']} words in "
          f"{result['sentences']} sentences")
    print(f"{'layer':<16}" + "".join(f"{c:>21}" for c in COLUMNS))
    for name, values in result["layers"].items():
        print(f"{name:<16}" + "".join(f"{values[c]:>21.4f}" for c in COLUMNS))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m downstream.vector_diagnostics",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="an export dir, or its hub/encoder or hub/module")
    parser.add_argument("--input", required=True, help="text file, one sentence a line (blank lines skipped)")
    parser.add_argument("--max_sentences", type=int, default=2000)
    parser.add_argument("--min_count", type=int, default=5, help="only words seen this often take part")
    parser.add_argument("--max_position", type=int, default=40, help="only words at positions under this")
    parser.add_argument("--seed", type=int, default=0, help="of the random pairs for anisotropy")
    parser.add_argument("--batch_size", type=int, default=64)
    return parser.parse_args(argv)


def job_from_args(args) -> DiagnosticsJob:
    return DiagnosticsJob(module=args.module, input=args.input, max_sentences=args.max_sentences,
                          min_count=args.min_count, max_position=args.max_position, seed=args.seed,
                          batch_size=args.batch_size)


@quiet_command
def main(argv=None) -> int:
    """`python -m downstream.vector_diagnostics`: parse, build the job, run it; the figures as the last line."""
    args = parse_args(argv)
    return run_to_summary(lambda: run(job_from_args(args)).summary())


if __name__ == "__main__":
    sys.exit(main())
