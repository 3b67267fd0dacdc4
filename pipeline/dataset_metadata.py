"""A pretraining dataset's `metadata.json` (`preprocessing.metadata.DatasetMetadata`), written from the typed
job: what is known before the run (`planned`: the job's config under stable keys, the schema, the
vocabulary, the input's size), then, last of all the job's files, with its shards and counters (`finish`);
and what a user should hear about the finished run (`warnings_for`).
"""

import dataclasses
import os

import tensorflow as tf

from pipeline import corpus_io
from pipeline.beam_options import Counts, total
from pipeline.documents import SKIPPED_AT
from pipeline.example_makers import ExampleConfig
from pipeline.pretraining_job import PretrainingDataJob
from pipeline.shard_writer import write_failed
from preprocessing import schema
from preprocessing.metadata import FILE_NAME as METADATA, VOCAB_FILE, DatasetMetadata, VocabRecord
from preprocessing.vocabulary import Vocabulary
from commands.user_errors import UserError


def planned(job: PretrainingDataJob, examples: ExampleConfig, input_files: int) -> DatasetMetadata:
    """What is known before the job runs; `finish` adds the shards and counts."""
    vocab = Vocabulary(examples.vocab_tokens)
    return DatasetMetadata(schema_version=schema.SCHEMA_VERSION, model=job.model,
                           config=job.metadata_config(examples.lower_case),
                           features=schema.describe(examples.features()), compression="GZIP" if job.gzip else "",
                           vocab=VocabRecord(file=VOCAB_FILE, sha256=vocab.sha256, size=len(vocab),
                                             special_ids=vocab.special_ids()),
                           input_files=input_files)


def finished(gathered, metadata: DatasetMetadata) -> DatasetMetadata:
    """`metadata` with the shard summaries and the reader's `Counts` (`gathered`): the shards, examples and
    counters, and `num_shards` as written. `UserError` when the corpus made no example."""
    summaries = sorted((s for s in gathered if not isinstance(s, Counts)), key=lambda s: s["file"])
    num_shards = {s["num_shards"] for s in summaries}
    if len(num_shards) > 1 or (summaries and len(summaries) != min(num_shards)):
        raise RuntimeError(f"{len(summaries)} shard summaries for num_shards {sorted(num_shards)}")
    counters = total([s["counters"] for s in summaries] + [c for c in gathered if isinstance(c, Counts)])
    skipped = tuple(k[len(SKIPPED_AT):] for k in counters if k.startswith(SKIPPED_AT))
    counters = {k: v for k, v in counters.items() if not k.startswith(SKIPPED_AT)}
    examples = sum(s["examples"] for s in summaries)
    if examples == 0:
        over = counters.get("lines_over_max_bytes", 0)
        if over:
            raise UserError(f"the corpus produced no examples: {skipped_lines_note(over, skipped)}, and the rest "
                            f"is shorter than one window; nothing written")
        raise UserError("the corpus produced no examples (empty, or every document shorter than one window): "
                        "check --input, or lower --max_seq_length; nothing written")
    return dataclasses.replace(metadata, config={**metadata.config, "num_shards": num_shards.pop()},
                               files=tuple(s["file"] for s in summaries),
                               examples_per_file={s["file"]: s["examples"] for s in summaries},
                               examples=examples, counters=counters, skipped_lines=skipped or None)


def finish(gathered, output_dir: str, metadata: DatasetMetadata) -> None:
    """Writes `output_dir/metadata.json` (`finished`): the job's last file."""
    try:
        finished(gathered, metadata).write(output_dir)
    except (OSError, tf.errors.OpError) as e:
        raise write_failed(os.path.join(output_dir, METADATA), e) from e


def skipped_lines_note(count: int, where) -> str:
    """`N line(s) over the 1 MiB line limit were skipped (path line 3, ...)` for messages."""
    shown = ", ".join(f"{p.rpartition(':')[0]} line {p.rpartition(':')[2]}" for p in where)
    more = f", {count - len(where)} more" if count > len(where) else ""
    return (f"{count} line(s) over the {corpus_io.MAX_LINE_BYTES >> 20} MiB line limit were skipped "
            f"({shown}{more}; put one sentence per line)")


def warnings_for(metadata: DatasetMetadata) -> list[str]:
    """What the user should know about a finished run: skipped over-long lines; a BERT corpus that is one
    document, where no pair can take its second segment from another document."""
    counters, out = metadata.counters or {}, []
    if counters.get("lines_over_max_bytes"):
        out.append(skipped_lines_note(counters["lines_over_max_bytes"], metadata.skipped_lines or ()))
    if metadata.model == "bert" and counters.get("documents") == 1:
        out.append("the corpus is one document (no blank line between documents): every BERT pair's second "
                   "segment is its real next one, so all next_sentence_labels are 0 ('is next') and next-sentence "
                   "prediction learns nothing; separate documents with blank lines")
    return out
