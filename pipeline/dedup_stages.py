"""The Beam stages of deduplication: exact documents, repeated sentence spans, near duplicates (MinHash + LSH).

Each stage takes `(document id, [sentence, ...])` and returns a PCollection mixing kept documents, `Counts`
and `Cluster` records (split them with `pipeline.cleaning.split_kinds`). Every decision is a GroupByKey on a
hash (a document's digest, a span's digest, an LSH band key) and a stable rule (keep the smallest id), so no
worker holds the corpus and the result is the same on every runner. A group's values are read twice (the
smallest first, then the rest) and never collected, except the `max_comparisons` smallest of an LSH band.
What goes through the shuffles keyed by content (one element per span, per band) is small: ids, positions,
signatures as bytes. The report's text samples are taken where a document meets its drops in the join by
document id, for the documents that keep a cluster only.

Held-out documents (for decontamination) travel with the training documents under ids whose file index is
negative (`-1 - held-out file index`), smaller than every training id: by the same rule, a training document
that duplicates a held-out one is always the one dropped. Held-out documents are never counted as dropped and
never written (`pipeline.cleaning` filters them out at the end).
"""

import apache_beam as beam

from pipeline.beam_options import Counts
from preprocessing import dedup_config, near_duplicates

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


def _span_keys(doc, n: int):
    """A training document -> `(span digest, (document id, position))` for each of its spans: small values,
    since every sentence of the corpus sends one (the samples of repeated spans come from the join)."""
    doc_id, lines = doc
    if not is_heldout(doc_id):
        for digest, position in dedup_config.span_entries(lines, n):
            yield digest, (doc_id, position)


def _later_copies(_, copies):
    """One span's occurrences -> `(document id, (_SPAN, position))` for every copy but the first, and for a
    repeated span `(first copy's document id, (_SPAN_CLUSTER, (position, copies)))`. Most spans occur once:
    they return at once (no generator)."""
    values = iter(copies)
    next(values)
    return () if next(values, None) is None else _repeated_span(copies)


def _repeated_span(copies):
    first = min(copies)
    size = 0
    for doc_id, position in copies:
        size += 1
        if (doc_id, position) != first:
            yield doc_id, (_SPAN, position)
    yield first[0], (_SPAN_CLUSTER, (first[1], size))


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
    """C4's rule: each span of `n` consecutive sentences is kept once (smallest document id and position)."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def expand(self, docs):
        n = self.n
        drops = (docs
                 | "SpanKeys" >> beam.FlatMap(_span_keys, n)
                 | "GroupSpans" >> beam.GroupByKey()
                 | "LaterCopies" >> beam.FlatMapTuple(_later_copies))
        tagged = docs | "TagDocs" >> beam.MapTuple(lambda doc_id, lines: (doc_id, (_DOC, lines)))
        return ((tagged, drops)
                | "WithDrops" >> beam.Flatten()
                | "JoinDrops" >> beam.GroupByKey()
                | "RemoveSpans" >> beam.FlatMap(lambda kv: _remove_spans(*kv, n)))
