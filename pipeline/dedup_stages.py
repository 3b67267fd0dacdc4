"""The Beam stages of deduplication: exact documents, repeated sentence spans, near duplicates (MinHash + LSH).

Each stage takes `(document id, [sentence, ...])` and returns a PCollection mixing kept documents, `Counts`
and `Cluster` records (split them with `pipeline.cleaning.split_kinds`). Every decision is a grouping on a
hash (a document's digest, a span's digest, an LSH band key) and a stable rule (keep the smallest id), so the
result is the same on every runner. Exact copies are a GroupByKey on the document's digest (a group's values
are read twice, the smallest first, and never collected). Span digests and band keys are packed per key
range (`preprocessing.packed_keys`, `ConcatColumns`): a range's group holds its entries as numpy columns
(ids, positions, signatures; no text), bounded by the launcher's choice of the number of ranges from the
input's size, not by the corpus. The report's text samples are taken where a document meets its drops in the
join by document id, for the documents that keep a cluster only.

Held-out documents (for decontamination) travel with the training documents under ids whose file index is
negative (`-1 - held-out file index`), smaller than every training id: by the same rule, a training document
that duplicates a held-out one is always the one dropped. Held-out documents are never counted as dropped and
never written (`pipeline.cleaning` filters them out at the end).
"""

import apache_beam as beam
import numpy as np

from pipeline.beam_options import Counts
from preprocessing import dedup_config, near_duplicates, packed_keys

SAMPLE_CHARS = 160


class Cluster(dict):
    """One group of duplicates for the report: `rule`, `kept` (document id), `size` (members), `sample`."""


def is_heldout(doc_id) -> bool:
    return doc_id[0] < 0


def sample(lines) -> str:
    return " / ".join(lines)[:SAMPLE_CHARS]


def _one(name: str) -> Counts:
    return Counts({name: 1})


def _keep_smallest_copy(_, members, among_training: bool):
    """One digest's documents -> the kept ones, `Counts` of the dropped, and a `Cluster` record."""
    first = min(doc_id for doc_id, _ in members)
    training = 0
    for doc_id, lines in members:
        if is_heldout(doc_id):
            if doc_id == first:
                yield doc_id, lines
            continue
        training += 1
        if doc_id == first or (not among_training and not is_heldout(first)):
            yield doc_id, lines
        else:
            yield _one("decontaminate_exact_documents" if is_heldout(first) else "dedup_exact_documents")
    if training and (training > 1 or is_heldout(first)) and (among_training or is_heldout(first)):
        rule = "heldout_exact" if is_heldout(first) else "exact"
        kept_lines = next(lines for doc_id, lines in members if doc_id == first)
        yield Cluster(rule=rule, kept=first, size=training, sample=sample(kept_lines))


class ExactDuplicates(beam.PTransform):
    """Documents with the same normalised text: the smallest id is kept. With `among_training` False only
    training copies of held-out documents are dropped."""

    def __init__(self, among_training: bool = True):
        super().__init__()
        self.among_training = among_training

    def expand(self, docs):
        among = self.among_training
        return (docs
                | "ByDigest" >> beam.Map(lambda d: (near_duplicates.text_digest("\n".join(d[1])), d))
                | "GroupDigests" >> beam.GroupByKey()
                | "KeepSmallest" >> beam.FlatMap(lambda kv: _keep_smallest_copy(*kv, among)))


class ConcatColumns(beam.CombineFn):
    """Entries of one key range, each a tuple of byte columns -> one tuple of the columns concatenated
    (`preprocessing.packed_keys`). Runners that lift combiners (`compact` before the shuffle) send one element
    per range and bundle instead of one per entry; the order of the rows does not matter to the readers."""

    def create_accumulator(self):
        return []

    def add_input(self, accumulator, entry):
        accumulator.append(entry)
        return accumulator

    def merge_accumulators(self, accumulators):
        return [entry for accumulator in accumulators for entry in accumulator]

    def compact(self, accumulator):
        return [tuple(b"".join(column) for column in zip(*accumulator))] if len(accumulator) > 1 else accumulator

    def extract_output(self, accumulator):
        return self.compact(accumulator)[0]


