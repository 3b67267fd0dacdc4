"""Beam job: raw text (one sentence a line) -> per-word or per-sentence vectors from any exported module,
as sharded TFRecords (one `tf.train.Example` per line) and a metadata.json.

    python -m downstream.embed --module EXPORT --input 'PATTERN' --output_dir DIR [--layers last,...] \\
        [--pool none|mean] [--weights W,...] [--batch_size 64] [--bad_lines truncate|skip] [--strict_utf8] \\
        [--num_shards 8] [--overwrite] [--progress_seconds 15] [Beam options]

The flow (named steps): Files (`Create` of the matched paths) -> ReadLines (one file per worker, streamed;
each line keyed by (file, length bucket, index // batch_size); bad bytes counted) -> Batch (a GroupByKey:
batches of lines of similar length, the same on every runner) -> Embed (`RunInference` with
`embed_model.EmbeddingHandler`: one model per worker process) -> KeyByShard (stable hash of (file, line))
-> GroupShards -> WriteShards (streamed) -> Finish (moves the shards into place, metadata.json last).

Batching is ours, not `BatchElements` (RunInference's own, which the handler skips: `with_no_batching`):
`BatchElements` emits its last batch in `finish_bundle`, which Beam 2.77's Dask runner drops, and it
batches in arrival order, lines of any length together.

One record per line that has any text, by default: a line past the module's window (more word pieces than it
reads) is embedded with its later words dropped, and one over 1 MiB from its first MiB (never held whole in
memory); both flagged `truncated` = 1 and counted (`truncated`). Invalid UTF-8 bytes become U+FFFD. Only lines
that cannot be embedded at all get no record: blank lines (or no word), and with `--strict_utf8` lines of
invalid UTF-8. `--bad_lines skip` also drops every line that cannot be embedded whole (over the window, over
1 MiB, invalid UTF-8). Nothing stops the job; every drop is counted by reason (`dropped` in metadata.json,
`dropped_*` as Beam counters in namespace `embed`), beside `lines`, `empty_lines`, `lines_with_invalid_utf8`,
`lines_over_window`, `lines_over_max_bytes`: `lines = examples + counters.dropped`.

Output: the shards and metadata.json are written under `DIR/.staging-RUNID/` and moved into DIR at the
end, metadata.json last, so a failed run leaves only a hidden staging folder (the next run removes it).
`--overwrite` keeps every command's contract (`commands.overwrite`: only the earlier run's listed
files; another kind of output, the `--module` folder or an input file's folder refused). One run at a time:
the run holds the folder's lock (`commands.output_lock`), and a second one is refused naming the first.
SIGTERM stops the local workers before anything else (exit status 143). See docs/embed.md and docs/limits.md.

The same job from Python is one call on an `EmbedJob` (`embed_job.py`), whose fields are the flags (what the
vectors are: `config`, an `embed_model.EmbedConfig`; Beam's options, `--verbose`, `--progress_seconds`:
`run_options`):

    result = run(EmbedJob(input="text/*.txt", output_dir="vectors",
                          config=EmbedConfig(module="export/bert", choices=("last",), pool="mean")))
    result.examples, result.counters["dropped"]
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import codecs
import collections
import hashlib
import json
import os
import sys
import time
import uuid

import apache_beam as beam
import tensorflow as tf
from apache_beam.ml.inference.base import RunInference

from downstream.embed_job import EmbedJob, EmbedResult
from downstream.embed_model import (BAD_LINES, DEFAULT_CHOICES, NAMESPACE, EmbedConfig, EmbeddingHandler, Line,
                                    length_bucket)
from downstream.module import ModuleError
from pipeline import beam_job, corpus_io, progress
from pipeline.beam_options import Counts, split_counts, total
from pipeline.shard_writer import METADATA, ShardWriter
from commands import overwrite
from commands.output_lock import OutputLock
from preprocessing.metadata import write_json
from preprocessing.stable_random import stable_hash
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, writable_dir

SHARD_PREFIX = "embeddings"
DEFAULT_LAYERS = ",".join(DEFAULT_CHOICES)


def decode_line(raw: bytes, cut: bool) -> tuple[str, bool]:
    """`(text, invalid)`: the line decoded and stripped, bad bytes as U+FFFD (`invalid` True). A `cut` line's
    last character may have been split by the cut: its incomplete tail is dropped, not counted as invalid."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        return decoder.decode(raw, final=not cut).strip(), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace").strip(), True


