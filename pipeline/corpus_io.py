"""Reading raw text corpora: file patterns (local or `gs://`), gzip, and undecodable bytes.

Lines are read as bytes and decoded here, so that malformed UTF-8 is replaced and counted (Beam metrics
`corpus/lines`, `corpus/lines_with_invalid_utf8`) instead of failing a bundle.
"""

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

NAMESPACE = "corpus"


class CorpusError(ValueError):
    """The input corpus cannot be read as asked."""


def check_pattern(pattern: str) -> list[str]:
    """Returns the files matching `pattern`, or raises `CorpusError` naming the pattern."""
    try:
        matches = FileSystems.match([pattern])[0].metadata_list
    except Exception as e:  # Beam raises BeamIOError for a missing directory, etc.
        raise CorpusError(f"cannot list input files {pattern!r}: {e}") from e
    if not matches:
        raise CorpusError(f"no input files match {pattern!r}")
    return sorted(m.path for m in matches)


class DecodeLines(beam.DoFn):
    """bytes -> str, invalid UTF-8 replaced by U+FFFD and counted."""

    def __init__(self):
        self.lines = Metrics.counter(NAMESPACE, "lines")
        self.invalid = Metrics.counter(NAMESPACE, "lines_with_invalid_utf8")

    def process(self, raw: bytes):
        self.lines.inc()
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid.inc()
            yield raw.decode("utf-8", errors="replace")


class ReadCorpusLines(beam.PTransform):
    """Reads every line of the files matching `pattern` as `str` (gzip detected from the extension)."""

    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = pattern

    def expand(self, pbegin):
        return (pbegin
                | "ReadBytes" >> beam.io.ReadFromText(self.pattern, coder=beam.coders.BytesCoder(),
                                                      strip_trailing_newlines=True)
                | "Decode" >> beam.ParDo(DecodeLines()))
