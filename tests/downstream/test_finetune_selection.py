"""Model selection in fine-tuning (`downstream/finetune/selection.py`): the validation carve-out, the best
epoch with early stopping, the rate grid, and that the eval file plays no part in choosing."""

import json

import numpy as np
import pytest

from downstream.finetune import FinetuneConfig, FinetuneJob, finetune
from downstream.finetune import evaluation
from downstream.finetune import selection
from downstream.finetune import task_data
from downstream.finetune import tasks
from downstream.finetune.run import read_training

RIVER = ["they sat on the river bank", "the grassy bank of the river", "a picnic on the river bank",
         "fish swam by the muddy bank", "the river ran past the bank"]
MONEY = ["the bank raised its interest rates", "interest rates at the bank", "the bank raised rates again",
         "she paid the bank her loan", "the bank lent him money"]


def _examples(n: int) -> list:
    return [task_data.TextExample((f"sentence number {i}",), str(i % 2), i + 1) for i in range(n)]


def test_the_carve_out_is_disjoint_stable_and_the_fraction_asked():
    examples = _examples(2000)
    train, validation = selection.carve(examples, 0.1)
    assert len(train) + len(validation) == 2000
    assert not {e.texts for e in train} & {e.texts for e in validation}
    assert 150 < len(validation) < 250
    again = selection.carve(list(reversed(examples)), 0.1)  # order and the run's seed play no part
    assert sorted(e.texts for e in again[1]) == sorted(e.texts for e in validation)
    assert [e.line for e in train] == sorted(e.line for e in train)  # file order kept
    twice = selection.carve(examples + examples, 0.1)  # a text and its duplicates land on one side
    assert not {e.texts for e in twice[0]} & {e.texts for e in twice[1]}


def test_tagged_sentences_are_carved_by_their_words():
    sentences = [task_data.TaggedSentence(("word", str(i)), ("NOUN", "NUM")) for i in range(500)]
    train, validation = selection.carve(sentences, 0.2)
    assert validation and not {s.words for s in train} & {s.words for s in validation}


def test_the_best_epoch_is_kept_and_training_stops_after_patience():
    import tf_keras

    model = tf_keras.Sequential([tf_keras.Input([3]), tf_keras.layers.Dense(2)])
    model.compile("sgd", "mse")
    scores = iter([0.5, 0.7, 0.6, 0.65, 0.9, 0.95])
    seen = []

    class Snapshot(tf_keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append([w.copy() for w in self.model.get_weights()])

    best = selection.best_epoch_callback(lambda m: next(scores), patience=2, log=lambda *_: None)
    x, y = np.random.default_rng(0).normal(size=(16, 3)), np.zeros((16, 2))
    history = model.fit(x, y, epochs=6, verbose=0, callbacks=[Snapshot(), best])
    assert len(history.history["loss"]) == 4  # epochs 3 and 4 did not beat epoch 2
    assert best.scores == [0.5, 0.7, 0.6, 0.65] and best.best_epoch == 2
    assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), seen[1]))
    assert not all(np.array_equal(a, b) for a, b in zip(model.get_weights(), seen[3]))


def test_a_grid_needs_a_validation_split(tmp_path):
    with pytest.raises(ValueError, match="validation_fraction"):
        selection.select(tasks.get("classify"), None, FinetuneConfig(learning_rates=(1e-3, 1e-4)),
                         selection.Data([], None, None, None, []))
    with pytest.raises(ValueError, match="not both"):
        FinetuneJob(task="classify", module="m", train="t", eval="e", output_dir="o", validation="v",
                    config=FinetuneConfig(validation_fraction=0.1))
    with pytest.raises(ValueError, match=r"validation_fraction must be in \[0, 1\)"):
        FinetuneConfig(validation_fraction=1.0)


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_the_max_train_examples_cap_is_drawn_after_the_carve_out(tmp_path):
    path = _write(tmp_path / "train.tsv", [f"{e.label}\t{e.texts[0]}" for e in _examples(400)])
    config = FinetuneConfig(validation_fraction=0.25, max_train_examples=50)
    job = FinetuneJob(task="classify", module="m", train=path, eval=path, output_dir=str(tmp_path), config=config)
    train, validation = read_training(tasks.get("classify"), job, log=lambda *_: None)
    full_train, full_validation = selection.carve(task_data.read_classification(path), 0.25)
    assert validation == full_validation and len(train) == 50 and set(train) <= set(full_train)


@pytest.mark.slow
def test_the_grid_and_epochs_are_chosen_on_validation_and_dev_is_never_read_while_choosing(
        tiny_models, tmp_path, monkeypatch):
    lines = [f"river\t{t}" for t in RIVER * 6] + [f"money\t{t}" for t in MONEY * 6]
    lines += [f"{'river' if i % 2 else 'money'}\t{w} bank number {i}" for i, w in enumerate(["the"] * 40)]
    train = _write(tmp_path / "train.tsv", lines)
    dev = _write(tmp_path / "dev.tsv", ["river\ta dev sentence about the river", "money\ta dev sentence on money"])
    calls = []
    real_evaluate, real_select = evaluation.evaluate, selection.select

    def evaluate(task, model, encoded, examples, *rest):
        calls.append((selecting[0], {e.texts[0] for e in examples}))
        return real_evaluate(task, model, encoded, examples, *rest)

    selecting = [False]

    def select(*args, **kwargs):
        selecting[0] = True
        try:
            return real_select(*args, **kwargs)
        finally:
            selecting[0] = False

    monkeypatch.setattr(evaluation, "evaluate", evaluate)
    monkeypatch.setattr(selection, "select", select)
    config = FinetuneConfig(epochs=3, batch_size=16, max_seq_length=12, warmup=0.0, dropout=0.0, seed=1,
                            validation_fraction=0.3, patience=2, learning_rates=(1e-5, 3e-3))
    result = finetune(FinetuneJob(task="classify", module=tiny_models["bert"].export_dir, train=train, eval=dev,
                                  output_dir=str(tmp_path / "out"), config=config), log=lambda *_: None)
    chosen = result.metrics["selection"]
    runs = chosen["runs"]
    assert [r["learning_rate"] for r in runs] == [1e-5, 3e-3]
    for r in runs:
        assert r["best_score"] == max(r["epoch_scores"]) == r["epoch_scores"][r["best_epoch"] - 1]
    best = max(runs, key=lambda r: r["best_score"])
    assert chosen["chosen"] == {"learning_rate": best["learning_rate"], "epochs": best["best_epoch"],
                                "validation_score": best["best_score"]}
    assert chosen["metric"] == "accuracy" and chosen["validation_examples"] > 0
    dev_texts = {"a dev sentence about the river", "a dev sentence on money"}
    assert sum(len(runs_) for runs_ in [r["epoch_scores"] for r in runs]) == sum(1 for s, _ in calls if s)
    assert all(not texts & dev_texts for s, texts in calls if s)  # while choosing: validation only
    assert [texts for s, texts in calls if not s] == [dev_texts]  # dev: once, after the choice
    with open(result.metrics_file) as f:
        assert json.load(f)["selection"] == chosen