class ReadLines(beam.DoFn):
    """`(file index, path)` -> `((file index, length bucket, chunk), Line)` per line to embed, then the
    file's `Counts`. A chunk holds up to `batch_size` lines of one bucket. Drops, counted by reason
    (`dropped_*`): blank lines; with `strict_utf8` (or `--bad_lines skip`) lines of invalid UTF-8; with
    `--bad_lines skip` lines over 1 MiB (otherwise their first MiB is embedded, `truncated` = 1)."""

    def __init__(self, bad_lines: str, batch_size: int, strict_utf8: bool = False,
                 progress_folder: str | None = None):
        self.bad_lines, self.batch_size, self.strict_utf8 = bad_lines, batch_size, strict_utf8
        self.progress_folder = progress_folder

    def process(self, item):
        index, path = item
        tracker = corpus_io.read_progress(self.progress_folder, path)
        counts = Counts({name: 0 for name in READ_COUNTERS})
        per_bucket = collections.Counter()
        for number, (raw, cut) in enumerate(corpus_io.bounded_lines(path, corpus_io.MAX_LINE_BYTES, tracker), 1):
            counts["lines"] += 1
            counts["lines_over_max_bytes"] += cut
            text, invalid = decode_line(raw, cut)
            counts["lines_with_invalid_utf8"] += invalid
            reason = drop_reason(text, invalid, cut, self.bad_lines, self.strict_utf8)
            if reason:
                counts["empty_lines"] += reason == "empty"
                counts[f"dropped_{reason}"] += 1
                continue
            bucket = length_bucket(text)
            yield (index, bucket, per_bucket[bucket] // self.batch_size), Line(path, number, text, invalid, cut)
            per_bucket[bucket] += 1
            if tracker:
                tracker.update(1)
        if tracker:
            tracker.flush()
        yield counts.report(NAMESPACE)


READ_COUNTERS = ("lines", "empty_lines", "lines_with_invalid_utf8", "lines_over_max_bytes", "dropped_empty",
                 "dropped_invalid_utf8", "dropped_over_max_bytes")


def drop_reason(text: str, invalid: bool, cut: bool, bad_lines: str, strict_utf8: bool) -> str | None:
    """Why a read line gets no record (`empty`, `invalid_utf8`, `over_max_bytes`), or None to embed it."""
    if not text:
        return "empty"
    if invalid and (strict_utf8 or bad_lines == "skip"):
        return "invalid_utf8"
    if cut and bad_lines == "skip":
        return "over_max_bytes"
    return None


class WriteShard(beam.DoFn):
    """`(shard, [Embedded or None])` -> the shard written and its summary. Records are streamed to the file
    as the group is iterated (Dataflow reads a large group lazily), so a shard is never held in memory; their
    order in the shard is the runner's (each record carries its file and line)."""

    def __init__(self, staging: str, num_shards: int):
        self.staging, self.num_shards = staging, num_shards

    def process(self, item):
        shard, values = item
        status, loads = collections.Counter(), set()

        def records():
            for e in values:
                if e is not None:
                    status[e.status] += 1
                    status["over_window_any"] += e.over_window
                    loads.add(e.load_id)
                    if e.record is not None:
                        yield e.record

        with ShardWriter(self.staging, SHARD_PREFIX, shard, self.num_shards, gzip=False) as writer:
            writer.write_all(records())
        counters = {"empty_lines": status["empty"], "dropped_empty": status["empty"],
                    "dropped_over_window": status["over_window"], "truncated": status["truncated"],
                    "lines_over_window": status["over_window_any"]}
        yield {**writer.summary(), "counters": counters, "loads": sorted(loads)}


def build_pipeline(p, config: EmbedConfig, files: list[str], staging: str, num_shards: int, metadata: dict,
                   progress_folder: str | None = None):
    read = (p
            | "Files" >> beam.Create(list(enumerate(files)))
            | "ReadLines" >> beam.ParDo(ReadLines(config.bad_lines, config.batch_size, config.strict_utf8,
                                                  progress_folder)))
    lines, read_counts = split_counts(read, "Read")
    embedded = (lines
                | "Batch" >> beam.GroupByKey()
                | "InOrder" >> beam.MapTuple(lambda _, batch: sorted(batch, key=lambda line: line.number))
                | "Embed" >> RunInference(EmbeddingHandler(config).with_no_batching()))
    embedded = progress.tally(embedded, progress_folder, "embedded")
    every_shard = p | "EveryShard" >> beam.Create([(s, None) for s in range(num_shards)])
    keyed = embedded | "KeyByShard" >> beam.Map(lambda e: (stable_hash("embed", e.file, e.number) % num_shards, e))
    summaries = ((keyed, every_shard)
                 | "WithEmptyShards" >> beam.Flatten()
                 | "GroupShards" >> beam.GroupByKey()
                 | "WriteShards" >> beam.ParDo(WriteShard(staging, num_shards)))
    ((summaries, read_counts)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "Finish" >> beam.Map(finish, staging, metadata))


def finish(gathered, staging: str, metadata: dict) -> None:
    """Moves the staged shards into the output dir, then writes metadata.json there, then drops staging."""
    summaries = sorted((s for s in gathered if not isinstance(s, Counts)), key=lambda s: s["file"])
    counters = total([s["counters"] for s in summaries] + [c for c in gathered if isinstance(c, Counts)])
    examples = sum(s["examples"] for s in summaries)
    counters["examples"] = examples
    dropped = {name[len("dropped_"):]: counters.pop(name) for name in sorted(counters) if name.startswith("dropped_")}
    counters["dropped"] = sum(dropped.values())
    output_dir = os.path.dirname(staging.rstrip("/"))
    for s in summaries:
        tf.io.gfile.rename(os.path.join(staging, s["file"]), os.path.join(output_dir, s["file"]), overwrite=True)
    loads = sorted({load for s in summaries for load in s["loads"]})
    write_json(os.path.join(output_dir, METADATA), {
        **metadata, "files": [s["file"] for s in summaries],
        "examples_per_file": {s["file"]: s["examples"] for s in summaries}, "examples": examples,
        "counters": counters, "dropped": dropped, "model_loads": len(loads),
        "worker_processes": len({load.rsplit(":", 1)[0] for load in loads})})
    tf.io.gfile.rmtree(staging)


def module_files_sha256(module_dir: str) -> dict[str, str]:
    """sha256 of `saved_model.pb` and every file under `variables/`, by path relative to `module_dir`."""
    names = ["saved_model.pb"] + sorted(
        os.path.join("variables", n) for n in tf.io.gfile.listdir(os.path.join(module_dir, "variables")))
    out = {}
    for name in names:
        digest = hashlib.sha256()
        with tf.io.gfile.GFile(os.path.join(module_dir, name), "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        out[name] = digest.hexdigest()
    return out


def describe_module(config: EmbedConfig) -> dict:
    """Loads the module here once (the workers load their own) to check the choices and measure their
    dimensions; returns metadata.json's `module`, `choices`, `dims`; raises ValueError on a bad choice."""
    from downstream.features import ModuleEncoder, choice_vectors

    encoder = ModuleEncoder(config.module)
    unknown = [c for c in config.choices if c not in encoder.choices]
    if unknown:
        raise ValueError(f"unknown layer choice(s) {unknown}; this module has {encoder.choices}")
    [probe] = encoder.encode(["a"])
    weights = list(config.weights) if config.weights else None
    vectors = choice_vectors(encoder, probe, list(config.choices), config.pool, weights)
    sha = {"module": module_files_sha256(encoder.exported.path)}
    if encoder.kind == "bert":
        sha["preprocessor"] = module_files_sha256(os.path.join(os.path.dirname(encoder.exported.path), "preprocessor"))
    return {"module": {"path": config.module, "module_dir": encoder.exported.path, "kind": encoder.kind,
                       "sha256": sha, "layer_names": encoder.layer_names, "max_pieces": encoder.max_pieces},
            "choices": list(config.choices), "dims": {c: int(v.shape[-1]) for c, v in vectors.items()}}


def prepare(job: EmbedJob) -> tuple[list[str], dict]:
    """Checks what can be checked before the job runs (flags, input, the output folder's `--overwrite`
    contract, the module and its layer choices); raises `UserError` with the reason. Returns the input files
    and the metadata known before the job."""
    job.check()
    files = corpus_io.check_pattern(job.input)
    writable_dir("--output_dir", job.output_dir)
    plan_overwrite(job, files)
    try:
        described = describe_module(job.config)
    except ModuleError:
        raise
    except ValueError as e:  # a layer choice the module lacks, weights of the wrong count
        raise UserError(str(e)) from None
    return files, job.metadata(described, files)


def plan_overwrite(job: EmbedJob, files: list[str]) -> overwrite.Plan:
    """What `--overwrite` removes (`commands.overwrite`); `UserError` for a folder it may not write."""
    return overwrite.plan(job.output_dir, overwrite.EMBED, job.overwrite, input_files=files,
                          reads=corpus_io.pattern_reads(job.input), input_folders={"--module": job.config.module})


def execute(job: EmbedJob, files: list[str], metadata: dict):
    """Clears an earlier run (`--overwrite`; its metadata.json first) and the staging folders of failed runs,
    runs the job to its end; returns Beam's result. On a signal the local workers are stopped before anything
    else, so none moves a shard into place afterwards; a failed run leaves only its hidden staging folder."""
    earlier = plan_overwrite(job, files)  # checked in `prepare`; the folder is as it was
    tf.io.gfile.makedirs(job.output_dir)
    earlier.remove()
    staging = os.path.join(job.output_dir, f".staging-{uuid.uuid4().hex[:12]}")
    tf.io.gfile.makedirs(staging)
    line = progress.ProgressLine("embed", "lines", ("embedded",), progress.input_bytes(files))
    cleanup = lambda: overwrite.remove_unfinished(job.output_dir, overwrite.EMBED, debris=False)  # noqa: E731
    return beam_job.run_pipeline(
        lambda p, folder: build_pipeline(p, job.config, files, staging, job.num_shards, metadata, folder),
        job.run_options, files, line=line, cleanup=cleanup)


def run(job: EmbedJob) -> EmbedResult:
    """Runs `job` to its end and returns what it wrote, printing the command's lines on stderr. Raises
    `UserError` (bad flags, input, module or output folder) or `pipeline.termination.Terminated` (SIGTERM):
    a failed run leaves only its hidden staging folder."""
    job.check()
    writable_dir("--output_dir", job.output_dir)
    with OutputLock(job.output_dir):  # one run per folder: its shards and its metadata.json, never another's
        return _run(job)


def _run(job: EmbedJob) -> EmbedResult:
    """`run` under the output folder's lock: the job prepared, the folder cleared (`--overwrite`), written."""
    files, metadata = prepare(job)
    print(f"embed: {metadata['module']['kind']} {job.config.module}, {len(files)} file(s) -> {job.output_dir}",
          file=sys.stderr)
    started = time.time()
    execute(job, files, metadata)
    path = os.path.join(job.output_dir, METADATA)
    with tf.io.gfile.GFile(path) as f:
        written = json.load(f)
    print(f"embed: done in {time.time() - started:.1f} s; " +
          ", ".join(f"{k} {v:,}" for k, v in written["counters"].items()), file=sys.stderr)
    return EmbedResult(output_dir=job.output_dir, metadata=path, files=tuple(written["files"]),
                       examples=written["examples"], counters=written["counters"], dropped=written["dropped"])


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m downstream.embed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="an export dir (holding hub/), or its hub/encoder or hub/module")
    parser.add_argument("--input", required=True, help="file pattern, one sentence a line (local or gs://, .gz ok)")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--layers", default=DEFAULT_LAYERS,
                        help="comma-separated layer choices (downstream.features' names, a layer's name, elmo)")
    parser.add_argument("--pool", choices=("none", "mean"), default="none")
    parser.add_argument("--weights", default=None, help="weighted_all's weights, one per hidden layer")
    parser.add_argument("--batch_size", type=int, default=64, help="lines per model call")
    parser.add_argument("--bad_lines", choices=BAD_LINES, default="truncate",
                        help="lines over the module's window or over 1 MiB, or with invalid UTF-8: truncate "
                             "them (the default: words past the window dropped, `truncated` = 1; bytes "
                             "replaced), or skip them (no record, counted)")
    parser.add_argument("--strict_utf8", action="store_true",
                        help="drop lines of invalid UTF-8 (counted) instead of embedding them with U+FFFD")
    parser.add_argument("--num_shards", type=int, default=8)
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --output_dir")
    beam_job.add_arguments(parser)
    return parser.parse_known_args(argv)


def job_from_args(args, beam_args: list[str]) -> EmbedJob:
    """The `EmbedJob` that parsed flags describe; `UserError` for `--weights` that are not numbers."""
    try:
        weights = tuple(float(w) for w in args.weights.split(",")) if args.weights else None
    except ValueError:
        raise UserError(f"--weights {args.weights}: give numbers separated by commas") from None
    config = EmbedConfig(module=args.module, choices=tuple(args.layers.split(",")), pool=args.pool,
                         weights=weights, bad_lines=args.bad_lines, batch_size=args.batch_size,
                         strict_utf8=args.strict_utf8)
    return EmbedJob(input=args.input, output_dir=args.output_dir, config=config, num_shards=args.num_shards,
                    overwrite=args.overwrite, run_options=beam_job.run_options(args, beam_args))


@quiet_command
def main(argv=None) -> int:
    """`python -m downstream.embed`: parse, build the job, run it."""
    args, beam_args = parse_args(argv)
    return beam_job.command("embed", args.verbose, lambda: run(job_from_args(args, beam_args)),
                            removed="this run's shards were removed")


if __name__ == "__main__":
    sys.exit(main())
