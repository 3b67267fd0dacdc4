"""Where `models.convert --to` writes: its output folder under the one `--overwrite` contract
(`commands.overwrite`, one kind per format), and the write itself through a hidden staging folder.

Before any weight is read (`plan`):
  - an `--output` that holds another kind of output is refused with or without `--overwrite`, naming what it
    holds: a model_dir (`--model_dir` itself too), an export, a keras-hub preset, another format's checkpoint;
  - an earlier output of the same format needs `--overwrite`, which removes only that format's files;
  - a file with one of the format's names that no earlier output of it wrote (a `vocab.txt` of the user's) is
    refused, never replaced.
The writer then writes into `<output>/.convert-staging-<hex>/` (`write`); once it has finished, the earlier
output is removed and the new files move into place, the format's config file (the record) last. A failed
write leaves the earlier output and nothing new (a staging folder left by a killed run goes with the next run).

Example:
    where = plan("hf_bert", "out/hf", overwrite=False)   # refusals first
    ...                                                    # load the model
    files = write(where, lambda folder: bert.write(model, config, "hf_bert", folder, vocab, lower))
"""

import dataclasses
import os
import shutil
import uuid
from typing import Callable

from commands import overwrite
from models.convert.common import ConversionError


@dataclasses.dataclass(frozen=True)
class OutputPlan:
    """An `--output` that passed the checks: the format's `kind` and what `--overwrite` removes (`earlier`)."""

    output: str
    kind: overwrite.OutputKind
    earlier: overwrite.Plan


def plan(fmt: str, output: str, overwrite_flag: bool) -> OutputPlan:
    """Checks `output` for `--to fmt` (see the module docstring); raises `UserError`."""
    kind = overwrite.CONVERTED[fmt]
    earlier = overwrite.plan(output, kind, overwrite_flag, flag="--output")
    taken = sorted(set(kind.names) & overwrite.existing(output) - set(earlier.names))
    if taken:
        raise ConversionError(f"--output {output} has {', '.join(taken)}, which no earlier --to {fmt} output wrote: "
                              f"--to {fmt} never replaces a file it did not write; give another --output, or move "
                              f"{', '.join(taken)} away")
    return OutputPlan(output, kind, earlier)


def write(where: OutputPlan, writer: Callable[[str], list[str]]) -> list[str]:
    """Runs `writer(folder)` (which writes the format's files into `folder` and returns their paths) in a
    staging folder inside the output, then puts the files in place; returns their final paths."""
    output, kind = where.output, where.kind
    created = not os.path.exists(output)
    staging = os.path.join(output, f".convert-staging-{uuid.uuid4().hex[:12]}")
    os.makedirs(staging)
    try:
        written = writer(staging)
        names = sorted(os.listdir(staging), key=lambda n: (n == kind.record, n))  # the record last
        if set(names) != set(kind.names):  # the writer and `commands.overwrite.CONVERTED` disagree: a bug here
            raise AssertionError(f"{kind.command} wrote {names}; commands.overwrite lists {sorted(kind.names)}")
        where.earlier.remove()
        for name in names:
            os.replace(os.path.join(staging, name), os.path.join(output, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not os.listdir(output):
            os.rmdir(output)
    return [os.path.join(output, os.path.relpath(path, staging)) for path in written]
