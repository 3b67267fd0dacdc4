"""What pretraining buys a fine-tuned task, measured as a reviewer would accept it: every arm beside the
simple baselines, each arm's rate and epochs chosen on a validation split carved from train, dev scored at
the chosen settings with 3 seeds.

    .venv/bin/python -m benchmarks.downstream.finetune_gain --demo_dir DEMO_DIR [--tasks sst2,ud_pos] \\
        [--models bert,gpt,bilm,minilm] [--arms pretrained,random,keras_hub_peer,baselines] [--seeds 1,2,3] \\
        [--rates 1e-4,3e-4,1e-3,3e-3] [--quick] [--data ../shared/data/tasks] [--out_dir .cache/finetune_gain] \\
        [--no_history]

Tasks: SST-2 (`classify`, dev accuracy) and UD English-EWT POS (`tag`, dev word accuracy), full train sets.
The validation split is the same 10% of each train file for every arm (`downstream.finetune.selection.carve`,
a stable hash of the text); every run, selection and reported alike, trains on the other 90%; dev is never
read while choosing.

Rows (task x model x arm):
  - baselines (`-`): `majority` (label or tag); SST-2 `bow_logreg` (scikit-learn, unigrams + bigrams, C on
    validation); POS `most_frequent_tag`; `random_embeddings`: the biLM's task network (`no_bilm_bilstm`: a
    BiLSTM over its own word vectors, trained from random) without the biLM, its seeds and grid as the others';
  - `pretrained`: the demo's models (`DEMO_DIR/export/<kind>`); `minilm`: all-MiniLM-L6-v2 as converted by
    the demo (`DEMO_DIR/export/minilm_converted`), a real pretrained model;
  - `random`: the same config, vocabulary and shape, weights as initialised with the fine-tuning seed;
  - `keras_hub_peer` (BERT): keras-hub's `BertBackbone` + `MaskedLMHead` pretrained by `fit` on the demo's
    records at the demo's recipe and steps (`benchmarks.lib.parity_runs keras_hub`), moved into our layout;
    it tells whether a gap is our trainer's or the budget's.
BERT and GPT fine-tune every weight with a head on `[CLS]` / the extract token (`cls_head`, `extract_head`;
POS: `tag_head` on each word's first piece); the biLM stays frozen under ELMo's task models (`elmo_bilstm`:
a BiLSTM over [own word vectors; the task's scalar mix of the biLM's layers], max-pooled for SST-2). GPT has
no tagging head, so POS has no GPT rows.

Per neural arm: with the first seed, `downstream.finetune` runs the rate grid (`learning_rates`) with best-
epoch early stopping on the validation split and picks the rate; the other seeds run at that rate, their
epochs chosen on validation too. The table prints dev score ± standard error over the seeds, the gain over
the arm's reference (a pretrained model against its random weights; the biLM against the same task network
without it, as Peters et al. report it), the chosen settings and the fine-tuning CPU-minutes (grid
included). The full run writes `benchmarks/results/finetune_gain_table.json` (`benchmarks.lib.gain_table`)
and appends the gains to `finetune_gain.jsonl`; finished runs are reused from `--out_dir`.

`--quick`: SST-2, one seed, a 2-point grid (3e-4, 1e-3), the baselines, the demo's three models' pretrained
arms and BERT's and GPT's random arms (about 15 minutes on 2 cores). The full set: see docs/learning.md, "What pretraining buys
a fine-tuned task", for its runtime on the machine it names.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import hashlib
import json
import os
import resource
import subprocess
import sys

from benchmarks.lib import classic_baselines
from benchmarks.lib import gain_table
from benchmarks.lib.model_dirs import random_model_dir
from benchmarks.lib.proc import ROOT, child_env, last_json
from commands.tf_startup import quiet_command
from demo import shared_data

VALIDATION = 0.1
RATES = (1e-4, 3e-4, 1e-3, 3e-3)
QUICK_RATES = (3e-4, 1e-3)


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    finetune_task: str
    train: str
    dev: str
    metric: str


TASKS = {"sst2": Task("sst2", "classify", "sst2/train.tsv", "sst2/dev.tsv", "accuracy"),
         "ud_pos": Task("ud_pos", "tag", "ud_pos/train.conll", "ud_pos/dev.conll", "accuracy")}

# (task, family) -> the settings that stay fixed; the grid picks the rate, validation the epochs.
RECIPES = {
    ("sst2", "bert"): ["max_seq_length=64", "batch_size=32", "epochs=6", "patience=2"],
    ("sst2", "gpt"): ["max_seq_length=64", "batch_size=32", "epochs=6", "patience=2"],
    ("sst2", "bilm"): ["max_seq_length=56", "batch_size=32", "epochs=8", "patience=2", "bilm_task_model=bilstm",
                       "classifier_units=64"],
    ("ud_pos", "bert"): ["max_seq_length=96", "batch_size=32", "epochs=6", "patience=2"],
    ("ud_pos", "bilm"): ["max_seq_length=64", "batch_size=32", "epochs=8", "patience=2"],
}
TASK_MODELS = {("sst2", "bert"): "cls_head", ("sst2", "gpt"): "extract_head", ("sst2", "bilm"): "elmo_bilstm",
               ("ud_pos", "bert"): "tag_head", ("ud_pos", "bilm"): "elmo_bilstm"}


@dataclasses.dataclass(frozen=True)
class Arm:
    """A neural arm: the row's model and arm, the module family it fine-tunes as, and extra settings."""
    model: str
    arm: str
    family: str
    extra: tuple = ()

    @property
    def start(self) -> str:
        """Where the weights come from: `pretrained`, `random`, `keras_hub_peer` or `random_embeddings`."""
        return self.arm.split("_")[0] if self.arm.startswith(("pretrained_", "random_")) and \
            self.arm != "random_embeddings" else self.arm

    def task_model(self, task: str) -> str:
        return "no_bilm_bilstm" if self.arm == "random_embeddings" else TASK_MODELS[(task, self.family)]


