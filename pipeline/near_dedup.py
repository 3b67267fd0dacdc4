"""The near-duplicate stage: MinHash signatures, LSH band keys packed per key range, candidates confirmed by the
estimated Jaccard similarity, and the rule "drop a document that has a confirmed near duplicate with a
smaller id".

Per document (`Signatures`): the signature of its text (`preprocessing.near_duplicates`) and its `bands` band
keys, sent as one entry per key range the keys fall in (`preprocessing.packed_keys`: no text, the signature
once per range; with one range, one entry per document where it was one element per band). Per key range
(`ConcatColumns`, a `CombinePerKey` that runners lift before the shuffle): all its entries as numpy columns,
sorted by key and id. Per band key that occurs more than once (`_confirmed_edges`): its `max_comparisons`
smallest ids are its anchors; every member is compared with the anchors of smaller id, smallest first, and
the first whose estimated Jaccard is at least the threshold gives the edge `member -> anchor`. Per document
(`CombinePerKey(min)`): the smallest anchor of all its bands; per anchor (`CombinePerKey(sum)`): the number of
documents linked to it. The documents are then joined by id with their edge and, for an anchor, that number
(one GroupByKey): a document with an edge is dropped, and an anchor gives its cluster's report record, with a
sample of its text. A key range's group holds its entries (about `packed_keys.RANGE_INPUT_BYTES` of text's,
whatever the corpus: the launcher sets the number of ranges from the input's size); the edges do not depend
on the number of ranges.

Why this rule rather than connected components: it needs no iteration (a fixed number of shuffles on any
runner), never drops a document whose only near twin was itself dropped in favour of a third document it
does not resemble, and keeps exactly one document of every group whose members all resemble each other.
"""

import struct

import apache_beam as beam
import numpy as np

from pipeline.beam_options import Counts, SetupDoFn
from pipeline.dedup_stages import _DOC, _NEAR, _NEAR_CLUSTER, Cluster, ConcatColumns, is_heldout, sample
from preprocessing import near_duplicates, packed_keys
from preprocessing.dedup_config import DedupConfig


_COUNT = struct.Struct("=i")  # a document's band keys in one range, as an int32


class Signatures(SetupDoFn):
    """`(id, lines)` -> `(key range, entry)` for each key range its band keys fall in (`preprocessing.
    packed_keys`): the entry is the columns `(band keys [k] uint64, their count [1] int32, id [1, 2] int64,
    signature [1, num_perm] uint32)` as bytes, which `ConcatColumns` concatenates per range. No text: the
    report's samples come from the join by id."""

    setup_state = ("_minhash", "_perms")

    def __init__(self, config: DedupConfig, ranges: int):
        self.config, self.ranges = config, ranges

    def setup(self):
        self._minhash = self.config.minhash  # a new MinHashConfig at each access
        self._perms = near_duplicates.permutations(self._minhash)

    def process(self, doc):
        doc_id, lines = doc
        minhash = self._minhash
        hashes = near_duplicates.text_shingle_hashes("\n".join(lines), minhash.shingle_words)
        if not hashes.size:  # no word to match (symbols or emoji only): such texts are nobody's near twin
            return
        sig = near_duplicates.minhash(hashes, self._perms)  # [num_perm]
        keys = near_duplicates.band_key_matrix(sig[None], minhash.bands, minhash.rows)[0]  # [bands]
        id_bytes, sig_bytes = packed_keys.id_bytes(doc_id), sig.tobytes()
        for key_range, entries in packed_keys.by_range(keys.tolist(), self.ranges):
            in_range = keys[entries]
            yield key_range, (in_range.tobytes(), _COUNT.pack(in_range.size), id_bytes, sig_bytes)


