"""Fine-tuning the demo's pretrained exports on real labelled data, each figure next to its trivial baseline.

    python -m benchmarks.downstream.finetune [--exports demo_output/export] [--tasks ../shared/data/tasks]
        [--work /tmp/finetune-bench] [--only sst2_bert,pos_bert,...] [--set key=value ...]
        [--squad_train_questions 3000]

Runs (short budgets for a 2-core CPU; the exact settings are in `benchmarks.lib.finetune_recipes.RUNS` and
printed with the results):
  - sst2_*: SST-2 train -> dev accuracy vs the majority class.
  - pos_*: UD English-EWT UPOS, a seeded subsample of train -> the whole dev, word accuracy vs the most
    frequent tag of each word in training (the overall most frequent tag for unseen words).
  - ner_*: Universal NER English-EWT has one file (dev.conll); sentences go to a held-out fifth by
    `task_data.split_items` (sha256 of the sentence index, seed 0); entity F1 vs the most-frequent-tag baseline.
    ner_bilm is ELMo's way (the task's own word and casing vectors beside ELMo, a BiLSTM tagger).
  - squad_bert: SQuAD v1.1 (38 articles): questions of articles 0-29 train (a seeded subsample), the
    questions of articles 30-37 are evaluated (other articles: no shared context); EM/F1 vs the first
    sentence of the context.
`--set` overrides a setting in every selected run (after RUNS' own), e.g. `--set epochs=5` or
`--set max_train_examples=0` (all training examples). Prints a table and, last, one JSON line with every
run's metrics.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import sys
import time

from commands.tf_startup import quiet_command
from benchmarks.lib.finetune_recipes import RUNS
from benchmarks.lib.proc import ROOT
from demo import shared_data

TASKS = shared_data.path("tasks")

SQUAD_TRAIN_ARTICLES = 30
SQUAD_TRAIN_QUESTIONS = 3000
SQUAD_EVAL_QUESTIONS = 1000


def prepare(tasks: str, work: str, squad_train_questions: int = SQUAD_TRAIN_QUESTIONS) -> None:
    """The NER split and the SQuAD article split, written under `work`."""
    from downstream.finetune import task_data

    os.makedirs(work, exist_ok=True)
    sentences = task_data.read_conll(os.path.join(tasks, "uner", "dev.conll"))
    train, heldout = task_data.split_items(sentences, 0.2, seed=0)
    for name, part in (("ner_train.conll", train), ("ner_heldout.conll", heldout)):
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            f.write("\n".join("".join(f"{w}\t{t}\n" for w, t in zip(s.words, s.tags)) for s in part))
    with open(os.path.join(tasks, "squad", "train.json"), encoding="utf-8") as f:
        data = json.load(f)
    import random

    def subset(articles, limit, seed):
        rng = random.Random(seed)
        questions = [(a, p, q) for a, article in enumerate(articles) for p, para in enumerate(article["paragraphs"])
                     for q in range(len(para["qas"]))]
        keep = set(rng.sample(questions, min(limit, len(questions))))
        return {"version": "1.1", "data": [
            {"title": article["title"], "paragraphs": [
                {"context": para["context"], "qas": [qa for q, qa in enumerate(para["qas"]) if (a, p, q) in keep]}
                for p, para in enumerate(article["paragraphs"])]} for a, article in enumerate(articles)]}

    for name, articles, limit in (("squad_train.json", data["data"][:SQUAD_TRAIN_ARTICLES], squad_train_questions),
                                  ("squad_eval.json", data["data"][SQUAD_TRAIN_ARTICLES:], SQUAD_EVAL_QUESTIONS)):
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            json.dump(subset(articles, limit, seed=0), f)


@quiet_command
def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = argparse.ArgumentParser(prog="python -m benchmarks.downstream.finetune")
    parser.add_argument("--exports", default=os.path.join(ROOT, "demo_output", "export"))
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--work", default="/tmp/finetune-bench")
    parser.add_argument("--only", default=",".join(RUNS))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting in every selected run")
    parser.add_argument("--squad_train_questions", type=int, default=SQUAD_TRAIN_QUESTIONS)
    args = parser.parse_args(argv)
    from downstream.finetune import FinetuneJob, finetune
    from downstream.finetune.config import FinetuneConfig, apply_overrides

    prepare(args.tasks, args.work, args.squad_train_questions)
    results = {}
    for name in args.only.split(","):
        task, kind, train, evaluation, overrides, metric = RUNS[name]
        overrides = overrides + args.set
        paths = [os.path.join(args.work, p) if os.path.exists(os.path.join(args.work, p)) else
                 os.path.join(args.tasks, p) for p in (train, evaluation)]
        job = FinetuneJob(task=task, module=os.path.join(args.exports, kind), train=paths[0], eval=paths[1],
                          output_dir=os.path.join(args.work, "runs", name),
                          config=apply_overrides(FinetuneConfig(), overrides), overwrite=True)  # the bench's own runs
        started = time.time()
        metrics = dict(finetune(job, log=lambda m: print(m, file=sys.stderr)).metrics)
        metrics.pop("losses", None)
        results[name] = {"metric": metric, "value": metrics[metric], "baseline": metrics["baseline"][metric],
                         "settings": overrides, "wall_seconds": round(time.time() - started, 1),
                         **{k: metrics[k] for k in ("train_examples", "eval_examples", "steps", "train_seconds")},
                         "all": {k: v for k, v in metrics.items() if k not in ("module_path", "serving")}}
        print(f"{name}: {metric} {metrics[metric]:.4f} (baseline {metrics['baseline'][metric]:.4f})", file=sys.stderr)
    print(f"{'run':<12} {'metric':<9} {'model':>8} {'baseline':>9} {'train ex':>9} {'eval ex':>8} {'train s':>8}")
    for name, r in results.items():
        print(f"{name:<12} {r['metric']:<9} {r['value']:>8.4f} {r['baseline']:>9.4f} {r['train_examples']:>9} "
              f"{r['eval_examples']:>8} {r['train_seconds']:>8}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
