"""`EmbedJob` and `EmbedResult`: one run of `python -m downstream.embed` as a frozen, typed object, and what it
wrote. The command parses its flags into an `EmbedJob` and calls `embed.run(job)`, which is also the Python API.

Example:
    job = EmbedJob(input="text/*.txt", output_dir="vectors",
                   config=EmbedConfig(module="export/bert", choices=("last",), pool="mean"))
"""

import dataclasses

from commands.job_fields import Rule, checked, output_of
from commands.user_errors import UserError
from downstream.embed_model import BAD_LINES, EmbedConfig
from pipeline.beam_job import RunOptions

MAX_SHARDS = 99_999  # shard names have five digits


@checked({"num_shards": Rule(1, MAX_SHARDS), "output_dir": output_of("input")})
@dataclasses.dataclass(frozen=True)
class EmbedJob:
    """One embedding job: what `python -m downstream.embed` runs, and its Python API (`run`).

    Args:
      input: file pattern, one sentence a line (local or gs://, `.gz` read as gzip).
      output_dir: the folder that receives the shards and metadata.json.
      config: the module, layer choices, pooling, weights, `bad_lines`, `strict_utf8` and batch size
        (`embed_model.EmbedConfig`: what every worker computes).
      num_shards: output shards; overwrite: replace an earlier run in `output_dir` (`commands.overwrite`).
      run_options: Beam's options, `verbose`, `progress_seconds` (`pipeline.beam_job.RunOptions`).
    """

    input: str
    output_dir: str
    config: EmbedConfig
    num_shards: int = 8
    overwrite: bool = False
    run_options: RunOptions = RunOptions()

    def check(self) -> None:
        """Beam's options and the choices, before anything runs (each field's type and range are checked when
        the job is made); raises `UserError`."""
        self.run_options.check()
        if self.config.pool not in ("none", "mean"):
            raise UserError(f"--pool {self.config.pool}: use one of none, mean")
        if self.config.bad_lines not in BAD_LINES:
            raise UserError(f"--bad_lines {self.config.bad_lines}: use one of {', '.join(BAD_LINES)}")

    def metadata(self, described: dict, files: list[str]) -> dict:
        """metadata.json's fields known before the job runs, under fixed keys: the module as `describe_module`
        found it, then the job."""
        config = self.config
        return {**described, "pool": config.pool, "weights": config.weights, "bad_lines": config.bad_lines,
                "strict_utf8": config.strict_utf8, "batch_size": config.batch_size, "num_shards": self.num_shards,
                "input": self.input, "input_files": len(files),
                "record_features": ["file", "line", "text", "words", "truncated"] +
                [f"features/{c}" for c in config.choices]}


@dataclasses.dataclass(frozen=True)
class EmbedResult:
    """What a finished embedding job wrote: `output_dir`, its `metadata` (metadata.json's path), the shard
    `files`, the `examples` written, the `counters` (lines, dropped, truncated, ...) and the drops by reason."""

    output_dir: str
    metadata: str
    files: tuple[str, ...]
    examples: int
    counters: dict
    dropped: dict
