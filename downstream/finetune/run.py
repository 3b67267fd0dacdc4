"""`finetune(job)`: the Python API of `python -m downstream.finetune`, and the story of one run. It checks
the job (the task files, the output folder, the module's folder) under the output folder's lock
(`commands.output_lock`: one run per folder) before anything loads, exports a `model_dir` to a temporary
folder, reads and encodes the task's data, trains the task's head over the module (`selection.py`: with a
validation split, the epoch and rate it scores best), scores it on the eval file against the trivial baseline
and writes the output folder (`outputs.py`).
Everything that differs by task is the task object's (`tasks.py`), looked up here once.

Example:
    from downstream.finetune import FinetuneConfig, FinetuneJob, finetune

    result = finetune(FinetuneJob(task="classify", module="export/bert", train="train.tsv", eval="dev.tsv",
                                  output_dir="out", config=FinetuneConfig(epochs=1)))
    result.metrics["accuracy"], result.serving  # the eval accuracy, out/serving/1
"""

import dataclasses
import os
import tempfile
import time

import numpy as np

from commands import overwrite
from commands.output_lock import OutputLock
from commands.user_errors import UserError, writable_dir
from downstream import module as module_lib
from downstream.finetune import evaluation
from downstream.finetune import outputs
from downstream.finetune import selection
from downstream.finetune import task_data
from downstream.finetune import tasks
from downstream.finetune.job import FinetuneJob


def finetune(job: FinetuneJob, log=print) -> outputs.FinetuneResult:
    """Runs `job`: fine-tunes, evaluates and writes `job.output_dir`; `log` takes the progress lines.

    Raises `UserError` (one line, naming the file, flag or setting) for bad task data, a bad output folder or
    module, or a task the module's family cannot take, before anything is written; and
    `serving.export.ExportError` (a `UserError` with the export's exit status) when `job.model_dir` does not
    export."""
    writable_dir("--output_dir", job.output_dir)
    with OutputLock(job.output_dir):  # one run per folder: a second one is refused naming the first
        earlier = check_job(job)
        task = tasks.get(job.task)
        with tempfile.TemporaryDirectory(prefix="finetune-export-") as scratch:
            module_path = job.module or _export(job.model_dir, scratch)
            return outputs.write(job.output_dir, _fine_tune(job, task, module_path, log), earlier)


def check_job(job: FinetuneJob) -> overwrite.Plan:
    """The checks that need the file system, in the order the command has always made them; returns what
    `--overwrite` will remove (`outputs.check_output_dir`)."""
    task_data.check_file("--train", job.train)
    task_data.check_file("--eval", job.eval)
    if job.validation:
        task_data.check_file("--validation", job.validation)
    earlier = outputs.check_output_dir(job.output_dir, job.overwrite, job.source)
    if job.model_dir and not os.path.isdir(job.model_dir):
        raise UserError(f"--model_dir {job.model_dir}: no such folder")
    if job.module and not os.path.isdir(job.module):
        raise UserError(f"--module {job.module}: no such folder (give an export dir or a hub module dir)")
    return earlier


def _export(model_dir: str, scratch: str) -> str:
    from serving.export import ExportJob, export

    export(ExportJob(model_dir=model_dir, export_dir=scratch), log=lambda *_: None)
    return scratch


def _fine_tune(job: FinetuneJob, task: tasks.FinetuneTask, module_path: str, log) -> outputs.Finetuned:
    """Reads, encodes, selects (`selection.py`: epochs and rate on the validation split, when there is one)
    and scores on the eval file; the data's errors come first, then the module's. The eval file is read and
    checked first but encoded and scored only after the selection."""
    import tensorflow as tf

    config = job.config
    tf.keras.utils.set_random_seed(config.seed)
    train_examples, validation_examples = read_training(task, job, log)
    eval_examples = read_examples(task, job.eval, config, log=log)
    labels = task.labels(train_examples)
    task.check_eval(eval_examples, labels, job.eval)
    if validation_examples is not None:
        task.check_eval(validation_examples, labels, job.validation or job.train)
    backbone = module_lib.ExportedModule.load(module_path)
    tasks.check_module(task, backbone)
    config = config.resolved(backbone.kind)
    started = time.time()
    data = selection.Data(train_examples, task.encode(backbone, train_examples, labels, config, training=True),
                          validation_examples, None if validation_examples is None else
                          task.encode(backbone, validation_examples, labels, config, training=False), labels)
    log(f"{backbone.kind} {task.name}: {len(train_examples)} training examples"
        + ("" if validation_examples is None else f", {len(validation_examples)} validation examples")
        + f", encoded in {time.time() - started:.1f}s")
    chosen = selection.select(task, backbone, config, data, log)
    config = dataclasses.replace(config, learning_rate=chosen.learning_rate)
    eval_encoded = task.encode(backbone, eval_examples, labels, config, training=False)
    metrics, predictions = evaluation.evaluate(task, chosen.model, eval_encoded, eval_examples, train_examples,
                                               labels, config)
    metrics.update(task=task.name, module=backbone.kind, module_path=os.path.abspath(backbone.path),
                   train_examples=len(train_examples), eval_examples=len(eval_examples),
                   train_rows=data.train_encoded.rows, steps=chosen.run.steps, epochs=config.epochs,
                   train_seconds=round(sum(r.seconds for r in chosen.runs), 1), losses=chosen.run.losses,
                   train_module=config.train_module)
    if validation_examples is not None:
        metrics["selection"] = chosen.record(len(validation_examples))
    return outputs.Finetuned(task, backbone, chosen.model, labels, config, metrics, predictions,
                             task.fallback_tag(train_examples))


def read_training(task: tasks.FinetuneTask, job: FinetuneJob, log=print) -> tuple[list, list | None]:
    """The training examples (at most `max_train_examples`, drawn after the validation split is set aside)
    and the validation split: the job's validation file, or `validation_fraction` of the training file
    (`selection.carve`), or None."""
    config = job.config
    examples = read_examples(task, job.train, config, log=log)
    validation = None
    if job.validation:
        validation = read_examples(task, job.validation, config, log=log)
    elif config.validation_fraction:
        examples, validation = selection.carve(examples, config.validation_fraction)
        if not validation or not examples:
            raise UserError(f"--train {job.train}: validation_fraction={config.validation_fraction} leaves "
                            f"{len(examples)} training and {len(validation)} validation examples; both need some")
    return subsample(examples, config), validation


def read_examples(task: tasks.FinetuneTask, path: str, config, log=print) -> list:
    """The task file's examples; a warning for lines read as their first MiB."""
    cut = []
    examples = task.read(path, config, cut)
    if cut:
        shown = ", ".join(map(str, cut[:3])) + (", ..." if len(cut) > 3 else "")
        log(f"warning: {path}: {len(cut)} line(s) over the {task_data.MAX_LINE_BYTES >> 20} MiB line limit "
            f"were read as their first MiB only (line {shown})")
    return examples


def subsample(examples: list, config) -> list:
    """At most `config.max_train_examples` of `examples` (a seeded choice, in file order)."""
    if config.max_train_examples and len(examples) > config.max_train_examples:
        order = np.random.default_rng(config.seed).permutation(len(examples))[:config.max_train_examples]
        examples = [examples[i] for i in sorted(order)]
    return examples
