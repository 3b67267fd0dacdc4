"""The fine-tuning benchmark's table (`benchmarks.downstream.finetune_gain`): one `Row` per task x model x arm,
its summary over seeds, the printed table, the gains over a reference arm, and the latest full table as data
(`benchmarks/results/finetune_gain_table.json`). Pure but for `write`.

The JSON object:

    {"commit": "d613662", "machine": "Intel Xeon (avx2 avx512f), 2 cores", "command": "python -m ...",
     "rows": [{"task": "sst2", "model": "bert", "arm": "pretrained", "task_model": "cls_head",
               "metric": "accuracy", "mean": 0.78, "stderr": 0.004, "seeds": [1, 2, 3], "scores": [...],
               "chosen": {"learning_rate": 0.001, "epochs": [3, 4, 3]}, "cpu_minutes": 4.2}, ...]}
"""

import dataclasses
import json
import math
import os

from benchmarks.lib.stats import mean_se

TASKS = ("sst2", "ud_pos", "uner")
MODELS = ("bert", "gpt", "bilm", "minilm", "-")


@dataclasses.dataclass(frozen=True)
class Row:
    """One arm's scores on one task.

    Args:
      task: `sst2`, `ud_pos` or `uner`; model: `bert`, `gpt`, `bilm`, `minilm`, or `-` for a baseline.
      arm: `pretrained`, `random`, `keras_hub_peer`, `majority`, `bow_logreg`, `most_frequent_tag`,
        `random_embeddings`, ...; task_model: what was trained on top (`cls_head`, `elmo_bilstm`, ...).
      metric: the dev metric (`accuracy`, `f1`); scores: dev scores, one per seed (one for a baseline without
        seeds); seeds: the seeds (empty for a deterministic baseline).
      chosen: the settings chosen on the validation split (`learning_rate`, `epochs` per seed, `C`, ...).
      cpu_minutes: fine-tuning CPU of every run of the arm, selection included (0 for the trivial baselines).
    """

    task: str
    model: str
    arm: str
    task_model: str
    metric: str
    scores: tuple
    seeds: tuple = ()
    chosen: dict = dataclasses.field(default_factory=dict)
    cpu_minutes: float = 0.0

    def __post_init__(self):
        if self.task not in TASKS or self.model not in MODELS:
            raise ValueError(f"row {self.task}/{self.model}: task must be one of {TASKS}, model one of {MODELS}")
        if not self.scores or (self.seeds and len(self.seeds) != len(self.scores)):
            raise ValueError(f"row {self.task}/{self.model}/{self.arm}: one score per seed, got "
                             f"{len(self.scores)} scores for seeds {list(self.seeds)}")

    @property
    def mean(self) -> float:
        return mean_se(list(self.scores))[0]

    @property
    def stderr(self) -> float | None:
        """The standard error over seeds; None for a single score."""
        return mean_se(list(self.scores))[1] if len(self.scores) > 1 else None

    def as_json(self) -> dict:
        return {"task": self.task, "model": self.model, "arm": self.arm, "task_model": self.task_model,
                "metric": self.metric, "mean": round(self.mean, 6),
                "stderr": None if self.stderr is None else round(self.stderr, 6), "seeds": list(self.seeds),
                "scores": [round(s, 6) for s in self.scores], "chosen": self.chosen,
                "cpu_minutes": round(self.cpu_minutes, 2)}


def gain(row: Row, reference: Row) -> tuple[float, float | None]:
    """`row` - `reference` and its standard error (the two errors combined; None when either has one score)."""
    if row.stderr is None or reference.stderr is None:
        return row.mean - reference.mean, None
    return row.mean - reference.mean, math.sqrt(row.stderr ** 2 + reference.stderr ** 2)


def reference_arm(row: Row) -> tuple[str, str] | None:
    """The (model, arm) a row's gain is measured against: a pretrained or peer model against its own shape
    from random weights; the biLM with ELMo against the same task network without it (Peters et al.)."""
    if row.model == "bilm" and row.arm in ("pretrained", "random"):
        return ("-", "random_embeddings")
    if row.arm in ("pretrained", "keras_hub_peer") and row.model in ("bert", "gpt"):
        return (row.model, "random")
    if row.arm.startswith("pretrained_"):  # a lever (`--variants`): against random weights under the same lever
        return (row.model, "random_" + row.arm[len("pretrained_"):])
    return None


def _cell(mean: float, se: float | None, sign: str = "") -> str:
    return f"{mean:{sign}.4f} ± {se:.4f}" if se is not None else f"{mean:{sign}.4f}"


def format_table(rows: list[Row]) -> str:
    """The printed table: per task, each row's score ± standard error, its gain over its reference arm,
    the chosen settings and the CPU-minutes."""
    lines = []
    for task in dict.fromkeys(r.task for r in rows):
        these = [r for r in rows if r.task == task]
        by_arm = {(r.model, r.arm): r for r in these}
        lines.append(f"\n{task} (dev {these[0].metric}; mean ± standard error over seeds)")
        lines.append(f"{'model':<7}{'arm':<19}{'task model':<17}{'score':>18}{'gain':>34}  {'chosen':<34}{'CPU-min':>8}")
        for r in these:
            ref = by_arm.get(reference_arm(r) or ("", ""))
            g = _cell(*gain(r, ref), sign="+") + f" vs {ref.arm}" if ref else ""
            chosen = " ".join(f"{k}={_short(v)}" for k, v in r.chosen.items())
            lines.append(f"{r.model:<7}{r.arm:<19}{r.task_model:<17}{_cell(r.mean, r.stderr):>18}{g:>34}  "
                         f"{chosen:<34}{r.cpu_minutes:>8.1f}")
    return "\n".join(lines)


def _short(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_short(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def table_json(rows: list[Row], commit: str, machine: str, command: str) -> dict:
    return {"commit": commit, "machine": machine, "command": command, "rows": [r.as_json() for r in rows]}


def write(path: str, rows: list[Row], commit: str, machine: str, command: str) -> None:
    """Writes the table as `table_json` to `path` (whole or not at all: a temporary file, then renamed)."""
    with open(path + ".tmp", "w") as f:
        json.dump(table_json(rows, commit, machine, command), f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
