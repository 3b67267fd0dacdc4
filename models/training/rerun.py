"""A rerun on a model_dir that already holds trained steps: what it may change, and what config.json says.

Resuming continues the trajectory the checkpoints are on. A rerun whose training config contradicts it
would leave a folder that describes a run that never happened (config.json saying learning rate 0.01 for
checkpoints trained at 0.001), so `check_rerun` refuses, before anything is written:
  - `train_steps` below the steps already trained (nothing can un-train them: use another model_dir, or
    `--init_checkpoint` from this one);
  - any other field that shapes the trajectory (`learning_rate`, `batch_size`, `seed`, the optimizer, the
    schedule, ...) changed from config.json, unless the rerun names it in `--allow_change FIELD[,FIELD]`:
    then it is meant, and config.json's `run.changes` records from which step which value changed.
Fields that only say how often to log, evaluate, checkpoint or compile (`BOOKKEEPING`) and a larger
`train_steps` (a run extended) may change freely. Other training data (`--train_data`, as field
`train_data`) is such a change too: refused unless allowed, then recorded, and the resumed run reads the new
data from its start (`data_start_step`), not from the position reached in the old one. A name given to
`--allow_change` that is no field is refused on any model_dir, new or not.
"""

import dataclasses
import os

from commands.user_errors import UserError

# TrainConfig fields that do not change what the weights become.
BOOKKEEPING = frozenset({"train_steps", "log_every", "checkpoint_every", "keep_checkpoints", "eval_every",
                         "eval_steps", "steps_per_execution", "jit_compile"})
ALLOW_FLAG = "--allow_change"
DATA_FIELD = "train_data"  # the training data's pattern, config.json's data.train_data


class RerunContradictionError(UserError):
    """The rerun's training config contradicts the steps already trained in model_dir."""


def trained_steps(latest_checkpoint: str | None) -> int:
    """The step of `latest_checkpoint` (`.../ckpt-N`: checkpoints are numbered by their step); 0 without one."""
    if not latest_checkpoint:
        return 0
    try:
        return int(latest_checkpoint.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0


def check_rerun(model_dir: str, done: int, saved_train, train_config, allowed: set[str],
                previous_changes: list | None = None, saved_data: dict | None = None,
                data: dict | None = None) -> list:
    """Raises `RerunContradictionError` for a contradicting rerun, and `UserError` for an `--allow_change` name
    that is no field (on any model_dir: a typo must not pass silently); returns config.json's `run.changes`:
    the earlier ones, plus this rerun's allowed changes (`{"from_step": N, "field": [old, new]}`). The
    training data (`saved_data` / `data`, config.json's `data` section) counts as field `train_data`."""
    changes = list(previous_changes or [])
    names = {f.name for f in dataclasses.fields(train_config)}
    unknown = sorted(allowed - names - {DATA_FIELD})
    if unknown:
        raise UserError(f"{ALLOW_FLAG} {', '.join(unknown)}: no such training field; fields: "
                        f"{', '.join(sorted(names | {DATA_FIELD}))}")
    if done == 0 or saved_train is None:
        return changes
    if train_config.train_steps < done:
        raise RerunContradictionError(
            f"{model_dir} has already trained {done} steps; train_steps={train_config.train_steps} would describe "
            f"a shorter run than its checkpoints hold: give train_steps >= {done}, or start a new --model_dir "
            f"(--init_checkpoint {model_dir} takes its weights)")
    differ = {f: (getattr(saved_train, f), getattr(train_config, f)) for f in sorted(names - BOOKKEEPING)
              if getattr(saved_train, f) != getattr(train_config, f)}
    old_data, new_data = (saved_data or {}).get(DATA_FIELD), (data or {}).get(DATA_FIELD)
    if old_data and new_data and not same_data(old_data, new_data):
        differ[DATA_FIELD] = (old_data, new_data)
    refused = {f: v for f, v in differ.items() if f not in allowed}
    if refused:
        shown = ", ".join(f"{f}={old!r} -> {new!r}" for f, (old, new) in refused.items())
        raise RerunContradictionError(
            f"{model_dir} was trained {done} steps with other training settings than this run's ({shown}): "
            f"to continue it with the new values pass {ALLOW_FLAG} {','.join(refused)} (config.json records "
            f"from which step they apply), or use the saved values, or another --model_dir")
    if differ:
        changes.append({"from_step": done, **{f: [_plain(o), _plain(n)] for f, (o, n) in differ.items()}})
    return changes


def same_data(old: str, new: str) -> bool:
    """The same `--train_data` pattern: equal as given, or (local) as absolute paths."""
    return old == new or ("://" not in old and "://" not in new and os.path.abspath(old) == os.path.abspath(new))


def data_start_step(changes: list | None) -> int:
    """The step from which the model_dir trains on its current `train_data` (the last change of it, else 0):
    a resumed run skips the batches of that data already consumed, not those of the data before it."""
    return max((c["from_step"] for c in changes or () if DATA_FIELD in c), default=0)


def _plain(value):
    return list(value) if isinstance(value, tuple) else value
