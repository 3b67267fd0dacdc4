"""Fine-tune an exported BERT, GPT or biLM module on a labelled task, through `hub.KerasLayer`.

    python -m downstream.finetune --task {classify,pair,tag,squad,choice} (--module PATH | --model_dir RUN) \\
        --train FILE --eval FILE --output_dir DIR [--overwrite] [--set key=value ...]

`--module`: an export dir (`serving.export`'s `--export_dir`) or a hub module dir; `--model_dir`: a
pretraining run, exported to a temporary folder first (the same code path). File formats:
`downstream/finetune/task_data.py`; heads: `downstream/finetune/heads.py`; inputs: `downstream/finetune/inputs.py`;
the module is loaded by `downstream.module.ExportedModule`. Writes to `output_dir`:
  - `model/`: the trained tf_keras model (SavedModel; inputs as `task_inputs.py` makes them);
  - `serving/1/`: a text-in SavedModel for TF Serving (classify, pair, choice; BERT tagging from words);
  - `metrics.json` (also printed as the last line): the eval metrics, the trivial baseline's, the budget;
  - `finetune_config.json`, `labels.json`; for SQuAD `predictions.json`.
An `output_dir` that already holds those is refused unless `--overwrite`, which removes them (nothing else),
and only once the run has passed every check and trained its model; a folder holding another kind of output
(an export, a model_dir, a data job's run), the `--module` folder or one inside it is refused, naming it
(`commands.overwrite`, the one --overwrite contract). Lines are read to their first MiB; a text is
split into words only as far as the window reads (`downstream.features.split_words`).
Eval labels (classify, pair) must be training labels: an unseen one is refused, naming it and its lines.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
import typing

import numpy as np

from downstream import module as module_lib
from models import config as config_lib
from commands import overwrite
from commands.user_errors import writable_dir
from downstream.finetune import squad
from downstream.finetune import task_data
from downstream.finetune import inputs as inputs_lib

TASKS = ("classify", "pair", "tag", "squad", "choice")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """How to fine-tune. Defaults are BERT's recipe (AdamW, linear warm-up over `warmup` of the steps,
    then linear decay to 0) with a learning rate suited to small models.

    Args:
      epochs, batch_size, learning_rate, warmup (fraction of steps), weight_decay, clip_norm: optimisation.
      max_seq_length: pieces per sequence (BERT, GPT); words per sentence (biLM tagging; biLM sentences are
        read whole, as the served graph reads them).
      doc_stride, max_query_length, max_answer_length, n_best: SQuAD windows and decoding.
      lm_coef: weight of GPT's auxiliary LM loss (Radford et al.: 0.5); 0 turns it off.
      train_module: fine-tune the module's weights (default: yes for BERT/GPT, no for the biLM, where the
        task learns its own scalar mix over the frozen layers).
      gpt_pair: `entail` (premise, delimiter, hypothesis) or `similarity` (both orders, added).
      tag_column: the tag's column in CoNLL files.
      max_train_examples: use only the first N training examples (after a seeded shuffle); 0 = all.
      dropout, tagger_units, classifier_units: head sizes (the two last for the biLM's heads).
      task_word_dim, task_word_min_count: the biLM tagger's own word vectors (Peters et al.'s `x_k`, beside
        ELMo): training words seen at least `task_word_min_count` times; `task_word_dim=0` leaves them out.
      elmo: the biLM tagger reads the module's ELMo vectors; false leaves them out (a control: the same
        tagger on its own word vectors only).
      seed: head initialisation, dropout, data order.
    """

    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 1e-4
    warmup: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    max_seq_length: int = 128
    doc_stride: int = 64
    max_query_length: int = 32
    max_answer_length: int = 30
    n_best: int = 20
    lm_coef: float = 0.5
    train_module: typing.Optional[bool] = None
    gpt_pair: str = "entail"
    tag_column: int = 1
    max_train_examples: int = 0
    dropout: float = 0.1
    tagger_units: int = 64
    classifier_units: int = 128
    task_word_dim: int = 64
    task_word_min_count: int = 1
    elmo: bool = True
    eval_batch_size: int = 64
    seed: int = 42

    def __post_init__(self):
        if self.gpt_pair not in ("entail", "similarity"):
            raise ValueError(f"gpt_pair must be entail or similarity, got {self.gpt_pair!r}")
        for name in ("epochs", "batch_size", "max_seq_length", "doc_stride", "n_best", "max_answer_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    def resolved(self, kind: str) -> "FinetuneConfig":
        trains = self.train_module if self.train_module is not None else kind != "bilm"
        return dataclasses.replace(self, train_module=trains)


def apply_overrides(config: FinetuneConfig, overrides: list[str]) -> FinetuneConfig:
    """`--set key=value` through the house's one parser (`models.config.override`)."""
    return config_lib.override({"finetune": config}, overrides)["finetune"]


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m downstream.finetune", description=__doc__.split("\n")[0])
    parser.add_argument("--task", required=True, choices=TASKS)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--module", help="an export dir or a hub module dir")
    source.add_argument("--model_dir", help="a pretraining run (exported to a temporary folder first)")
    parser.add_argument("--train", required=True)
    parser.add_argument("--eval", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier fine-tuning in --output_dir")
    return parser.parse_args(argv)


# What `run` writes into output_dir: an earlier run is these, and `--overwrite` removes only these
# (`commands.overwrite.FINETUNE`, the contract every command's --overwrite keeps).
OUTPUTS = overwrite.FINETUNE.fixed


def check_output_dir(output_dir: str, overwrite_flag: bool,
                     inputs: dict[str, str] | None = None) -> overwrite.Plan:
    """What `--overwrite` removes from `output_dir` (`commands.overwrite.plan`): raises `UserError` for a
    file, a folder holding another kind of output (an export, a model_dir, a data job's run) or an earlier
    fine-tuning without `overwrite_flag`, and for an input folder (`inputs`: `--module` or `--model_dir`) or a
    folder inside it."""
    writable_dir("--output_dir", output_dir)
    return overwrite.plan(output_dir, overwrite.FINETUNE, overwrite_flag, input_folders=inputs)


def warmup_linear(peak: float, warmup_steps: int, total_steps: int):
    """BERT's fine-tuning schedule as a tf_keras schedule: linear warm-up to `peak` over `warmup_steps`, then
    linear decay to 0 at `total_steps`. The formula is training's (`optimization.warmup_decay_rate`); only
    the Keras 2 base class is this module's, since fine-tuning runs `hub.KerasLayer` under tf_keras."""
    import tf_keras

    from models.training.optimization import warmup_decay_rate

    class WarmupLinear(tf_keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return warmup_decay_rate(step, peak, warmup_steps, total_steps)

        def get_config(self):
            return {"peak": peak, "warmup_steps": warmup_steps, "total_steps": total_steps}

    return WarmupLinear()


# Encoding: examples -> (x, y, sample_weight) and what evaluation needs to map predictions back.

@dataclasses.dataclass
class EncodedExamples:
    """A task's examples as model inputs `x`, targets `y`, sample weights, and what evaluation needs."""
    x: dict
    y: dict
    weights: dict | None = None
    positions: list | None = None  # tagging: first piece of each word
    features: list | None = None  # squad windows (`squad.SquadWindow`)


def encode(task: str, backbone, examples: list, labels: list[str], config: FinetuneConfig,
           training: bool) -> EncodedExamples:
    from downstream.features import window_text, word_bytes_cut

    t = config.max_seq_length
    if task == "tag":
        sentences = [tuple(word_bytes_cut(w) for w in s.words) for s in examples]
        if backbone.kind == "bert":
            x, positions = inputs_lib.bert_tag_inputs(backbone, sentences, t)
        else:
            x, positions = inputs_lib.bilm_tag_inputs(backbone, sentences, t)
        y, w = inputs_lib.tag_labels(positions, [s.tags for s in examples], {n: i for i, n in enumerate(labels)}, t)
        return EncodedExamples(x, {"logits": y}, {"logits": w}, positions=positions)
    if task == "squad":
        if backbone.kind != "bert":
            raise ValueError("SQuAD fine-tuning needs a BERT module")
        unit_texts = [[e.context[a:b] for a, b in squad.split_units(e.context)] for e in examples]
        unit_pieces = backbone.word_pieces(unit_texts, unk_for_empty=False)  # as the context's tokenization
        question_pieces = backbone.pieces([e.question for e in examples])
        features = squad.make_features(examples, unit_pieces, question_pieces, backbone.token_id("[CLS]"),
                                       backbone.token_id("[SEP]"), t, config.doc_stride, config.max_query_length,
                                       training=training)
        x = {k: np.array([getattr(f, k) for f in features], np.int32)
             for k in ("input_word_ids", "input_mask", "input_type_ids")}
        y = {"start_logits": np.array([f.start_position for f in features], np.int32),
             "end_logits": np.array([f.end_position for f in features], np.int32)}
        return EncodedExamples(x, y, features=features)
    texts = [e.texts for e in examples]
    if backbone.kind != "bilm":  # a window's worth of words of each text (the biLM reads its sentences whole)
        texts = [tuple(window_text(x, t, backbone.lower_case) for x in parts) for parts in texts]
    x = inputs_lib.text_inputs(backbone, task, texts, t, config.gpt_pair)
    index = {n: i for i, n in enumerate(labels)}
    return EncodedExamples(x, {"logits": np.array([index.get(e.label, 0) for e in examples], np.int32)})


def sequences_of(task: str, encoded: EncodedExamples) -> int:
    """S, the sequences per example of the `[N, S, ...]` inputs (1 for tagging and SQuAD's `[N, T]`)."""
    if task in ("tag", "squad"):
        return 1
    return encoded.x.get("input_word_ids", encoded.x.get("text")).shape[1]


# Metrics.

def entities(tags: list[str]) -> set[tuple[int, int, str]]:
    """IOB1/IOB2 chunks `(start, end, type)` as conlleval (and seqeval's default mode) reads them: a chunk
    starts at `B-X`, or at `I-X` after anything but a chunk of type X, and ends before `O`, `B-` or a
    change of type."""
    chunks, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-") if tag != "O" else ("O", "", "")
        if start is not None and (prefix != "I" or label != kind):
            chunks.add((start, i, kind))
            start = None
        if prefix in ("B", "I") and start is None:
            start, kind = i, label
    return chunks


def tag_scores(gold: list[tuple[str, ...]], predicted: list[list[str]]) -> dict:
    words = sum(len(g) for g in gold)
    correct = sum(p == g for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps))
    scores = {"accuracy": correct / max(words, 1)}
    if all(t == "O" or t[:2] in ("B-", "I-") for g in gold for t in g):
        found = sum(len(entities(p)) for p in predicted)
        true = sum(len(entities(g)) for g in gold)
        hit = sum(len(entities(p) & entities(g)) for g, p in zip(gold, predicted))
        precision, recall = hit / max(found, 1), hit / max(true, 1)
        scores.update(precision=precision, recall=recall,
                      f1=2 * precision * recall / (precision + recall) if hit else 0.0)
    return scores


def evaluate(task, backbone, model, encoded: EncodedExamples, examples, train_examples, labels, config) -> dict:
    out = model.predict(encoded.x, batch_size=config.eval_batch_size, verbose=0)
    if task == "squad":
        by_example = {}
        for i, feature in enumerate(encoded.features):
            by_example.setdefault(feature.example_index, []).append(
                (feature, out["start_logits"][i], out["end_logits"][i]))
        predictions = {e.qid: squad.best_answers(e, by_example.get(n, []), config.n_best,
                                                  config.max_answer_length)[0][0] for n, e in enumerate(examples)}
        return {**squad.evaluate(examples, predictions), "predictions": predictions,
                "baseline": {"name": "first sentence of the context",
                             **squad.evaluate(examples, task_data.squad_baseline(examples))}}
    if task == "tag":
        per_word, overall = task_data.most_frequent_tags(train_examples)
        predicted = inputs_lib.words_from_positions(out["logits"], encoded.positions, labels, overall)
        gold = [s.tags for s in examples]
        return {**tag_scores(gold, predicted),
                "baseline": {"name": "most frequent tag of the word in training (else the most frequent tag)",
                             **tag_scores(gold, task_data.tag_baseline(train_examples, examples))},
                "majority_baseline": {"name": f"always {overall}",
                                      **tag_scores(gold, [[overall] * len(s.words) for s in examples])}}
    predicted = out["logits"].argmax(-1)
    accuracy = float(np.mean(predicted == encoded.y["logits"]))
    majority = task_data.majority_label(train_examples)
    return {"accuracy": accuracy, "baseline": {"name": f"majority class of the training data ({majority})",
                                               "accuracy": float(np.mean([e.label == majority for e in examples]))}}


# Training.

def compile_model(model, task: str, config: FinetuneConfig, steps: int) -> None:
    import tf_keras

    schedule = warmup_linear(config.learning_rate, int(steps * config.warmup), steps)
    optimizer = tf_keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay, epsilon=1e-6,
                                          global_clipnorm=config.clip_norm or None)
    optimizer.exclude_from_weight_decay(var_names=["bias", "LayerNorm", "layer_norm", "gamma", "beta"])
    loss = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if task == "squad":
        model.compile(optimizer, {"start_logits": loss, "end_logits": loss},
                      loss_weights={"start_logits": 0.5, "end_logits": 0.5})
    else:
        model.compile(optimizer, {"logits": loss})


