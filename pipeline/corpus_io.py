"""Reading raw text corpora: file patterns (local or `gs://`), gzip, and undecodable bytes.

Each file is read whole by one worker, streamed line by line. Lines are read as bytes and decoded here, so
that malformed UTF-8 is replaced and counted (`corpus/lines`, `corpus/lines_with_invalid_utf8`, as Beam
metrics and, for `ReadLineBatches`, as a `Counts` element per file) instead of failing a bundle. A truncated `.gz` stops the job with the file's name: Beam's own decompressing
reader ends such a file early without a word (seen: 2,376 of 5,000 lines, no error), which would silently
lose data, so gzip is read with Python's `gzip` module, which checks the end-of-stream marker.
"""

import collections
import contextlib
import gzip
import hashlib
import os
import re
import zlib
from typing import Iterator

import apache_beam as beam
from apache_beam.io.filesystems import CompressionTypes, FileSystems
from pipeline.beam_options import Counts

from commands.user_errors import UserError

NAMESPACE = "corpus"


class CorpusError(UserError):
    """The input corpus cannot be read as asked."""


class InputFileError(UserError):
    """An input file cannot be read to its end (the job stops: skipping it would silently lose data)."""


MAX_LINE_BYTES = 1 << 20


def raw_lines(path: str, max_line_bytes: int = MAX_LINE_BYTES, progress=None) -> Iterator[bytes | None]:
    """The lines of a file (newline stripped), `.gz` decompressed and checked to its end. A line over
    `max_line_bytes` comes out as `None` (the caller counts and skips it) and is never held in memory."""
    for line, cut in bounded_lines(path, max_line_bytes, progress):
        yield None if cut else line


def bounded_lines(path: str, max_line_bytes: int = MAX_LINE_BYTES, progress=None) -> Iterator[tuple[bytes, bool]]:
    """`(line, cut)` per line of a file (newline stripped), `.gz` decompressed and checked to its end. A line
    over `max_line_bytes` comes out as its first `max_line_bytes` bytes with `cut` True; the rest of it is read
    past in 64 KiB pieces, never held in memory. `progress` (a `pipeline.progress.StageProgress`, or None)
    gets the bytes read of the file (compressed bytes for `.gz`) every 1024 lines and at the end."""
    try:
        with contextlib.ExitStack() as stack:
            if path.endswith(".gz"):
                raw = stack.enter_context(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))
                f = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
            else:
                raw = f = stack.enter_context(FileSystems.open(path))
            number = 0
            while line := f.readline(max_line_bytes + 2):
                number += 1
                if progress is not None and number % 1024 == 0:
                    progress.update(position=raw.tell())
                stripped = line.rstrip(b"\r\n")
                if len(stripped) <= max_line_bytes:
                    yield stripped, False
                    continue
                while line and not line.endswith(b"\n"):  # skip the rest of the over-long line
                    line = f.readline(1 << 16)
                yield stripped[:max_line_bytes], True
            if progress is not None:
                progress.update(position=raw.tell())
                progress.flush()
    except (OSError, EOFError, zlib.error) as e:
        raise InputFileError(f"cannot read input file {path}: {e}") from e


def check_pattern(pattern: str, flag: str = "--input") -> list[str]:
    """Returns the files matching `pattern`, or raises `CorpusError` naming the pattern (and `flag`)."""
    try:
        matches = FileSystems.match([pattern])[0].metadata_list
    except Exception as e:  # Beam raises BeamIOError for a missing directory, etc.
        raise CorpusError(f"cannot list input files {pattern!r}: {e}") from e
    if not matches:
        raise CorpusError(f"no input files match {pattern!r}" + ("" if flag == "--input" else f" ({flag})"))
    folders = [m.path for m in matches if "://" not in m.path and os.path.isdir(m.path)]
    if folders:
        raise CorpusError(f"{flag} {folders[0]} is a folder; give a file pattern such as "
                          f"'{os.path.join(folders[0], '*.txt')}'")
    return sorted(m.path for m in matches)


