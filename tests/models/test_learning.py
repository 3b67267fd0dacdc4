"""Does a short pretraining run learn from context? On text-like synthetic data with Zipfian unigrams, where a
model that ignores its input can at best reach the unigram loss: GPT on `zipf_markov` (the next token usually
follows from the previous one), BERT on `topics` (a masked token is told by the words around it).

This data is easy: GPT-1's tied, bias-free output, which collapsed the tiny GPT on real text (the same hidden
states and logits for every input), passes these tests (measured: `tie_output=true, output_bias=false` on
gpt_tiny, both tests pass). The test that fails with that defect is test_slow_learning_real_text.py, on real
English; these guard the training path on every model family without the shared corpus.

Each family's tiny preset trains with its own recipe through `models.training.train`, as a user runs it; then
on held-out sequences its predictions must differ between inputs and positions, and its held-out loss must be
far below the unigram cross-entropy of the held-out targets under the training data's unigram distribution.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from models import families
from models.training import train
from preprocessing import readers
from tests.fixtures.training import write_dataset

# Training two models: the slow tier.
pytestmark = pytest.mark.slow

VOCAB, SEQ, PREDS = 300, 32, 5
STEPS = 150
CONTENT = {"gpt": "zipf_markov", "bert": "topics"}


def _targets(pattern: str, kind: str, examples: int) -> np.ndarray:
    x, y, w = next(iter(readers.make_dataset(pattern, examples, shuffle=False, repeat=False, model=kind)))
    y, w = (y["mlm"], w["mlm"]) if kind == "bert" else (y, w)
    return np.asarray(y)[np.asarray(w) > 0]


def unigram_cross_entropy(train_targets: np.ndarray, heldout_targets: np.ndarray, vocab: int) -> float:
    """Nats per held-out target under the add-one-smoothed unigram distribution of the training targets."""
    counts = np.bincount(train_targets, minlength=vocab) + 1.0
    return float(-np.log(counts[heldout_targets] / counts.sum()).mean())


@pytest.fixture(scope="module", params=["gpt", "bert"])
def trained(request, tmp_path_factory):
    kind = request.param
    root = tmp_path_factory.mktemp(f"learning_{kind}")
    common = dict(seq=SEQ, preds=PREDS, vocab_size=VOCAB, content=CONTENT[kind], shards=1)
    train_data = write_dataset(str(root / "train"), kind, examples=2048, seed=0, **common)
    heldout = write_dataset(str(root / "heldout"), kind, examples=64, seed=1, **common)
    model_dir = str(root / "run")
    argv = ["--model", kind, "--preset", f"{kind}_tiny", "--train_data", train_data, "--model_dir", model_dir,
            "--eval_data", heldout, "--set", f"train_steps={STEPS}", "--set", "warmup_steps=15",
            "--set", "batch_size=32", "--set", "steps_per_execution=25", "--set", "log_every=50",
            "--set", "eval_steps=2"]
    assert train.main(argv) == 0
    with open(f"{model_dir}/history.jsonl") as f:
        final = [json.loads(line) for line in f if '"split": "eval"' in line][-1]
    return {"kind": kind, "model_dir": model_dir, "heldout": heldout, "final": final,
            "unigram": unigram_cross_entropy(_targets(train_data, kind, 2048), _targets(heldout, kind, 64), VOCAB)}


def _predictions(trained) -> np.ndarray:
    """Held-out log-probabilities [N, V]: GPT's at every position, BERT's at every masked position."""
    task, model, _ = families.load_model(trained["model_dir"])
    x, _, w = next(iter(readers.make_dataset(trained["heldout"], 32, shuffle=False, repeat=False,
                                             **task.data_expectations())))
    x = {k: tf.cast(v, tf.int32) for k, v in x.items()}
    if trained["kind"] == "gpt":
        logits = model({"input_word_ids": x["input_word_ids"]}, training=False)["logits"]  # [B, T, V]
        weights = w
    else:
        logits, weights = model(x, training=False)["mlm"], w["mlm"]  # [B, P, V]
    logits = np.asarray(logits, np.float64)[np.asarray(weights) > 0]  # [N, V]
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_predictions_depend_on_the_input(trained):
    log_probs = _predictions(trained)  # [N, V]
    top = log_probs.argmax(-1)
    # A collapsed model answers the same token everywhere; GPT's successor rule gives many answers, BERT's
    # topics one per topic (16).
    assert len(np.unique(top)) >= 8, f"{trained['kind']}: only {len(np.unique(top))} distinct top predictions"
    probs = np.exp(log_probs[:128])  # [n, V]
    spread = 0.5 * np.abs(probs[:, None, :] - probs[None, :, :]).sum(-1)  # total variation, [n, n]
    assert spread[np.triu_indices(len(probs), 1)].mean() > 0.5, "predicted distributions barely differ"


def test_heldout_loss_is_far_below_the_unigram(trained):
    loss = trained["final"]["mlm_loss" if trained["kind"] == "bert" else "loss"]
    assert loss < trained["unigram"] - 0.75, (trained["kind"], loss, trained["unigram"])