def train(model, encoded: EncodedExamples, config: FinetuneConfig, log=print) -> list[float]:
    import tensorflow as tf

    from downstream.finetune.progress import progress_callback

    n = len(next(iter(encoded.y.values())))
    parts = (encoded.x, encoded.y) if encoded.weights is None else (encoded.x, encoded.y, encoded.weights)
    data = tf.data.Dataset.from_tensor_slices(parts).shuffle(n, seed=config.seed, reshuffle_each_iteration=True)
    data = data.batch(config.batch_size).prefetch(2)
    progress = progress_callback(config.epochs * -(-n // config.batch_size), config.epochs, config.batch_size, log)
    history = model.fit(data, epochs=config.epochs, verbose=0, callbacks=[progress])
    return [float(v) for v in history.history["loss"]]


def read_examples(task: str, path: str, config: FinetuneConfig, subsample: bool, log=print) -> list:
    cut = []
    examples = task_data.read_task(task, path, config.tag_column, cut)
    if cut:
        shown = ", ".join(map(str, cut[:3])) + (", ..." if len(cut) > 3 else "")
        log(f"warning: {path}: {len(cut)} line(s) over the {task_data.MAX_LINE_BYTES >> 20} MiB line limit "
            f"were read as their first MiB only (line {shown})")
    if subsample and config.max_train_examples and len(examples) > config.max_train_examples:
        order = np.random.default_rng(config.seed).permutation(len(examples))[:config.max_train_examples]
        examples = [examples[i] for i in sorted(order)]
    return examples


def run(task: str, module_path: str, train_path: str, eval_path: str, output_dir: str,
        config: FinetuneConfig, log=print, earlier: overwrite.Plan | None = None) -> dict:
    """Fine-tunes and evaluates; writes `output_dir`, where `earlier` (an earlier run, `--overwrite`) is removed
    only once the data, the labels and the module have passed their checks and the model is trained; returns
    the metrics."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(config.seed)
    train_examples = read_examples(task, train_path, config, subsample=True, log=log)  # the data's errors first
    eval_examples = read_examples(task, eval_path, config, subsample=False, log=log)
    labels = [] if task == "squad" else task_data.label_list(train_examples)
    if task in ("classify", "pair"):
        task_data.check_eval_labels(eval_examples, labels, eval_path)
    backbone = module_lib.ExportedModule.load(module_path)
    config = config.resolved(backbone.kind)
    if task == "choice":
        labels = [str(i) for i in range(len(train_examples[0].texts) - 1)]
    started = time.time()
    train_encoded = encode(task, backbone, train_examples, labels, config, training=True)
    eval_encoded = encode(task, backbone, eval_examples, labels, config, training=False)
    log(f"{backbone.kind} {task}: {len(train_examples)} training examples, {len(eval_examples)} eval examples, "
        f"encoded in {time.time() - started:.1f}s")
    from downstream.finetune import heads

    task_words = ()
    if backbone.kind == "bilm" and task == "tag" and config.task_word_dim:
        task_words = heads.task_vocabulary([s.words for s in train_examples], config.task_word_min_count)
    model = heads.build_model(task, backbone, max(len(labels), 1), config, sequences_of(task, train_encoded),
                              task_words)
    rows = len(next(iter(train_encoded.y.values())))
    steps = config.epochs * -(-rows // config.batch_size)
    compile_model(model, task, config, steps)
    started = time.time()
    losses = train(model, train_encoded, config, log)
    train_seconds = time.time() - started
    metrics = evaluate(task, backbone, model, eval_encoded, eval_examples, train_examples, labels, config)
    predictions = metrics.pop("predictions", None)
    metrics.update(task=task, module=backbone.kind, module_path=os.path.abspath(backbone.path),
                   train_examples=len(train_examples), eval_examples=len(eval_examples), train_rows=rows,
                   steps=steps, epochs=config.epochs, train_seconds=round(train_seconds, 1), losses=losses,
                   train_module=config.train_module)
    os.makedirs(output_dir, exist_ok=True)
    if earlier is not None:
        earlier.remove()  # --overwrite: the earlier fine-tuning's files, now that this one has its own to write
    model.save(os.path.join(output_dir, "model"), include_optimizer=False)
    from downstream.finetune import export as finetune_export

    fallback = task_data.most_frequent_tags(train_examples)[1] if task == "tag" else ""
    served = finetune_export.export(task, backbone, model, labels, config, os.path.join(output_dir, "serving"),
                                    fallback)
    if served:
        metrics["serving"] = served
    _write_json(os.path.join(output_dir, "finetune_config.json"), {"task": task, **dataclasses.asdict(config)})
    _write_json(os.path.join(output_dir, "labels.json"), labels)
    if predictions is not None:
        _write_json(os.path.join(output_dir, "predictions.json"), predictions)
    _write_json(os.path.join(output_dir, "metrics.json"), metrics)
    return metrics


def _write_json(path: str, payload) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = parse_args(argv)
    try:
        config = apply_overrides(FinetuneConfig(), args.overrides)
        task_data.check_file("--train", args.train)
        task_data.check_file("--eval", args.eval)
        earlier = check_output_dir(args.output_dir, args.overwrite,
                                   {"--module": args.module} if args.module else {"--model_dir": args.model_dir})
    except (config_lib.OverrideError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.model_dir and not os.path.isdir(args.model_dir):
        print(f"error: --model_dir {args.model_dir}: no such folder", file=sys.stderr)
        return 2
    if args.module and not os.path.isdir(args.module):
        print(f"error: --module {args.module}: no such folder (give an export dir or a hub module dir)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="finetune-export-") as scratch:
        module = args.module
        if args.model_dir:
            from serving.export import cli as export

            try:
                export.export(args.model_dir, scratch, log=lambda *_: None)
            except export.ExportError as e:
                print(f"error: {e}", file=sys.stderr)
                return e.code
            module = scratch
        try:
            metrics = run(args.task, module, args.train, args.eval, args.output_dir, config,
                          log=lambda m: print(m, file=sys.stderr), earlier=earlier)
        except (task_data.TaskDataError, module_lib.ModuleError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    print(json.dumps({k: v for k, v in metrics.items() if k != "losses"}))
    return 0