def _span_keys(doc, n: int, ranges: int):
    """A training document -> `(key range, entry)` for each key range its spans fall in: the columns `(span
    digests [k, 2] uint64, document ids [k, 2] int64, positions [k] int32)` as bytes, which `ConcatColumns`
    concatenates per range. Small values, since every sentence of the corpus sends one (the samples of
    repeated spans come from the join)."""
    doc_id, lines = doc
    if is_heldout(doc_id):
        return
    entries = dedup_config.span_entries(lines, n)
    k = len(entries)
    if not k:
        return
    digests, id_bytes = [digest for digest, _ in entries], packed_keys.id_bytes(doc_id)
    positions = _POSITIONS if k <= len(_POSITIONS) // 4 else np.arange(k, dtype=np.int32).tobytes()
    if ranges == 1:  # `span_entries` gives positions 0, 1, ..., k - 1
        yield 0, (b"".join(digests), id_bytes * k, positions[:4 * k])
        return
    keys = [int.from_bytes(digest[:8], "little") for digest in digests]  # a digest's first uint64
    for key_range, rows in packed_keys.by_range(keys, ranges):
        yield key_range, (b"".join(digests[i] for i in rows), id_bytes * len(rows),
                          b"".join(positions[4 * i:4 * i + 4] for i in rows))


_POSITIONS = np.arange(4096, dtype=np.int32).tobytes()  # span positions 0..4095 as int32 bytes


def _later_copies(_, columns):
    """One key range's concatenated span columns -> for each span that occurs more than once, `(document id,
    (_SPAN, position))` for every copy but the first (the smallest `(document id, position)`), and `(first
    copy's document id, (_SPAN_CLUSTER, (position, copies)))`."""
    key_bytes, id_bytes, position_bytes = columns
    keys = np.frombuffer(key_bytes, np.uint64).reshape(-1, 2)  # [k, 2]
    ids = np.frombuffer(id_bytes, np.int64).reshape(-1, 2)  # [k, 2]
    positions = np.frombuffer(position_bytes, np.int32)  # [k]
    order = np.lexsort((positions, ids[:, 1], ids[:, 0], keys[:, 1], keys[:, 0]))  # by digest, id, position
    for run in packed_keys.repeated_runs(order, keys[:, 0], keys[:, 1]):
        first = run[0]
        for i in run[1:].tolist():
            yield packed_keys.doc_id(ids, i), (_SPAN, int(positions[i]))
        yield packed_keys.doc_id(ids, first), (_SPAN_CLUSTER, (int(positions[first]), len(run)))


_DOC, _SPAN, _NEAR, _SPAN_CLUSTER, _NEAR_CLUSTER = range(5)  # tags of the values joined by document id


def _remove_spans(doc_id, values, n: int):
    """A document and the spans to remove from it -> the rest of it (unless emptied), `Counts`, and a
    `Cluster` for each repeated span whose first copy it holds."""
    values = list(values)
    (lines,) = [v for tag, v in values if tag == _DOC] or [None]
    if lines is None:
        return
    for position, size in (v for tag, v in values if tag == _SPAN_CLUSTER):
        yield Cluster(rule="span", kept=doc_id, size=size, sample=sample(lines[position:position + n]))
    starts = sorted(v for tag, v in values if tag == _SPAN)
    kept = dedup_config.remove_positions(lines, starts, n)
    if len(kept) < len(lines):
        yield Counts({"dedup_span_sentences": len(lines) - len(kept)})
    if kept:
        yield doc_id, kept
    else:
        yield _one("dedup_span_documents_emptied")


class RepeatedSpans(beam.PTransform):
    """C4's rule: each span of `n` consecutive sentences is kept once (smallest document id and position).
    `ranges`: key ranges of the packed span digests (`preprocessing.packed_keys`; the result does not depend
    on it)."""

    def __init__(self, n: int, ranges: int = 1):
        super().__init__()
        self.n, self.ranges = n, ranges

    def expand(self, docs):
        n, ranges = self.n, self.ranges
        drops = (docs
                 | "SpanKeys" >> beam.FlatMap(_span_keys, n, ranges)
                 | "PackRanges" >> beam.CombinePerKey(ConcatColumns())
                 | "LaterCopies" >> beam.FlatMapTuple(_later_copies))
        tagged = docs | "TagDocs" >> beam.MapTuple(lambda doc_id, lines: (doc_id, (_DOC, lines)))
        return ((tagged, drops)
                | "WithDrops" >> beam.Flatten()
                | "JoinDrops" >> beam.GroupByKey()
                | "RemoveSpans" >> beam.FlatMap(lambda kv: _remove_spans(*kv, n)))
