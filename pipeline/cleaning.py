"""Cleaning before pairing and masking: filters, deduplication and held-out decontamination, as one transform.

    docs [+ held-out docs] -> FilterDocuments -> ExactDuplicates -> RepeatedSpans -> NearDuplicates
                           -> (kept training documents, one report element)

Each step runs only when asked (`CleanConfig`); with nothing asked the jobs do not apply the transform at
all, so their output is unchanged. Documents are `(document id, [sentence, ...])` as `pipeline.documents`
reads them, and keep their ids, so everything after (buckets, seeds) is the same for a kept document as
without cleaning. Held-out documents (`read_heldout`) carry negative file indices (see `dedup_stages`): they
pass the same filters (uncounted) so that they compare like the training text, and are never output.

The report element is a dict: `counters` (what each rule removed, the documents kept and the held-out
documents read; the jobs add them to their metadata) and `clusters` (the largest groups of duplicates, each
with its rule, kept document id, size and a text sample). Counters are also Beam metrics (namespace `clean`).
"""

import dataclasses

import apache_beam as beam

from pipeline.beam_options import Counts, total
from pipeline.dedup_stages import Cluster, ExactDuplicates, RepeatedSpans, is_heldout
from pipeline.documents import ReadDocuments
from pipeline.near_dedup import NearDuplicates
from preprocessing.dedup_config import DedupConfig
from preprocessing.text_filters import FilterConfig, filter_document

NAMESPACE = "clean"


@dataclasses.dataclass(frozen=True)
class CleanConfig:
    """What cleaning does.

    Args:
      filters: line and document filters (`preprocessing.text_filters`).
      dedup: deduplication stages (`preprocessing.dedup_config`).
      decontaminate: held-out documents are given: drop training documents that are exact or near duplicates
        of any of them (with `dedup`'s MinHash settings).
    """

    filters: FilterConfig = FilterConfig()
    dedup: DedupConfig = DedupConfig()
    decontaminate: bool = False

    @property
    def active(self) -> bool:
        return self.filters.active or self.dedup.active or self.decontaminate


def read_heldout(p, files: list[str], label: str = "Heldout"):
    """Held-out documents as `((-1 - file index, document index), lines)`."""
    return (p
            | f"{label}Files" >> beam.Create([(-1 - i, path) for i, path in enumerate(files)])
            | f"{label}Read" >> beam.ParDo(ReadDocuments())
            | f"{label}Documents" >> beam.Filter(lambda x: not isinstance(x, Counts)))


class FilterDocuments(beam.DoFn):
    """`(id, lines)` -> `(id, kept lines)` unless dropped, and the rules' `Counts` (training documents only)."""

    def __init__(self, config: FilterConfig):
        self.config = config

    def process(self, doc):
        doc_id, lines = doc
        kept, counts = filter_document(lines, self.config)
        if kept:
            yield doc_id, kept
        if counts and not is_heldout(doc_id):
            yield Counts(counts)


def split_kinds(pcoll, label: str):
    """A stage's mixed output -> (documents, `Counts`, `Cluster`s): three filters (not tagged outputs, which
    the Dask runner hands to every consumer)."""
    docs = pcoll | f"{label}Docs" >> beam.Filter(lambda x: isinstance(x, tuple))
    counts = pcoll | f"{label}Counts" >> beam.Filter(lambda x: isinstance(x, Counts))
    clusters = pcoll | f"{label}Clusters" >> beam.Filter(lambda x: isinstance(x, Cluster))
    return docs, counts, clusters


def _sum_counts(counts) -> Counts:
    return Counts(total(counts))


def _rank(cluster) -> tuple:
    """Larger clusters first, then the smaller kept id (ids are tuples of ints); rule and sample break ties, so
    the order is total and the same on every runner."""
    return cluster["size"], tuple(-x for x in cluster["kept"]), cluster["rule"], cluster["sample"]


class LargestClusters(beam.CombineFn):
    """The `n` largest clusters, as a list (a combiner, so no worker holds them all; Beam's `Top.Of` emits in
    `finish_bundle`, which the Dask runner drops)."""

    def __init__(self, n: int):
        self.n = n

    def create_accumulator(self):
        return []

    def add_input(self, accumulator, cluster):
        return self.merge_accumulators([accumulator, [cluster]])

    def merge_accumulators(self, accumulators):
        return sorted((c for a in accumulators for c in a), key=_rank, reverse=True)[:self.n]

    def extract_output(self, accumulator):
        return list(accumulator)


def _report(gathered) -> dict:
    counters = total(x for x in gathered if isinstance(x, Counts))
    clusters = [c for x in gathered if isinstance(x, list) for c in x]
    clusters = sorted(clusters, key=_rank, reverse=True)
    return {"counters": Counts(counters).report(NAMESPACE),
            "clusters": [{**c, "kept": list(c["kept"])} for c in clusters]}


class CleanDocuments(beam.PTransform):
    """Training documents (and `heldout` documents, if given) -> (kept training documents, the report)."""

    def __init__(self, config: CleanConfig, heldout=None):
        super().__init__()
        self.config, self.heldout = config, heldout

    def expand(self, docs):
        config, counts, clusters = self.config, [], []
        if self.heldout is not None:
            docs = (docs, self.heldout) | "WithHeldout" >> beam.Flatten()
            counts.append(self.heldout | "CountHeldout" >> beam.Map(lambda _: Counts(heldout_documents=1)))
        stages = []
        if config.filters.active:
            stages.append(("Filters", beam.ParDo(FilterDocuments(config.filters))))
        if config.dedup.exact or config.decontaminate:
            stages.append(("Exact", ExactDuplicates(among_training=config.dedup.exact)))
        if config.dedup.spans:
            stages.append(("Spans", RepeatedSpans(config.dedup.span_sentences)))
        if config.dedup.near or config.decontaminate:
            stages.append(("Near", NearDuplicates(config.dedup, among_training=config.dedup.near)))
        for label, stage in stages:
            docs, stage_counts, stage_clusters = split_kinds(docs | label >> stage, label)
            counts.append(stage_counts)
            clusters.append(stage_clusters)
        kept = docs | "DropHeldout" >> beam.Filter(lambda doc: not is_heldout(doc[0]))
        counts.append(kept | "CountKept" >> beam.Map(lambda _: Counts(clean_documents_kept=1)))
        summed = tuple(counts) | "AllCounts" >> beam.Flatten() | "SumCounts" >> beam.CombineGlobally(_sum_counts)
        parts = [summed]
        if clusters and config.dedup.report_clusters:
            parts.append(tuple(clusters)
                         | "AllClusters" >> beam.Flatten()
                         | "Largest" >> beam.CombineGlobally(LargestClusters(config.dedup.report_clusters)))
        report = (tuple(parts)
                  | "ReportParts" >> beam.Flatten()
                  | "GatherReport" >> beam.combiners.ToList()
                  | "Report" >> beam.Map(_report))
        return kept, report
