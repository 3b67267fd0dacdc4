"""`PretrainingDataJob`: what a pretraining-data job makes, as one typed value (the flags of
`python -m pipeline.pretraining_data`, and its Python API: `pipeline.pretraining_data.run(job)`).

Each field, and the ranges that depend on the model (`max_seq_length`, `max_predictions_per_seq`), is checked
when the job is made (`commands.job_fields`); the paths before anything runs (`check`); what depends on the
files (the vocabulary's case, the input's matches) is resolved when it runs. `metadata_config` is the `config`
section of the dataset's `metadata.json`: the job under stable keys that the readers look up
(`max_seq_length`, `masking`, `max_predictions_per_seq`, `masked_lm_prob`, `whole_word_mask`) and the rest of
the job, so that a field renamed here changes no file on disk.
"""

import dataclasses

from pipeline.beam_job import RunOptions
from pipeline.clean_report import Cleaning
from preprocessing import sentence_pairs
from commands.job_fields import COUNT, PROBABILITY, JobFieldError, Rule, checked, field_range, output_of
from commands.user_errors import require_file, writable_dir

MODELS = ("bert", "gpt", "bilm")
MASKING = ("static", "dynamic")
DEFAULT_LENGTH = {"bert": 128, "gpt": 128, "bilm": 20}
MIN_LENGTH = {"bert": sentence_pairs.MIN_SEQ_LENGTH, "gpt": 1, "bilm": 1}
MAX_SHARDS = 99_999  # shard names have five digits


# Each field's own range (`commands.job_fields`); `__post_init__` checks those that depend on the model.
RULES = {"masked_lm_prob": Rule(0.0, 1.0, low_open=True), "dupe_factor": COUNT, "short_seq_prob": PROBABILITY,
         "seed": Rule(0, 2**63 - 1), "num_shards": Rule(0, MAX_SHARDS), "docs_per_bucket": COUNT,
         "output_dir": output_of("input")}


@checked(RULES)
@dataclasses.dataclass(frozen=True)
class PretrainingDataJob:
    """A pretraining-data job: raw text in BERT's format -> sharded TFRecords of one model's examples.

    Args:
      model: `bert`, `gpt` or `bilm`: the examples made (`preprocessing.schema`).
      input: file pattern, one sentence a line, a blank line between documents (local or gs://, `.gz` ok).
      vocab: the vocabulary file (written beside the shards as `vocab.txt`).
      output_dir: the dataset's folder: shards, `metadata.json`, `vocab.txt`.
      max_seq_length: bert/gpt: the sequence length; bilm: the window in tokens; None: 128 (bert, gpt) or 20.
      max_predictions_per_seq, masked_lm_prob, whole_word_mask, masking: BERT's masking (`static`: in the
        records; `dynamic`: by the reader, each epoch).
      dupe_factor, short_seq_prob: BERT's passes over each document and share of shorter sequences.
      seed: every random choice derives from it (`preprocessing.stable_random`).
      num_shards: output shards (= document buckets); 0: one per `docs_per_bucket` documents.
      gzip: write `.tfrecord.gz`.
      docs_per_bucket: documents per bucket, which share a pool of random next segments.
      lower_case: None: from the vocabulary (uncased when it has no upper-case entry); must match it.
      overwrite: replace an earlier run in `output_dir` (`commands.overwrite`).
      cleaning: filters, deduplication, decontamination before tokenizing (`clean_report.Cleaning`).
      run_options: Beam's options, `verbose`, `progress_seconds` (`beam_job.RunOptions`).

    Example:
      >>> job = PretrainingDataJob(model="gpt", input="corpus/*.txt", vocab="vocab.txt", output_dir="gpt_data")
      >>> job.length
      128
    """

    model: str
    input: str
    vocab: str
    output_dir: str
    max_seq_length: int | None = None
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    whole_word_mask: bool = False
    masking: str = "static"
    seed: int = 12345
    num_shards: int = 0
    gzip: bool = False
    docs_per_bucket: int = 500
    lower_case: bool | None = None
    overwrite: bool = False
    cleaning: Cleaning = Cleaning()
    run_options: RunOptions = RunOptions()

    @property
    def length(self) -> int:
        """`max_seq_length`, or the model's default."""
        return DEFAULT_LENGTH[self.model] if self.max_seq_length is None else self.max_seq_length

    def __post_init__(self):
        """The choices, and the ranges that depend on the model (each field's own: `RULES`)."""
        if self.model not in MODELS:
            raise JobFieldError(f"--model {self.model!r}: choose from {', '.join(MODELS)}")
        if self.masking not in MASKING:
            raise JobFieldError(f"--masking {self.masking!r}: choose from {', '.join(MASKING)}")
        field_range("--max_seq_length", self.length, MIN_LENGTH[self.model])
        field_range("--max_predictions_per_seq", self.max_predictions_per_seq, 1,
                    self.length if self.model == "bert" else None)

    def check(self) -> None:
        """Beam's options and every path, before anything runs; raises `UserError`."""
        self.run_options.check()
        require_file("--vocab", self.vocab)
        writable_dir("--output_dir", self.output_dir)

    def metadata_config(self, lower_case: bool) -> dict:
        """`metadata.json`'s `config`: the job under stable keys, with the resolved `max_seq_length` and
        `lower_case` (the vocabulary's case when the job leaves it None). `num_shards` is the job's here; the
        written metadata has the number of shards written. Not `progress_seconds` nor Beam's options, which do
        not change the output."""
        return {"model": self.model, "input": self.input, "vocab": self.vocab, "output_dir": self.output_dir,
                "max_seq_length": self.length, "max_predictions_per_seq": self.max_predictions_per_seq,
                "masked_lm_prob": float(self.masked_lm_prob), "dupe_factor": self.dupe_factor,
                "short_seq_prob": float(self.short_seq_prob), "whole_word_mask": self.whole_word_mask,
                "masking": self.masking, "seed": self.seed, "num_shards": self.num_shards, "gzip": self.gzip,
                "docs_per_bucket": self.docs_per_bucket, "lower_case": lower_case, "overwrite": self.overwrite,
                "verbose": self.run_options.verbose, **self.cleaning.flags()}
