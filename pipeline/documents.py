"""Reading documents in BERT's input format: one sentence per line, a blank line between documents.

A document never spans files, so each matched file is read by one worker, streamed line by line
(`corpus_io.raw_lines`: any `FileSystems` path, `.gz` checked to its end). A document's id is
`(file index, document index)`, the file index being its position in the sorted list of matched files:
stable across runners and runs. Malformed UTF-8 is replaced and counted; empty documents are counted and
skipped; lines over `max_line_bytes` are counted and skipped without being held in memory (they would only
be truncated away), and the first few are named (`SKIPPED_AT` keys, which the job reports). The counts of each file follow its documents as one `Counts` element.
"""

import collections

import apache_beam as beam

from pipeline.beam_options import Counts
from pipeline.corpus_io import MAX_LINE_BYTES, decoded_lines, read_progress

NAMESPACE = "pretraining_data"
SKIPPED_AT = "@line_over_max_bytes "  # + "path:line": a `Counts` key that travels to metadata, not a metric
SKIPPED_SHOWN = 3  # per file


class ReadDocuments(beam.DoFn):
    """`(file index, path)` -> `((file index, document index), [sentence, ...])` for each document, then the
    file's `Counts` (documents, empty_documents, sentences, lines, lines_with_invalid_utf8,
    lines_over_max_bytes, and `documents_over_max_bytes`: documents whose every line was over the limit, so
    skipped whole). With `progress_folder`, the bytes and documents read go to stage `read` of
    `pipeline.progress`."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES, progress_folder: str | None = None):
        self.max_line_bytes, self.progress_folder = max_line_bytes, progress_folder

    def process(self, element):
        file_index, path = element
        progress = read_progress(self.progress_folder, path)
        counts = collections.Counter(documents=0, empty_documents=0, sentences=0)
        index, document, skipped, seen = 0, [], [], 0
        for line in decoded_lines(path, counts, self.max_line_bytes, progress, skipped):
            if line.strip():
                document.append(line)
                continue
            if document:
                yield self._emit(file_index, index, document, counts, progress)
                index += 1
                document = []
            elif len(skipped) > seen:  # a document of over-long lines only: every line of it was skipped
                counts["documents_over_max_bytes"] += 1
            else:
                counts["empty_documents"] += 1
            seen = len(skipped)
        if document:
            yield self._emit(file_index, index, document, counts, progress)
        elif len(skipped) > seen:
            counts["documents_over_max_bytes"] += 1
        if progress:
            progress.flush()
        counts.update({f"{SKIPPED_AT}{path}:{n}": 1 for n in skipped[:SKIPPED_SHOWN]})
        yield Counts(counts).report(NAMESPACE)

    @staticmethod
    def _emit(file_index, index, document, counts, progress):
        counts["documents"] += 1
        if progress:
            progress.update(1)
        counts["sentences"] += len(document)
        return (file_index, index), document
