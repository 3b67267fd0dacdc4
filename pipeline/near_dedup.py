"""The near-duplicate stage: MinHash signatures, a GroupByKey per LSH band key, candidates confirmed by the
estimated Jaccard similarity, and the rule "drop a document that has a confirmed near duplicate with a
smaller id".

Per document (`Signatures`): the signature of its text (`preprocessing.near_duplicates`), then one element per
band, `(band key, (id, signature bytes, sample))`. Per band key (`_band_edges`): the group's `max_comparisons`
smallest ids are its anchors (collected with a bounded heap; the rest of the group is streamed); every member
is compared with the anchors of smaller id, smallest first, and the first whose estimated Jaccard is at least
the threshold gives the edge `member -> anchor`. Per document (`CombinePerKey(min)`): the smallest anchor of
all its bands. The documents are then joined with their edge by id (a GroupByKey) and a document with an edge
is dropped. Why this rule rather than connected components: it needs no iteration (a fixed number of
shuffles on any runner), never drops a document whose only near twin was itself dropped in favour of a third
document it does not resemble, and keeps exactly one document of every group whose members all resemble
each other.
"""

import heapq

import apache_beam as beam
import numpy as np

from pipeline.beam_options import Counts, SetupDoFn
from pipeline.dedup_stages import _DOC, _NEAR, Cluster, is_heldout, sample
from preprocessing import near_duplicates
from preprocessing.dedup_config import DedupConfig


class Signatures(SetupDoFn):
    """`(id, lines)` -> `(band key, (id, signature bytes, sample))` per band."""

    setup_state = ("_seeds",)

    def __init__(self, config: DedupConfig):
        self.config = config

    def setup(self):
        self._seeds = near_duplicates.permutation_seeds(self.config.minhash)

    def process(self, doc):
        doc_id, lines = doc
        sig = near_duplicates.signature("\n".join(lines), self.config.minhash, self._seeds)
        value = (doc_id, sig.tobytes(), sample(lines))
        for key in near_duplicates.band_keys(sig, self.config.bands):
            yield key, value


def _band_edges(_, members, threshold: float, max_comparisons: int, among_training: bool):
    """One band group -> `(member id, (anchor id, anchor sample))` for each member with a confirmed anchor."""
    anchors = heapq.nsmallest(max_comparisons, members, key=lambda m: m[0])
    if len(anchors) < 2:
        return
    anchor_sigs = [(a_id, np.frombuffer(a_sig, np.uint32), a_sample) for a_id, a_sig, a_sample in anchors]
    for doc_id, sig_bytes, _ in members:
        if is_heldout(doc_id):
            continue
        sig = None
        for a_id, a_sig, a_sample in anchor_sigs:
            if a_id >= doc_id:
                break
            if not among_training and not is_heldout(a_id):
                break
            sig = np.frombuffer(sig_bytes, np.uint32) if sig is None else sig
            if near_duplicates.estimated_jaccard(sig, a_sig) >= threshold:
                yield doc_id, (a_id, a_sample)
                break


def _drop_linked(doc_id, values):
    """A document and its smallest anchor, if any -> the document if it has none, else a `Counts`."""
    values = list(values)
    (lines,) = [v for tag, v in values if tag == _DOC] or [None]
    links = [v for tag, v in values if tag == _NEAR]
    if lines is None:
        return
    if not links or is_heldout(doc_id):
        yield doc_id, lines
    else:
        anchor = min(links)[0]
        yield Counts({"decontaminate_near_documents" if is_heldout(anchor) else "dedup_near_documents": 1})


def _add_sizes(values):
    """`(linked documents, anchor sample)` pairs of one anchor -> their sum (a combiner: partial sums too)."""
    values = list(values)
    return sum(v[0] for v in values), min(v[1] for v in values)


def _cluster(anchor, size_and_sample):
    size, text = size_and_sample
    rule = "heldout_near" if is_heldout(anchor) else "near"
    return Cluster(rule=rule, kept=anchor, size=size + (rule == "near"), sample=text)


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
        clusters = (edges
                    | "ByAnchor" >> beam.MapTuple(lambda _, anchor: (anchor[0], (1, anchor[1])))
                    | "ClusterSizes" >> beam.CombinePerKey(_add_sizes)
                    | "Clusters" >> beam.MapTuple(_cluster))
        tagged_docs = docs | "TagDocs" >> beam.MapTuple(lambda doc_id, lines: (doc_id, (_DOC, lines)))
        tagged_edges = edges | "TagEdges" >> beam.MapTuple(lambda doc_id, anchor: (doc_id, (_NEAR, anchor)))
        kept = ((tagged_docs, tagged_edges)
                | "WithEdges" >> beam.Flatten()
                | "JoinEdges" >> beam.GroupByKey()
                | "DropLinked" >> beam.FlatMapTuple(_drop_linked))
        return (kept, clusters) | "WithNearClusters" >> beam.Flatten()
