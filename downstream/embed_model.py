"""The embedding job's model side: its RunInference `ModelHandler`, the lines it reads, the records it writes.

`EmbeddingHandler` loads an export through `downstream.features.ModuleEncoder` (hence `downstream.module`'s
`ExportedModule`, the one loader) and turns a batch of `Line`s into one serialized `tf.train.Example` each,
with the vectors `features.choice_vectors` gives (the numbers `python -m downstream.features` writes).

Model sharing: `share_model_across_processes()` stays False, so RunInference keeps the loaded module in its
`shared.Shared` handle: one copy per worker process, used by every DoFn thread and bundle of that process.
Beam's multi-process sharing (`large_model` / `model_copies`) would put the module in a proxy process and
pickle every batch and its vectors across to it; it pays off for models that do not fit in memory once per
process (a GPU's), not for these CPU modules. Every `Embedded` carries the id of the load that made it, and
the job writes how many loads it saw (`model_loads` in metadata.json), so the sharing can be checked.

Records (`tf.train.Example`, one per line written): `file` (bytes), `line` (int64, 1-based), `text` (bytes,
stripped), `words` (bytes list), `truncated` (int64: 1 when words past the module's window, or the bytes of a
line past 1 MiB, were dropped)
and `features/<choice>` (float list: `[W, D]` flattened for `--pool none`, `[D]` for `mean`).
"""

import dataclasses
import math
import os
import socket
import uuid

import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.ml.inference import base as inference_base
from apache_beam.ml.inference.base import ModelHandler

from commands.job_fields import COUNT, checked

NAMESPACE = "embed"
BAD_LINES = ("truncate", "skip")
DEFAULT_CHOICES = ("last",)


def _give_beam_the_resource_module() -> None:
    """Beam 2.77's `ml.inference.base` imports `resource` in one `try` with its `ModelManager`, which needs
    torch and scipy; without them it sets `resource` to None, as on a platform that lacks the module, and
    logs `Resource module is not available for current platform` at every model load (twice). The module is
    there on every POSIX system: handing it over keeps those lines off stderr and gives RunInference its
    model-memory figures."""
    if getattr(inference_base, "resource", False) is None:
        try:
            import resource
        except ImportError:  # not POSIX: Beam's note is then true
            return
        inference_base.resource = resource


_give_beam_the_resource_module()  # here, since every process that loads the model imports this module


@checked({"batch_size": COUNT})
@dataclasses.dataclass(frozen=True)
class EmbedConfig:
    """What the job computes. `module`: an export dir (or its hub module); `choices`: layer choices
    (`features.LAYER_CHOICES`, a layer's name, `elmo`); `pool`: none|mean; `weights`: `weighted_all`'s;
    `bad_lines`: truncate|skip (see `downstream.embed`); `batch_size`: lines per model call; `strict_utf8`:
    drop lines of invalid UTF-8 instead of embedding them with U+FFFD in place of the bad bytes."""
    module: str
    choices: tuple[str, ...] = DEFAULT_CHOICES
    pool: str = "none"
    weights: tuple[float, ...] | None = None
    bad_lines: str = "truncate"
    batch_size: int = 64
    strict_utf8: bool = False


@dataclasses.dataclass(frozen=True)
class Line:
    """A line to embed: `file`, its 1-based `number`, its stripped `text`; `invalid_utf8` if bytes were replaced;
    `cut` if the line was over 1 MiB and `text` is its first MiB."""
    file: str
    number: int
    text: str
    invalid_utf8: bool = False
    cut: bool = False


@dataclasses.dataclass(frozen=True)
class Embedded:
    """RunInference's output for one line: `status` ok|truncated|over_window|empty (the last two: no record);
    `record` the serialized Example or None; `load_id` the model load that made it; `over_window` if the line
    had more word pieces than the module reads (kept truncated, or dropped under `--bad_lines skip`)."""
    file: str
    number: int
    status: str
    record: bytes | None
    load_id: str
    over_window: bool = False


def length_bucket(text: str) -> int:
    """Lines whose lengths differ by less than a factor of about 1.4 share a bucket (so batches pad little)."""
    return int(2 * math.log2(max(1, len(text))))


