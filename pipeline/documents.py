"""Reading documents in BERT's input format: one sentence per line, a blank line between documents.

A document never spans files, so each matched file is read by one worker, streamed line by line
(`corpus_io.raw_lines`: any `FileSystems` path, `.gz` checked to its end). A document's id is
`(file index, document index)`, the file index being its position in the sorted list of matched files:
stable across runners and runs. Malformed UTF-8 is replaced and counted; empty documents are counted and
skipped; lines over `max_line_bytes` are counted and skipped without being held in memory (they would only
be truncated away).
"""

import apache_beam as beam
from apache_beam.metrics import Metrics

from pipeline.corpus_io import MAX_LINE_BYTES, raw_lines

NAMESPACE = "pretraining_data"


class ReadDocuments(beam.DoFn):
    """`(file index, path)` -> `((file index, document index), [sentence, ...])`."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES):
        self.max_line_bytes = max_line_bytes
        self.documents = Metrics.counter(NAMESPACE, "documents")
        self.empty = Metrics.counter(NAMESPACE, "empty_documents")
        self.sentences = Metrics.counter(NAMESPACE, "sentences")
        self.invalid = Metrics.counter(NAMESPACE, "lines_with_invalid_utf8")
        self.too_long = Metrics.counter(NAMESPACE, "lines_over_max_bytes")

    def process(self, element):
        file_index, path = element
        index, document = 0, []
        for raw in raw_lines(path, self.max_line_bytes):
            line = self._decode(raw)
            if line is None:
                continue
            if line.strip():
                document.append(line)
                continue
            if document:
                yield self._emit(file_index, index, document)
                index += 1
                document = []
            else:
                self.empty.inc()
        if document:
            yield self._emit(file_index, index, document)

    def _decode(self, raw: bytes | None):
        if raw is None:
            self.too_long.inc()
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid.inc()
            return raw.decode("utf-8", errors="replace")

    def _emit(self, file_index, index, document):
        self.documents.inc()
        self.sentences.inc(len(document))
        return (file_index, index), document
