"""Training curves: a run's `history.jsonl` drawn as one PNG beside its TensorBoard logs.

    python -m models.training.curves --model_dir runs/bert [--output runs/bert/training_curves.png]

`history.jsonl` (written by `models.training.trainer`) holds one JSON object per logged step and split (`train`,
`eval`). Each metric a model family reports (loss, MLM/NSP accuracy, perplexities, learning rate,
tokens/s) gets its own panel, one line per split. Reading and grouping (`read_history`, `series`) are pure;
only `plot` touches matplotlib (the Agg backend: no display needed).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import math
import os
import sys

from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status

HISTORY = "history.jsonl"
CURVES = "training_curves.png"
# Panels in this order when present; anything else a family logs follows, alphabetically.
PREFERRED = ("loss", "mlm_loss", "mlm_accuracy", "nsp_accuracy", "perplexity", "forward_perplexity",
             "backward_perplexity", "accuracy", "learning_rate", "tokens_per_second")
SKIPPED = ("step", "split", "examples_per_second", "flops_per_second", "cpu_seconds")


def read_history(path: str) -> list[dict]:
    """The records of a `history.jsonl`; a torn last line (an interrupted run) is ignored."""
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def series(records: list[dict]) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """metric -> split -> (steps, values), metrics in panel order; non-finite values are dropped."""
    found: dict[str, dict[str, tuple[list[int], list[float]]]] = {}
    for record in records:
        for key, value in record.items():
            if key in SKIPPED or not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            steps, values = found.setdefault(key, {}).setdefault(record.get("split", "train"), ([], []))
            steps.append(int(record["step"]))
            values.append(float(value))
    order = [k for k in PREFERRED if k in found] + sorted(k for k in found if k not in PREFERRED)
    return {k: found[k] for k in order}


def plot(curves: dict, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, len(curves))
    rows = math.ceil(len(curves) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.0 * rows), squeeze=False)
    for ax, (metric, by_split) in zip(axes.flat, curves.items()):
        for split, (steps, values) in sorted(by_split.items()):
            ax.plot(steps, values, marker="o" if len(steps) < 12 else None, markersize=3, label=split)
        if metric.endswith("perplexity") and min(min(v) for _, v in by_split.values()) > 0:
            ax.set_yscale("log")
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        if len(by_split) > 1:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(curves):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_curves(model_dir: str, output: str | None = None) -> str:
    """Draws `model_dir`'s history; returns the PNG's path. Raises FileNotFoundError/ValueError on no history."""
    history = os.path.join(model_dir, HISTORY)
    curves = series(read_history(history))
    if not curves:
        raise ValueError(f"{history} has no logged metrics yet")
    output = output or os.path.join(model_dir, CURVES)
    name = os.path.basename(os.path.normpath(model_dir))
    last = max(step for by_split in curves.values() for steps, _ in by_split.values() for step in steps)
    plot(curves, output, f"{name}: training curves to step {last}")
    return output


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.training.curves", description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--output", help=f"PNG path (default: MODEL_DIR/{CURVES})")
    args = parser.parse_args(argv)
    try:
        path = write_curves(args.model_dir, args.output)
    except (OSError, ValueError) as e:  # no history yet, an unreadable one, an unwritable output: one line
        return exit_status(e if isinstance(e, UserError) else UserError(str(e)))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