@dataclasses.dataclass
class LoadedEncoder:
    """A loaded module and the id of this load (host, process, a fresh uuid)."""
    encoder: object
    load_id: str


def _bytes(values):
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def to_example(line: Line, words: list[str], vectors: dict[str, np.ndarray], truncated: bool) -> bytes:
    import tensorflow as tf

    feature = {"file": _bytes([line.file.encode()]), "text": _bytes([line.text.encode()]),
               "words": _bytes([w.encode() for w in words]),
               "line": tf.train.Feature(int64_list=tf.train.Int64List(value=[line.number])),
               "truncated": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(truncated)]))}
    for choice, v in vectors.items():
        feature[f"features/{choice}"] = tf.train.Feature(float_list=tf.train.FloatList(value=v.reshape(-1)))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def parse_example(record: bytes, dims: dict[str, int], pool: str = "none") -> dict:
    """A record -> `file`, `line`, `text`, `words`, `truncated` and per choice its vectors (`[W, D]` or `[D]`)."""
    import tensorflow as tf

    f = tf.train.Example.FromString(record).features.feature
    words = [w.decode() for w in f["words"].bytes_list.value]
    out = {"file": f["file"].bytes_list.value[0].decode(), "line": f["line"].int64_list.value[0],
           "text": f["text"].bytes_list.value[0].decode(), "words": words,
           "truncated": bool(f["truncated"].int64_list.value[0])}
    for choice, d in dims.items():
        v = np.array(f[f"features/{choice}"].float_list.value, np.float32)
        out[choice] = v if pool == "mean" else v.reshape(len(words), d)
    return out


class EmbeddingHandler(ModelHandler):
    """RunInference's handler: loads the export (once per process, see the module docstring) and maps a
    batch of `Line`s to an `Embedded` each.

    Args:
      config: the job's `EmbedConfig`.

    Example:
      handler = EmbeddingHandler(EmbedConfig("export/bert", ("last",)))
      lines | RunInference(handler.with_no_batching())  # lines: PCollection of lists of `Line`s
    """

    def __init__(self, config: EmbedConfig):
        super().__init__()
        self.config = config

    def load_model(self) -> LoadedEncoder:
        from downstream.features import ModuleEncoder

        Metrics.counter(NAMESPACE, "model_loads").inc()
        load_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        return LoadedEncoder(ModuleEncoder(self.config.module), load_id)

    def run_inference(self, batch, model: LoadedEncoder, inference_args=None) -> list[Embedded]:
        from downstream.features import choice_vectors
        from downstream.words import split_words

        config, lines = self.config, list(batch)
        full = split_words([line.text for line in lines])
        keep = [i for i, words in enumerate(full) if words]
        for name in ("empty_lines", "dropped_empty"):  # no word (e.g. control characters only)
            Metrics.counter(NAMESPACE, name).inc(len(lines) - len(keep))
        encoded = dict(zip(keep, model.encoder.encode([lines[i].text for i in keep], batch_size=len(lines))))
        weights = list(config.weights) if config.weights else None
        out = []
        for i, line in enumerate(lines):
            status, record, over_window = "empty", None, False
            if i in encoded:
                enc = encoded[i]
                over_window = len(enc.words) < len(full[i])
                if over_window:
                    Metrics.counter(NAMESPACE, "lines_over_window").inc()
                if over_window and config.bad_lines == "skip":
                    status = "over_window"
                    Metrics.counter(NAMESPACE, "dropped_over_window").inc()
                else:
                    status = "truncated" if over_window or line.cut else "ok"
                    vectors = choice_vectors(model.encoder, enc, list(config.choices), config.pool, weights)
                    record = to_example(line, enc.words, vectors, status == "truncated")
            if status == "truncated":
                Metrics.counter(NAMESPACE, "truncated").inc()
            out.append(Embedded(line.file, line.number, status, record, model.load_id, over_window))
        return out

    def get_num_bytes(self, batch) -> int:
        return sum(len(line.text.encode()) for line in batch)

    def get_metrics_namespace(self) -> str:
        return NAMESPACE
