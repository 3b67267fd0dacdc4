"""The near-duplicate stage: MinHash signatures, a GroupByKey per LSH band key, candidates confirmed by the
estimated Jaccard similarity, and the rule "drop a document that has a confirmed near duplicate with a
smaller id".

Per document (`Signatures`): the signature of its text (`preprocessing.near_duplicates`), then one element per
band, `(band key, (id, signature bytes))` (no text: these are `bands` elements per document, the largest part
of the stage's shuffles). Per band key (`_band_edges`): the group's `max_comparisons` smallest ids are its
anchors (collected with a bounded heap; the rest of the group is streamed); every member is compared with the
anchors of smaller id, smallest first, and the first whose estimated Jaccard is at least the threshold gives
the edge `member -> anchor`. Per document (`CombinePerKey(min)`): the smallest anchor of all its bands; per
anchor (`CombinePerKey(sum)`): the number of documents linked to it. The documents are then joined by id with
their edge and, for an anchor, that number (one GroupByKey): a document with an edge is dropped, and an anchor
gives its cluster's report record, with a sample of its text. Why this rule rather than connected
components: it needs no iteration (a fixed number of shuffles on any runner), never drops a document whose
only near twin was itself dropped in favour of a third document it does not resemble, and keeps exactly one
document of every group whose members all resemble each other.
"""

import heapq

import apache_beam as beam
import numpy as np

from pipeline.beam_options import Counts, SetupDoFn
from pipeline.dedup_stages import _DOC, _NEAR, _NEAR_CLUSTER, Cluster, is_heldout, sample
from preprocessing import near_duplicates
from preprocessing.dedup_config import DedupConfig


class Signatures(SetupDoFn):
    """`(id, lines)` -> `(band key, (id, signature bytes))` per band: what every document sends `bands` times,
    so no text sample (the report's samples come from the join by id)."""

    setup_state = ("_minhash", "_perms")

    def __init__(self, config: DedupConfig):
        self.config = config

    def setup(self):
        self._minhash = self.config.minhash  # a new MinHashConfig at each access
        self._perms = near_duplicates.permutations(self._minhash)

    def process(self, doc):
        doc_id, lines = doc
        minhash = self._minhash
        sig = near_duplicates.signature("\n".join(lines), minhash, self._perms)
        value = (doc_id, sig.tobytes())
        for key in near_duplicates.band_keys(sig, minhash.bands, minhash.rows):
            yield key, value


def _band_edges(_, members, threshold: float, max_comparisons: int, among_training: bool):
    """One band group -> `(member id, anchor id)` for each member with a confirmed anchor. Most groups hold
    one document: they return at once (no generator, no heap)."""
    values = iter(members)
    if next(values, None) is None or next(values, None) is None:
        return ()
    return _confirmed_edges(members, threshold, max_comparisons, among_training)


def _confirmed_edges(members, threshold: float, max_comparisons: int, among_training: bool):
    anchors = heapq.nsmallest(max_comparisons, members, key=lambda m: m[0])
    anchor_sigs = [(a_id, np.frombuffer(a_sig, np.uint32)) for a_id, a_sig in anchors]
    for doc_id, sig_bytes in members:
        if is_heldout(doc_id):
            continue
        sig = None
        for a_id, a_sig in anchor_sigs:
            if a_id >= doc_id:
                break
            if not among_training and not is_heldout(a_id):
                break
            sig = np.frombuffer(sig_bytes, np.uint32) if sig is None else sig
            if near_duplicates.estimated_jaccard(sig, a_sig) >= threshold:
                yield doc_id, a_id
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

    def __init__(self, config: DedupConfig, among_training: bool = True):
        super().__init__()
        self.config, self.among_training = config, among_training

    def expand(self, docs):
        c, among = self.config, self.among_training
        edges = (docs
                 | "Signatures" >> beam.ParDo(Signatures(c))
                 | "GroupBands" >> beam.GroupByKey()
                 | "BandEdges" >> beam.FlatMap(lambda kv: _band_edges(*kv, c.threshold, c.max_comparisons, among))
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