def _range_edges(_, columns, num_perm: int, threshold: float, max_comparisons: int, among_training: bool):
    """One key range's concatenated columns -> `(member id, anchor id)` for each member of a band key with a
    confirmed anchor, key by key (`_confirmed_edges`). Most keys occur once: only the repeated ones are looked
    at."""
    key_bytes, count_bytes, id_bytes, sig_bytes = columns
    keys = np.frombuffer(key_bytes, np.uint64)  # [k]
    owner = np.repeat(np.arange(len(count_bytes) // 4), np.frombuffer(count_bytes, np.int32))  # [k] document
    ids = np.frombuffer(id_bytes, np.int64).reshape(-1, 2)  # [m, 2]
    sigs = np.frombuffer(sig_bytes, np.uint32).reshape(-1, num_perm)  # [m, num_perm]
    order = np.lexsort((ids[owner, 1], ids[owner, 0], keys))  # by key, then id
    for run in packed_keys.repeated_runs(order, keys):
        docs = owner[run]
        yield from _confirmed_edges([packed_keys.doc_id(ids, d) for d in docs.tolist()], sigs[docs], threshold,
                                    max_comparisons, among_training)


def _confirmed_edges(ids: list, sigs: np.ndarray, threshold: float, max_comparisons: int, among_training: bool):
    """One band key's members, ids ascending `[m]` with their signatures `[m, num_perm]` -> `(member id,
    anchor id)` for each member with an anchor: of the key's `max_comparisons` smallest ids (its anchors),
    the smallest of smaller id (held-out only, unless `among_training`) whose estimated Jaccard with the
    member is at least `threshold`."""
    if len(ids) == 2:  # the most common repeated key: one comparison, no arrays
        a_id, doc_id = ids
        if (a_id < doc_id and not is_heldout(doc_id) and (among_training or is_heldout(a_id))
                and near_duplicates.estimated_jaccard(sigs[0], sigs[1]) >= threshold):
            yield doc_id, a_id
        return
    anchors = min(max_comparisons, len(ids))
    anchor_ids = ids[:anchors]
    allowed = np.array([among_training or is_heldout(a) for a in anchor_ids])  # [A]
    for start in range(1, len(ids), 512):  # member chunks bound the [chunk, A, num_perm] comparison
        chunk = sigs[start:start + 512]
        estimate = near_duplicates.estimated_jaccard(chunk[:, None, :], sigs[None, :anchors, :])  # [c, A]
        confirmed = (estimate >= threshold) & allowed  # [c, A]
        for offset in np.flatnonzero(confirmed.any(axis=1)).tolist():
            doc_id = ids[start + offset]
            if is_heldout(doc_id):
                continue
            for a in np.flatnonzero(confirmed[offset]).tolist():
                if anchor_ids[a] >= doc_id:
                    break
                yield doc_id, anchor_ids[a]
                break


def _drop_linked(doc_id, values):
    """A document, its smallest anchor if any, and the number of documents linked to it if it is an anchor
    -> the document if it has no anchor, else a `Counts`; and, for an anchor, its `Cluster`."""
    values = list(values)
    (lines,) = [v for tag, v in values if tag == _DOC] or [None]
    if lines is None:
        return
    for linked in (v for tag, v in values if tag == _NEAR_CLUSTER):
        rule = "heldout_near" if is_heldout(doc_id) else "near"
        yield Cluster(rule=rule, kept=doc_id, size=linked + (rule == "near"), sample=sample(lines))
    anchors = [v for tag, v in values if tag == _NEAR]
    if not anchors or is_heldout(doc_id):
        yield doc_id, lines
    else:
        anchor = min(anchors)
        yield Counts({"decontaminate_near_documents" if is_heldout(anchor) else "dedup_near_documents": 1})


class NearDuplicates(beam.PTransform):
    """Drops documents that have a near duplicate (estimated Jaccard >= threshold) with a smaller id. With
    `among_training` False only training near twins of held-out documents are dropped. Returns kept documents,
    `Counts` and one `Cluster` per anchor."""

    def __init__(self, config: DedupConfig, among_training: bool = True, ranges: int = 1):
        super().__init__()
        self.config, self.among_training, self.ranges = config, among_training, ranges

    def expand(self, docs):
        c, among = self.config, self.among_training
        edges = (docs
                 | "Signatures" >> beam.ParDo(Signatures(c, self.ranges))
                 | "PackRanges" >> beam.CombinePerKey(ConcatColumns())
                 | "RangeEdges" >> beam.FlatMap(
                     lambda kv: _range_edges(*kv, c.num_perm, c.threshold, c.max_comparisons, among))
                 | "SmallestAnchor" >> beam.CombinePerKey(min))
        sizes = (edges
                 | "ByAnchor" >> beam.MapTuple(lambda _, anchor: (anchor, 1))
                 | "ClusterSizes" >> beam.CombinePerKey(sum))
        tagged = [docs | "TagDocs" >> beam.MapTuple(lambda doc_id, lines: (doc_id, (_DOC, lines))),
                  edges | "TagEdges" >> beam.MapTuple(lambda doc_id, anchor: (doc_id, (_NEAR, anchor))),
                  sizes | "TagSizes" >> beam.MapTuple(lambda anchor, n: (anchor, (_NEAR_CLUSTER, n)))]
        return (tuple(tagged)
                | "WithEdges" >> beam.Flatten()
                | "JoinEdges" >> beam.GroupByKey()
                | "DropLinked" >> beam.FlatMapTuple(_drop_linked))