def parse_variants(text: str) -> dict[str, tuple]:
    """`cls_pooler:bert_pooling=cls;no_dropout:dropout=0` -> {name: settings}: fine-tuning levers, each
    run as extra BERT arms (`pretrained_<name>`, `random_<name>`)."""
    variants = {}
    for part in filter(None, text.split(";")):
        name, _, sets = part.partition(":")
        if not name or not sets:
            raise ValueError(f"--variants: expected NAME:KEY=VALUE[,KEY=VALUE], got {part!r}")
        variants[name] = tuple(sets.split(","))
    return variants


def arms(task: str, models: list[str], kinds: list[str], quick: bool = False,
         variants: dict | None = None) -> list[Arm]:
    """The neural arms of `task` for `models` and arm kinds (`pretrained`, `random`, `keras_hub_peer`,
    `baselines`), in the table's order; `quick` leaves out the biLM's random arm; `variants` (name ->
    settings) add BERT's pretrained and random arms under those settings."""
    out = []
    for model in models:
        family = "bert" if model == "minilm" else model
        if (task, family) not in RECIPES:
            continue
        for kind in ("pretrained", "random", "keras_hub_peer"):
            if kind in kinds and (kind == "pretrained" or model in ("bert", "gpt", "bilm")) and \
                    (kind != "keras_hub_peer" or model == "bert") and not (quick and (model, kind) == ("bilm", "random")):
                out.append(Arm(model, kind, family))
        if model == "bilm" and "baselines" in kinds:
            out.append(Arm("-", "random_embeddings", "bilm", ("elmo=false",)))
        if model == "bert":
            out += [Arm(model, f"{kind}_{name}", family, sets) for name, sets in (variants or {}).items()
                    for kind in ("pretrained", "random") if kind in kinds]
    return out


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_module(args: list[str]) -> tuple[str, float]:
    """`python -m ARGS` from the root: (stdout, CPU-seconds of the process and its children)."""
    before = _cpu_of_children()
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, env=child_env())
    if done.returncode:
        raise RuntimeError(f"python -m {' '.join(args[:4])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout, _cpu_of_children() - before


def module_dir(arm: Arm, seed: int, demo_dir: str, out_dir: str) -> str:
    """The export an arm fine-tunes (made and kept under `out_dir` for the random and peer arms)."""
    if arm.model == "minilm":
        return os.path.join(demo_dir, "export", "minilm_converted")
    if arm.start in ("pretrained", "random_embeddings"):
        return os.path.join(demo_dir, "export", arm.family)
    if arm.start == "random":
        model_dir = random_model_dir(os.path.join(demo_dir, "runs", arm.family),
                                     os.path.join(out_dir, "modules", f"{arm.family}_random_seed{seed}"), seed)
    else:
        model_dir = peer_model_dir(demo_dir, os.path.join(out_dir, "modules", "bert_keras_hub_peer"))
    return exported(model_dir)


def exported(model_dir: str) -> str:
    export_dir = model_dir + "_export"
    if not os.path.isdir(os.path.join(export_dir, "hub")):
        run_module(["serving.export", "--model_dir", model_dir, "--export_dir", export_dir, "--overwrite"])
    return export_dir


def peer_model_dir(demo_dir: str, model_dir: str, seed: int = 1) -> str:
    """keras-hub's BERT pretrained on the demo's records at the demo's recipe and steps, in our layout."""
    import tensorflow as tf

    if tf.train.latest_checkpoint(model_dir):
        return model_dir
    from demo import training_steps

    with open(os.path.join(demo_dir, "runs", "bert", "config.json")) as f:
        steps = json.load(f)["train_config"]["train_steps"]
    sets = {"batch_size": training_steps.BATCHES["bert"], "learning_rate": training_steps.LEARNING_RATES["bert"],
            "warmup_steps": max(steps // 10, 1), "decay": "linear", "seed": seed, **training_steps.MODEL_FLAGS["bert"]}
    data = os.path.join(demo_dir, "data")
    run_module(["benchmarks.lib.parity_runs", "keras_hub", "--kind", "bert",
                "--train_data", os.path.join(data, "bert", "*.tfrecord"),
                "--eval_data", os.path.join(data, "bert_heldout", "*.tfrecord"), "--steps", str(steps), "--points", "1",
                "--eval_batches", "1", "--head", "untied", "--model_dir", model_dir, "--output", model_dir + ".json",
                *[a for k, v in sets.items() for a in ("--set", f"{k}={v}")]])
    return model_dir


def finetune(task: Task, module: str, sets: list[str], seed: int, data: str, out: str) -> dict:
    """One `downstream.finetune` run; its metrics and CPU-seconds (reused from `out/result.json` when it
    ran with the same settings)."""
    settings = {"module": os.path.abspath(module), "sets": sets, "seed": seed, "validation": VALIDATION}
    result_path = os.path.join(out, "result.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            done = json.load(f)
        if done["settings"] == settings:
            return done
    stdout, cpu = run_module(["downstream.finetune", "--task", task.finetune_task, "--module", module,
                              "--train", os.path.join(data, task.train), "--eval", os.path.join(data, task.dev),
                              "--output_dir", os.path.join(out, "run"), "--overwrite",
                              *[a for s in [*sets, f"seed={seed}", f"validation_fraction={VALIDATION}"]
                                for a in ("--set", s)]])
    result = {"settings": settings, "metrics": last_json(stdout), "cpu_seconds": round(cpu, 1)}
    os.makedirs(out, exist_ok=True)
    with open(result_path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(result_path + ".tmp", result_path)
    return result


def neural_row(task: Task, arm: Arm, seeds: list[int], rates: tuple, args) -> gain_table.Row:
    """The grid on the first seed picks the rate; every seed's epochs are picked on validation."""
    sets = RECIPES[(task.name, arm.family)] + list(arm.extra)
    name = f"{task.name}_{arm.model.replace('-', 'none')}_{arm.arm}"
    runs, rate = [], None
    for seed in seeds:
        choice = [f"learning_rates={','.join(map(str, rates))}"] if rate is None else [f"learning_rate={rate}"]
        tag = hashlib.sha256(json.dumps(sets + choice).encode()).hexdigest()[:8]
        module = module_dir(arm, seed, args.demo_dir, args.out_dir)
        runs.append(finetune(task, module, sets + choice, seed, args.data,
                             os.path.join(args.out_dir, "runs", f"{name}_seed{seed}_{tag}")))
        rate = runs[0]["metrics"]["selection"]["chosen"]["learning_rate"]
        print(f"{name} seed {seed}: dev {task.metric} {runs[-1]['metrics'][task.metric]:.4f} (rate {rate:g}, "
              f"epoch {runs[-1]['metrics']['selection']['chosen']['epochs']})", flush=True)
    chosen = {"learning_rate": rate, "epochs": [r["metrics"]["selection"]["chosen"]["epochs"] for r in runs],
              "grid": list(rates)}
    return gain_table.Row(task.name, arm.model, arm.arm, arm.task_model(task.name), task.metric,
                          tuple(r["metrics"][task.metric] for r in runs), tuple(seeds), chosen,
                          sum(r["cpu_seconds"] for r in runs) / 60)


def baseline_rows(task: Task, data: str) -> list[gain_table.Row]:
    """The classic baselines on the arms' split (deterministic: no seeds)."""
    from downstream.finetune import task_data

    read = task_data.read_classification if task.finetune_task == "classify" else task_data.read_conll
    split = classic_baselines.splits(read(os.path.join(data, task.train)), VALIDATION)
    dev = read(os.path.join(data, task.dev))
    before = resource.getrusage(resource.RUSAGE_SELF)
    found = {"majority": classic_baselines.majority(split.train, dev)}
    if task.finetune_task == "classify":
        found["bow_logreg"] = classic_baselines.bow_logreg(split.train, split.validation, dev)
    else:
        found["most_frequent_tag"] = classic_baselines.most_frequent_tag(split.train, dev)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return [gain_table.Row(task.name, "-", arm, arm, task.metric, (r["score"],), (), r["chosen"],
                           cpu / 60 if arm == "bow_logreg" else 0.0) for arm, r in found.items()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo_dir", required=True)
    parser.add_argument("--tasks", default="sst2,ud_pos")
    parser.add_argument("--models", default="bert,gpt,bilm,minilm")
    parser.add_argument("--arms", default="pretrained,random,keras_hub_peer,baselines")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--variants", default="", help="fine-tuning levers as extra BERT arms, "
                        "NAME:KEY=VALUE[,KEY=VALUE];... (cls_pooler:bert_pooling=cls)")
    parser.add_argument("--quick", action="store_true", help="SST-2, one seed, a 2-point grid, no peer or MiniLM")
    parser.add_argument("--data", default=shared_data.path("tasks"))
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "finetune_gain"))
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.models, args.arms, args.seeds = "sst2", "bert,gpt,bilm", "pretrained,random,baselines", "1"
        args.rates = ",".join(map(str, QUICK_RATES))
    return args


@quiet_command
def main(argv=None) -> int:
    args = parse_args(argv)
    from benchmarks.lib import history

    commit = history.git_commit()
    print(f"machine: {history.machine()}")
    seeds = [int(s) for s in args.seeds.split(",")]
    rates = tuple(float(r) for r in args.rates.split(","))
    kinds = args.arms.split(",")
    rows = []
    for name in args.tasks.split(","):
        task = TASKS[name]
        if "baselines" in kinds:
            rows += baseline_rows(task, args.data)
        rows += [neural_row(task, arm, seeds, rates, args)
                 for arm in arms(name, args.models.split(","), kinds, args.quick, parse_variants(args.variants))]
    print(gain_table.format_table(rows))
    command = "python -m benchmarks.downstream.finetune_gain " + " ".join(argv if argv is not None else sys.argv[1:])
    full = not args.quick and len(seeds) >= 3
    path = os.path.join(history.RESULTS_DIR if full else args.out_dir, "finetune_gain_table.json")
    gain_table.write(path, rows, commit[0] + ("-dirty" if commit[1] else ""), history.machine(), command)
    print(f"table: {path}")
    if full and not args.no_history:
        history.record("finetune_gain", gain_figures(rows, command), measured_at=commit)
    return 0


def gain_figures(rows: list, workload: str) -> list:
    """Each row's gain over its reference arm, as history figures."""
    from benchmarks.lib import history

    by = {(r.task, r.model, r.arm): r for r in rows}
    figures = []
    for r in rows:
        ref = gain_table.reference_arm(r)
        if ref and (r.task, *ref) in by:
            figures.append(history.Figure(f"{r.task}_{r.model}_{r.arm}_gain", gain_table.gain(r, by[(r.task, *ref)])[0],
                                          workload=workload))
    return figures


if __name__ == "__main__":
    sys.exit(main())
