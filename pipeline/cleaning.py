"""Cleaning before pairing and masking: filters, deduplication and held-out decontamination, as one transform.

    docs [+ held-out docs] -> FilterDocuments -> DocumentCopies (exact, spans) -> NearDuplicates
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

import collections
import dataclasses

import apache_beam as beam

from pipeline.beam_options import Counts
from pipeline.dedup_stages import Cluster, DocumentCopies, is_heldout
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
    """A stage's mixed output -> (documents, the report's records: `Counts` and `Cluster`s): two filters (not
    tagged outputs, which the Dask runner hands to every consumer)."""
    docs = pcoll | f"{label}Docs" >> beam.Filter(lambda x: isinstance(x, tuple))
    records = pcoll | f"{label}Records" >> beam.Filter(lambda x: not isinstance(x, tuple))
    return docs, records


def _rank(cluster) -> tuple:
    """Larger clusters first, then the smaller kept id (ids are tuples of ints); rule and sample break ties, so
    the order is total and the same on every runner."""
    return cluster["size"], tuple(-x for x in cluster["kept"]), cluster["rule"], cluster["sample"]


def _largest(clusters, n: int) -> list:
    return sorted(clusters, key=_rank, reverse=True)[:n]


class ReportRecords(beam.CombineFn):
    """`Counts` and `Cluster` records -> `(summed counters, the n largest clusters)` (a combiner, so no worker
    holds them all; Beam's `Top.Of` emits in `finish_bundle`, which the Dask runner drops)."""

    def __init__(self, n: int):
        self.n = n

    def create_accumulator(self):
        return collections.Counter(), []

    def add_input(self, accumulator, record):
        counts, clusters = accumulator
        if not isinstance(record, Cluster):
            counts.update(record)
        elif self.n:
            clusters.append(record)
            if len(clusters) > 4 * self.n:  # trimmed now and then: sorting once per cluster would cost more
                clusters[:] = _largest(clusters, self.n)
        return accumulator

    def merge_accumulators(self, accumulators):
        counts, clusters = self.create_accumulator()
        for other_counts, other_clusters in accumulators:
            counts.update(other_counts)
            clusters.extend(other_clusters)
        return counts, _largest(clusters, self.n)

    def extract_output(self, accumulator):
        counts, clusters = accumulator
        return dict(counts), _largest(clusters, self.n)


def _report(counts_and_clusters) -> dict:
    counters, clusters = counts_and_clusters
    return {"counters": Counts(sorted(counters.items())).report(NAMESPACE),
            "clusters": [{**c, "kept": list(c["kept"])} for c in clusters]}


class CleanDocuments(beam.PTransform):
    """Training documents (and `heldout` documents, if given) -> (kept training documents, the report)."""

    def __init__(self, config: CleanConfig, heldout=None):
        super().__init__()
        self.config, self.heldout = config, heldout

    def expand(self, docs):
        config, records = self.config, []
        if self.heldout is not None:
            docs = (docs, self.heldout) | "WithHeldout" >> beam.Flatten()
            records.append(self.heldout | "CountHeldout" >> beam.Map(lambda _: Counts(heldout_documents=1)))
        stages, ranges = [], config.dedup.key_ranges or 1
        if config.filters.active:
            stages.append(("Filters", beam.ParDo(FilterDocuments(config.filters))))
        exact, spans = config.dedup.exact or config.decontaminate, config.dedup.spans
        if exact or spans:
            stages.append(("Copies", DocumentCopies(exact, config.dedup.exact,
                                                    config.dedup.span_sentences if spans else 0, ranges)))
        if config.dedup.near or config.decontaminate:
            stages.append(("Near", NearDuplicates(config.dedup, config.dedup.near, ranges)))
        for label, stage in stages:
            docs, stage_records = split_kinds(docs | label >> stage, label)
            records.append(stage_records)
        kept = docs | "DropHeldout" >> beam.Filter(lambda doc: not is_heldout(doc[0]))
        records.append(kept | "CountKept" >> beam.Map(lambda _: Counts(clean_documents_kept=1)))
        report = (tuple(records)
                  | "AllRecords" >> beam.Flatten()
                  | "SumAndLargest" >> beam.CombineGlobally(ReportRecords(config.dedup.report_clusters))
                  | "Report" >> beam.Map(_report))
        return kept, report
