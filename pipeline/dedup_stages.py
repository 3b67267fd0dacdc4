"""The Beam stages of deduplication: exact documents and repeated sentence spans (`DocumentCopies`, one join),
near duplicates (MinHash + LSH, `pipeline.near_dedup`).

Each stage takes `(document id, [sentence, ...])` and returns a PCollection mixing kept documents, `Counts`
and `Cluster` records (split them with `pipeline.cleaning.split_kinds`). Every decision is a grouping on a
hash (a document's digest, a span's digest, an LSH band key) and a stable rule (keep the smallest id), so the
result is the same on every runner. Document digests, span digests and band keys are packed per key range
(`preprocessing.packed_keys`, `ConcatColumns`): a range's group holds its entries as numpy columns (digests,
ids, positions, signatures; no text), bounded by the launcher's choice of the number of ranges from the
input's size, not by the corpus. Each stage's decisions then meet the documents in one join by document id,
the only shuffle of the text; the report's text samples are taken there, for the documents that keep a
cluster only.

Exact copies and repeated spans are decided from one pass over each document's normalised lines and applied in
one join, with the result of running them one after the other: a span's copies in documents that the exact
rule drops do not count (each span entry carries its document's digest, so a range's group sees which of a
span's holders are exact copies of another holder: copies with the same lines share every span). One case
differs: the exact rule ignores line breaks and spans do not, so a dropped copy whose lines break elsewhere
than its kept twin's can still hold a span first, and a later document then loses that span although the
rules in turn would keep it there; its text is still in the kept twin (or in the held-out document that the
copy duplicates), in other lines: text removed is always held by a kept or a held-out document.

Held-out documents (for decontamination) travel with the training documents under ids whose file index is
negative (`-1 - held-out file index`), smaller than every training id: by the same rule, a training document
that duplicates a held-out one is always the one dropped. Held-out documents are never counted as dropped and
never written (`pipeline.cleaning` filters them out at the end); a held-out document is never a span's first
copy (spans are not decontaminated).
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


_DOC, _SPAN, _NEAR, _SPAN_CLUSTER, _NEAR_CLUSTER, _EXACT, _EXACT_CLUSTER = range(7)  # values joined by id
_DOCUMENTS, _SPANS = range(2)  # the kinds of packed entries: keys `(kind, key range)`
_POSITIONS = np.arange(4096, dtype=np.int32).tobytes()  # span positions 0..4095 as int32 bytes
# The digest of a text with no word once normalised (symbols, emoji, punctuation only): such documents and spans
# are not copies of each other, whatever their characters, so they take no part in the exact and span rules.
EMPTY_TEXT = near_duplicates.normalized_digest("")


def _copy_keys(doc, exact: bool, n: int, ranges: int):
    """A document -> `((kind, key range), entry)`, entries as byte columns that `ConcatColumns` concatenates per
    key: with `exact`, its digest `(digests [1, 2] uint64, ids [1, 2] int64)`; with `n` (spans of `n`
    sentences), its span digests in each key range they fall in `(span digests [k, 2] uint64, ids [k, 2],
    positions [k] int32, document digests [k, 2] or nothing without `exact`)`. Held-out documents send their
    spans only with `exact`: they mark the training documents that copy them (small values: no text; the
    samples come from the join)."""
    doc_id, lines = doc
    document, spans = dedup_config.copy_digests(lines, n)
    id_bytes = packed_keys.id_bytes(doc_id)
    if exact and document != EMPTY_TEXT:
        yield (_DOCUMENTS, packed_keys.digest_key(document) % ranges), (document, id_bytes)
    if EMPTY_TEXT in spans:  # spans of no word (symbols only) repeat nobody's text: never dropped as copies
        kept = [i for i, span in enumerate(spans) if span != EMPTY_TEXT]
        spans = [spans[i] for i in kept]
        positions = np.array(kept, np.int32).tobytes()
    else:
        positions = None
    k = len(spans)
    if not k or (is_heldout(doc_id) and not exact):
        return
    document = document if exact else b""
    if positions is None:
        positions = _POSITIONS if k <= len(_POSITIONS) // 4 else np.arange(k, dtype=np.int32).tobytes()
    if ranges == 1:
        yield (_SPANS, 0), (b"".join(spans), id_bytes * k, positions[:4 * k], document * k)
        return
    for key_range, rows in packed_keys.by_range(list(map(packed_keys.digest_key, spans)), ranges):
        yield (_SPANS, key_range), (b"".join(spans[i] for i in rows), id_bytes * len(rows),
                                    b"".join(positions[4 * i:4 * i + 4] for i in rows), document * len(rows))


def _decisions(key, columns, among_training: bool):
    """One key's concatenated columns -> `(document id, tagged decision)` for the join (`_exact_copies` or
    `_later_copies`)."""
    kind, _ = key
    return (_exact_copies if kind == _DOCUMENTS else _later_copies)(columns, among_training)


def _exact_copies(columns, among_training: bool):
    """One key range's document digests -> for each digest held by several documents: `(id, (_EXACT, counter
    name or None))` for every dropped copy (training copies: all but the smallest id, or with `among_training`
    False only those of a held-out document; held-out copies of a held-out document: dropped, not counted),
    and `(smallest id, (_EXACT_CLUSTER, training copies))` for the report."""
    digest_bytes, id_bytes = columns
    digests = np.frombuffer(digest_bytes, np.uint64).reshape(-1, 2)  # [m, 2]
    ids = np.frombuffer(id_bytes, np.int64).reshape(-1, 2)  # [m, 2]
    order = np.lexsort((ids[:, 1], ids[:, 0], digests[:, 1], digests[:, 0]))  # by digest, then id
    for run in packed_keys.repeated_runs(order, digests[:, 0], digests[:, 1]):
        first, *copies = [packed_keys.doc_id(ids, i) for i in run.tolist()]
        decontaminate = is_heldout(first)
        for doc_id in copies:
            if is_heldout(doc_id):
                yield doc_id, (_EXACT, None)
            elif among_training or decontaminate:
                yield doc_id, (_EXACT, "decontaminate_exact_documents" if decontaminate else "dedup_exact_documents")
        training = sum(not is_heldout(doc_id) for doc_id in (first, *copies))
        if training and (training > 1 or decontaminate) and (among_training or decontaminate):
            yield first, (_EXACT_CLUSTER, training)


def _later_copies(columns, among_training: bool):
    """One key range's span columns -> for each span that occurs more than once in the training documents the
    exact rule keeps (`_span_holders`), `(document id, (_SPAN, position))` for every copy but the first (the
    smallest `(document id, position)`), and `(first copy's document id, (_SPAN_CLUSTER, (position,
    copies)))`."""
    key_bytes, id_bytes, position_bytes, document_bytes = columns
    keys = np.frombuffer(key_bytes, np.uint64).reshape(-1, 2)  # [k, 2]
    ids = np.frombuffer(id_bytes, np.int64).reshape(-1, 2)  # [k, 2]
    positions = np.frombuffer(position_bytes, np.int32)  # [k]
    documents = np.frombuffer(document_bytes, np.uint64).reshape(-1, 2) if document_bytes else None  # [k, 2]
    order = np.lexsort((positions, ids[:, 1], ids[:, 0], keys[:, 1], keys[:, 0]))  # by digest, id, position
    for run in packed_keys.repeated_runs(order, keys[:, 0], keys[:, 1]):
        holders = run.tolist() if documents is None else _span_holders(run.tolist(), ids, documents, among_training)
        if len(holders) < 2:
            continue
        first = holders[0]
        for i in holders[1:]:
            yield packed_keys.doc_id(ids, i), (_SPAN, int(positions[i]))
        yield packed_keys.doc_id(ids, first), (_SPAN_CLUSTER, (int(positions[first]), len(holders)))


def _span_holders(run: list, ids: np.ndarray, documents: np.ndarray, among_training: bool) -> list:
    """One span's entries (rows, ascending document id) -> the rows of the training documents that the exact
    rule keeps: not held-out, and not a copy (same document digest) of a held-out document or, with
    `among_training`, of a document of smaller id. A document's copies hold all its spans, so each run sees
    them."""
    smallest, heldout, holders = {}, set(), []
    for i in run:
        doc_id, document = packed_keys.doc_id(ids, i), documents[i].tobytes()
        if is_heldout(doc_id):
            heldout.add(document)
            continue
        if document in heldout or (among_training and smallest.setdefault(document, doc_id) != doc_id):
            continue
        holders.append(i)
    return holders


def _apply_copies(doc_id, values, n: int):
    """A document and its decisions -> nothing but a `Counts` if it is an exact copy; else its `Cluster`s (as
    the smallest of exact copies, as the first holder of repeated spans), the rest of it without its later
    span copies (unless emptied), and `Counts`."""
    values = list(values)
    (lines,) = [v for tag, v in values if tag == _DOC] or [None]
    if lines is None:
        return
    dropped = [v for tag, v in values if tag == _EXACT]
    if dropped:
        if dropped[0]:
            yield _one(dropped[0])
        return
    for size in (v for tag, v in values if tag == _EXACT_CLUSTER):
        yield Cluster(rule="heldout_exact" if is_heldout(doc_id) else "exact", kept=doc_id, size=size,
                      sample=sample(lines))
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


class DocumentCopies(beam.PTransform):
    """Exact copies (`exact`: documents with the same normalised text; the smallest id is kept; with
    `among_training` False only training copies of held-out documents are dropped), then C4's rule on spans
    (`span_sentences` > 0: each span of that many consecutive sentences is kept once, at the smallest document
    id and position; a document left empty is dropped), decided together and applied in one join by id.
    `ranges`: key ranges of the packed digests (`preprocessing.packed_keys`; the result does not depend on
    it)."""

    def __init__(self, exact: bool, among_training: bool, span_sentences: int, ranges: int = 1):
        super().__init__()
        self.exact, self.among_training, self.n, self.ranges = exact, among_training, span_sentences, ranges

    def expand(self, docs):
        exact, among, n, ranges = self.exact, self.among_training, self.n, self.ranges
        decisions = (docs
                     | "CopyKeys" >> beam.FlatMap(_copy_keys, exact, n, ranges)
                     | "PackRanges" >> beam.CombinePerKey(ConcatColumns())
                     | "Decide" >> beam.FlatMap(lambda kv: _decisions(*kv, among)))
        tagged = docs | "TagDocs" >> beam.MapTuple(lambda doc_id, lines: (doc_id, (_DOC, lines)))
        return ((tagged, decisions)
                | "WithDecisions" >> beam.Flatten()
                | "JoinDecisions" >> beam.GroupByKey()
                | "Apply" >> beam.FlatMap(lambda kv: _apply_copies(*kv, n)))
