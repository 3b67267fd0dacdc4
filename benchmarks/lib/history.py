"""The benchmarks' speed history: each run's figures appended to `benchmarks/results/<benchmark>.jsonl` (a
file committed with the code), and one line per figure saying how it compares with the last one recorded on
the same CPU model.

One JSON object per line and figure:

    {"benchmark": "pretraining_data", "metric": "instances_per_cpu_s", "value": 20310.0,
     "higher_is_better": true, "workload": "pretrain.txt.gz dupe 5 seq 128, default runner",
     "total_cpu_s": 25.6, "fixed_cpu_s": 8.1, "commit": "e3b11e2", "dirty": false,
     "cpu_model": "AMD EPYC", "cpu_isa": "avx2", "cpus": 2, "time": "2026-12-01T22:30:00Z"}

A figure compares with the last line of the same benchmark, metric and workload on the same `cpu_model` *and*
`cpu_isa`: the instruction sets that change these figures (`ISA_FLAGS`: AVX2, AVX-512, its bfloat16, AMX),
since one model name covers machines with and without AVX-512. Figures from other machines, and lines written
before `cpu_isa` was recorded, are kept and never compared. The verdict says `WORSE` when the figure is more than
`WORSE_BY` (20%) worse *and* the workload was large enough to tell: its marginal work (`total_cpu_s -
fixed_cpu_s`) at least `LARGE_ENOUGH` (3) times the fixed cost, since a fixed cost of seconds (imports,
worker start-up) shifts a small run's figure by more than any real change. Without those two numbers, or
below that size, a worse figure is reported as too small to tell. A figure that is itself a fixed cost (the
CPU-seconds of a small job) passes `fixed_cpu_s=0`: nothing hides it. Machines shared with other jobs inflate
CPU-seconds too: compare runs made in turns, not a figure from a quiet day with one from a busy one.

`compare` and `verdict` are pure; `record` does the I/O (git, /proc/cpuinfo, the results file).
"""

import dataclasses
import datetime
import json
import os
import subprocess

from models.training.hardware import ISA_FLAGS, cpu_isa, cpu_model, machine  # noqa: F401  (the machine key)

RESULTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")
WORSE_BY = 0.20
LARGE_ENOUGH = 3.0


@dataclasses.dataclass(frozen=True)
class Figure:
    """One measured figure of a benchmark run.

    Args:
      metric: what is measured, with its unit (`instances_per_cpu_s`, `fixed_cpu_s`).
      value: the figure.
      higher_is_better: False for costs (seconds, bytes).
      workload: what was run (corpus, sizes, runner); only figures of the same workload are compared.
      total_cpu_s: CPU-seconds of the measured run, and `fixed_cpu_s` the part that does not grow with the
        workload (None: unknown, so no regression can be called).

    Example:
      >>> Figure("instances_per_cpu_s", 20310.0, workload="pretrain.txt.gz dupe 5", total_cpu_s=25.6,
      ...        fixed_cpu_s=8.1)
    """

    metric: str
    value: float
    higher_is_better: bool = True
    workload: str = ""
    total_cpu_s: float | None = None
    fixed_cpu_s: float | None = None


def large_enough(total_cpu_s: float | None, fixed_cpu_s: float | None) -> bool | None:
    """Whether the marginal work is at least `LARGE_ENOUGH` times the fixed cost (None: unknown)."""
    if total_cpu_s is None or fixed_cpu_s is None:
        return None
    return total_cpu_s - fixed_cpu_s >= LARGE_ENOUGH * fixed_cpu_s


def entry(benchmark: str, figure: Figure, commit: str, dirty: bool, cpu_model: str, cpus: int, when: str,
          cpu_isa: str = "") -> dict:
    """The results file's line for a figure."""
    return {"benchmark": benchmark, **dataclasses.asdict(figure), "commit": commit, "dirty": dirty,
            "cpu_model": cpu_model, "cpu_isa": cpu_isa, "cpus": cpus, "time": when}


def compare(history: list[dict], new: dict) -> dict | None:
    """The last entry of `history` with the same benchmark, metric, workload, CPU model and instruction sets
    as `new` (an entry without `cpu_isa` matches nothing)."""
    key = ("benchmark", "metric", "workload", "cpu_model", "cpu_isa")
    same = [e for e in history if all(e.get(k) == new.get(k) for k in key)]
    return same[-1] if same else None


def change(previous: dict, new: dict) -> float:
    """How much worse `new` is than `previous` (0.25: 25% worse; negative: better)."""
    if new["higher_is_better"]:
        return 1.0 - new["value"] / previous["value"] if previous["value"] else 0.0
    return new["value"] / previous["value"] - 1.0 if previous["value"] else 0.0


def verdict(previous: dict | None, new: dict) -> str:
    """One line: the figure, and against the last recorded one on the same CPU model."""
    head = f"{new['benchmark']} {new['metric']} {_number(new['value'])}"
    if previous is None:
        return f"{head}: first figure for this workload on {new['cpu_model']} ({new.get('cpu_isa') or 'ISA unknown'})"
    worse = change(previous, new)
    against = (f"{_number(previous['value'])} at {previous['commit']}{' (dirty)' if previous.get('dirty') else ''}"
               f" ({previous['time'][:10]})")
    ratio = new["value"] / previous["value"] if previous["value"] else float("nan")
    line = f"{head} against {against} on {new['cpu_model']} ({new.get('cpu_isa') or 'ISA unknown'}): {ratio:.2f}x"
    if worse <= WORSE_BY:
        return line + (" (better)" if worse < 0 else " (within 20%)")
    size = large_enough(new.get("total_cpu_s"), new.get("fixed_cpu_s"))
    if size:
        return f"{line}: WORSE by {worse:.0%} (more than {WORSE_BY:.0%}, on a workload large enough to tell)"
    why = ("fixed cost unknown" if size is None else
           f"marginal {new['total_cpu_s'] - new['fixed_cpu_s']:.1f} CPU-s < {LARGE_ENOUGH:g} x fixed "
           f"{new['fixed_cpu_s']:.1f}")
    return f"{line}: {worse:.0%} worse, but the workload is too small to tell ({why})"


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def read(path: str) -> list[dict]:
    """The entries of a results file (none if it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def git_commit(root: str | None = None) -> tuple[str, bool]:
    """(short commit of the checkout at `root` (default: this one), whether tracked files differ from it);
    ("unknown", False) outside git."""
    root = root or os.path.dirname(RESULTS_DIR.rstrip(os.sep))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False
    return commit, bool(status.strip())


def record(benchmark: str, figures: list[Figure], results_dir: str = RESULTS_DIR,
           measured_at: tuple[str, bool] | None = None) -> list[str]:
    """Appends the figures to `results_dir/<benchmark>.jsonl`, prints and returns one verdict line each.
    `measured_at`: the (commit, dirty) the run started on (`git_commit()` then), for a run long enough that the
    checkout may move before it ends; default: the checkout's now."""
    path = os.path.join(results_dir, f"{benchmark}.jsonl")
    history = read(path)
    commit, dirty = measured_at or git_commit()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    new = [entry(benchmark, f, commit, dirty, cpu_model(), os.cpu_count() or 0, when, cpu_isa()) for f in figures]
    lines = [verdict(compare(history, e), e) for e in new]
    os.makedirs(results_dir, exist_ok=True)
    with open(path, "a") as f:
        for e in new:
            f.write(json.dumps(e) + "\n")
    print(f"\nspeed history ({os.path.relpath(path)}):")
    for line in lines:
        print(f"  {line}")
    return lines
