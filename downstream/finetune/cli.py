"""Fine-tune an exported BERT, GPT or biLM module on a labelled task, through `hub.KerasLayer`.

    python -m downstream.finetune --task {classify,pair,tag,squad,choice} (--module PATH | --model_dir RUN) \\
        --train FILE --eval FILE [--validation FILE] --output_dir DIR [--overwrite] [--set key=value ...]

`--module`: an export dir (`serving.export`'s `--export_dir`) or a hub module dir; `--model_dir`: a
pretraining run, exported to a temporary folder first (the same code path). File formats:
`downstream/finetune/task_data.py`; tasks: `downstream/finetune/tasks.py`; what `output_dir` receives:
`downstream/finetune/outputs.py` (`model/`, `serving/1/`, `metrics.json`, also printed as the last line,
`finetune_config.json`, `labels.json`, for SQuAD `predictions.json`). An `output_dir` that already holds those
is refused unless `--overwrite`, which removes them (nothing else), and only once the run has passed every
check and trained its model; a folder holding another kind of output (an export, a model_dir, a data job's
run), the `--module` folder or one inside it is refused, naming it (`commands.overwrite`). Lines are read to
their first MiB; a text is split into words only as far as the window reads (`downstream.words.split_words`).
Eval labels (classify, pair) must be training labels: an unseen one is refused, naming it and its lines.

This module parses the flags into a `FinetuneJob` and calls `finetune` (`downstream/finetune/run.py`), the
Python API.
"""

import argparse
import sys

from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status
from downstream.finetune import tasks
from downstream.finetune.config import FinetuneConfig, apply_overrides
from downstream.finetune.job import FinetuneJob
from downstream.finetune.run import finetune


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m downstream.finetune", description=__doc__.split("\n")[0])
    parser.add_argument("--task", required=True, choices=tasks.NAMES)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--module", help="an export dir or a hub module dir")
    source.add_argument("--model_dir", help="a pretraining run (exported to a temporary folder first)")
    parser.add_argument("--train", required=True)
    parser.add_argument("--eval", required=True)
    parser.add_argument("--validation", help="a validation file that picks epochs and rates (else "
                        "--set validation_fraction=0.1 carves one from --train)")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier fine-tuning in --output_dir")
    return parser.parse_args(argv)


def job_from_args(args) -> FinetuneJob:
    """The parsed flags as the job; `--set` overrides `FinetuneConfig`'s defaults."""
    return FinetuneJob(task=args.task, train=args.train, eval=args.eval, output_dir=args.output_dir,
                       module=args.module, model_dir=args.model_dir, validation=args.validation,
                       config=apply_overrides(FinetuneConfig(), args.overrides), overwrite=args.overwrite)


@quiet_command
def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        result = finetune(job_from_args(args), log=lambda m: print(m, file=sys.stderr))
    except ValueError as e:  # a user error (UserError; a --model_dir that does not export: ExportError, with the
        # export's own exit status), a `--set` that does not parse, a value a library refuses
        return exit_status(e if isinstance(e, UserError) else UserError(str(e)))
    print(result.summary())
    return 0