def pattern_reads(pattern: str):
    """`reads(path)`: would `pattern` match `path` (Beam's own glob rules: `*` within a folder, `**` across
    folders)? For `commands.overwrite`, which refuses an output folder the input pattern reaches into."""
    from apache_beam.io.filesystem import FileSystem

    regex = re.compile(FileSystem.translate_pattern(pattern))
    return lambda path: bool(regex.fullmatch(path))


def decoded_lines(path: str, counts: collections.Counter, max_line_bytes: int = MAX_LINE_BYTES,
                  progress=None, skipped: list | None = None) -> Iterator[str]:
    """The lines of a file as `str`, invalid UTF-8 replaced by U+FFFD; counts `lines`,
    `lines_with_invalid_utf8` and (skipped) `lines_over_max_bytes` into `counts`, and appends the skipped
    lines' numbers (from 1) to `skipped` when given; `progress` as `bounded_lines`'."""
    for name in ("lines", "lines_with_invalid_utf8", "lines_over_max_bytes"):
        counts.setdefault(name, 0)
    for number, raw in enumerate(raw_lines(path, max_line_bytes, progress), 1):
        if raw is None:
            counts["lines_over_max_bytes"] += 1
            if skipped is not None:
                skipped.append(number)
            continue
        counts["lines"] += 1
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            counts["lines_with_invalid_utf8"] += 1
            yield raw.decode("utf-8", errors="replace")


class ReadLines(beam.DoFn):
    """A file path -> its lines as `str` (see `decoded_lines`), counted in Beam metrics."""

    def process(self, path: str):
        counts = collections.Counter()
        yield from decoded_lines(path, counts)
        Counts(counts).report(NAMESPACE)


class ReadLineBatches(beam.DoFn):
    """A file path -> lists of up to `batch_lines` of its lines, then the file's `Counts`. With
    `progress_folder`, the bytes and lines read go to stage `read` of `pipeline.progress`.

    Batching here, inside `process`, is what every runner runs alike: `BatchElements` emits its last batch
    in `finish_bundle`, which Beam 2.77's Dask runner drops (see docs/distributed_runners.md).
    """

    def __init__(self, batch_lines: int, progress_folder: str | None = None):
        self.batch_lines, self.progress_folder = batch_lines, progress_folder

    def process(self, path: str):
        progress = read_progress(self.progress_folder, path)
        counts, batch = collections.Counter(), []
        for line in decoded_lines(path, counts, progress=progress):
            batch.append(line)
            if len(batch) == self.batch_lines:
                if progress:
                    progress.update(len(batch))
                yield batch
                batch = []
        if progress:
            progress.update(len(batch))
            progress.flush()
        if batch:
            yield batch
        yield Counts(counts).report(NAMESPACE)


def read_progress(folder: str | None, path: str):
    """Stage `read`'s progress for one input file (named by the path's hash: a retried read replaces its
    figures), or None without a folder. It looks at the clock every 1024 lines only."""
    if not folder:
        return None
    from pipeline.progress import StageProgress

    return StageProgress(folder, "read", name=hashlib.sha1(path.encode()).hexdigest()[:16], check_every=1024)


class ReadCorpusLines(beam.PTransform):
    """Reads every line of `files` as `str`, one file per worker; with `batch_lines`, lists of lines and one
    `Counts` per file instead (`ReadLineBatches`, which reports progress into `progress_folder` if given)."""

    def __init__(self, files: list[str], batch_lines: int = 0, progress_folder: str | None = None):
        super().__init__()
        self.files, self.batch_lines, self.progress_folder = list(files), batch_lines, progress_folder

    def expand(self, pbegin):
        files = pbegin | "Files" >> beam.Create(self.files)
        if self.batch_lines:
            return files | "ReadLineBatches" >> beam.ParDo(ReadLineBatches(self.batch_lines, self.progress_folder))
        return files | "ReadLines" >> beam.ParDo(ReadLines())
