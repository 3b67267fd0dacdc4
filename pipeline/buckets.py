"""Assigning tokenized documents to hash buckets (one bucket = one output shard), without side inputs.

A document's bucket is `stable_hash(seed, "bucket", document id) % n`, `n` being `--num_shards` or
`ceil(documents / docs_per_bucket)`. Every bucket is keyed `(bucket, n)`, so the step that writes it knows the
shard count from its key, and every bucket `0..n-1` gets one `((bucket, n), None)` marker, so that empty
buckets still write their (empty) shard.

No side input anywhere: Beam 2.77's Dask runner evaluates a side input inside each consuming task by
submitting the whole upstream graph again, which reads and tokenizes every file again, and the value it gets
is not the one the job computes (seen: a `Count.Globally` of 80 elements read as 160, a document count of
400 read as more than 500, hence 2 buckets instead of 1; see docs/distributed_runners.md). So:
- with `num_shards`, `n` is known in the launcher: a constant, no data-dependent step at all;
- without it, the documents are counted per batch (`(file, document index // batch)`), the counts are
  gathered under one key (a few numbers per 256 documents), and `n` is sent back to every batch key and
  joined with the documents by a `GroupByKey`: one extra shuffle of the tokenized documents, computed once
  on every runner.
"""

import math

import apache_beam as beam

from preprocessing import stable_random


def bucket_count(num_documents: int, num_shards: int, docs_per_bucket: int) -> int:
    return num_shards or max(1, math.ceil(num_documents / docs_per_bucket))


def bucket_of(seed: int, doc_id, n: int) -> int:
    return stable_random.stable_hash(seed, "bucket", doc_id) % n


def bucket_markers(n: int) -> list:
    """One `((bucket, n), None)` per bucket: empty buckets still get their shard."""
    return [((b, n), None) for b in range(n)]


_COUNT, _DOC = 0, 1  # tags of the joined values: the bucket count, a document


class AssignBuckets(beam.PTransform):
    """`(document id, tokenized document)` -> `((bucket, n), document or None)`: every document under its
    bucket, and one `None` marker per bucket (see the module docstring)."""

    def __init__(self, seed: int, num_shards: int, docs_per_bucket: int, batch_documents: int):
        super().__init__()
        self.seed, self.num_shards = seed, num_shards
        self.docs_per_bucket, self.batch_documents = docs_per_bucket, batch_documents

    def expand(self, docs):
        seed = self.seed
        if self.num_shards:
            n = self.num_shards
            assigned = docs | "Assign" >> beam.Map(lambda doc: ((bucket_of(seed, doc[0], n), n), doc))
            markers = docs.pipeline | "EveryBucket" >> beam.Create(bucket_markers(n))
            return (assigned, markers) | "WithEmptyBuckets" >> beam.Flatten()
        batch, per_bucket = self.batch_documents, self.docs_per_bucket
        by_batch = docs | "KeyByBatch" >> beam.Map(lambda doc: ((doc[0][0], doc[0][1] // batch), (_DOC, doc)))
        sizes = (docs
                 | "OnePerDocument" >> beam.Map(lambda doc: ((doc[0][0], doc[0][1] // batch), 1))
                 | "BatchSizes" >> beam.CombinePerKey(sum)
                 | "OneKey" >> beam.Map(lambda kv: (0, kv))
                 | "GatherSizes" >> beam.GroupByKey()
                 | "Count" >> beam.MapTuple(lambda _, sizes: (
                     bucket_count(sum(s for _, s in sizes), 0, per_bucket), sorted(k for k, _ in sizes))))
        markers = sizes | "EveryBucket" >> beam.FlatMapTuple(lambda n, _: bucket_markers(n))
        counts = sizes | "ToEveryBatch" >> beam.FlatMapTuple(lambda n, keys: [(k, (_COUNT, n)) for k in keys])
        assigned = ((by_batch, counts)
                    | "WithCount" >> beam.Flatten()
                    | "JoinCount" >> beam.GroupByKey()
                    | "Assign" >> beam.FlatMapTuple(lambda _, values: _assign(seed, values)))
        return (assigned, markers) | "WithEmptyBuckets" >> beam.Flatten()


def _assign(seed: int, values):
    """One batch's tagged values (its documents and the bucket count) -> `((bucket, n), document)`."""
    values = list(values)
    (n,) = [v for tag, v in values if tag == _COUNT]
    for tag, doc in values:
        if tag == _DOC:
            yield (bucket_of(seed, doc[0], n), n), doc
