"""The training loop and its CLIs on tiny synthetic data: every model family trains under XLA and writes
its model_dir; accumulation is exact; a killed run resumes to the same losses; bad input fails clearly."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from models import families
from models.training import evaluate
from models.training import hardware, train
from models.config import TrainConfig
from models.training.trainer import Trainer
from commands.user_errors import UserError
from tests.conftest import ROOT
from tests.fixtures.training import write_dataset

FAST = ["--set", "warmup_steps=2", "--set", "log_every=2", "--set", "checkpoint_every=4", "--set", "batch_size=8",
        "--set", "steps_per_execution=2", "--set", "learning_rate=1e-3"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return {kind: write_dataset(str(root / kind), kind) for kind in ("bert", "gpt", "bilm")}


def _history(model_dir):
    """Last logged training record per step."""
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return {r["step"]: r for r in records if r["split"] == "train"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bert", "gpt", "bilm"])
def test_each_model_trains_under_xla_and_writes_its_model_dir(kind, data, tmp_path, capsys):
    model_dir = str(tmp_path / kind)
    argv = ["--model", kind, "--preset", f"{kind}_tiny", "--train_data", data[kind], "--model_dir", model_dir,
            "--eval_data", data[kind], "--set", "train_steps=8", "--set", "eval_steps=2", *FAST]
    assert train.main(argv) == 0
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert final["step"] == 8 and np.isfinite(final["loss"]) and final["tokens_per_second"] > 0
    saved = families.read_config(model_dir)
    assert saved["model"] == kind and saved["train_config"].train_steps == 8 and saved["train_config"].jit_compile
    assert saved["data"]["vocab_size"] == 40 and os.path.exists(os.path.join(model_dir, "vocab.txt"))
    # what `auto` became on this machine, beside the config that says `auto`
    assert saved["train_config"].mixed_precision == "auto"
    assert saved["run"] == {"mixed_precision": hardware.resolve_precision("auto", True), "jit_compile": True}
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-8")
    assert sorted(_history(model_dir)) == [2, 4, 6, 8]
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(os.path.join(model_dir, "train")))
    assert os.listdir(os.path.join(model_dir, "eval"))

    assert evaluate.main(["--model_dir", model_dir, "--eval_data", data[kind], "--steps", "2"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    expected_keys = {"bert": {"mlm_accuracy", "mlm_loss", "nsp_accuracy"}, "gpt": {"loss", "perplexity"},
                     "bilm": {"forward_perplexity", "backward_perplexity", "perplexity"}}[kind]
    assert expected_keys <= set(result) and result["step"] == 8 and result["examples"] == 16
    with open(os.path.join(model_dir, "metrics.json")) as f:
        assert expected_keys <= set(json.load(f))

    # Restoring the model alone (export, fine-tuning) gets every trained weight, not only what the optimizer
    # tracks: two restores into freshly (randomly) initialised models agree on every weight.
    _, first, _ = families.load_model(model_dir)
    _, second, _ = families.load_model(model_dir)
    for a, b in zip(first.trainable_variables, second.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def _trainer(kind, data, model_dir, **fields):
    saved = {"max_seq_length": 16, "max_predictions_per_seq": 4}
    model_config = families.preset_config(kind, f"{kind}_tiny", vocab_size=40, dropout=0.0)
    config = TrainConfig(**{"batch_size": 8, "train_steps": 6, "warmup_steps": 0, "log_every": 1,
                            "steps_per_execution": 1, "learning_rate": 1e-3, "jit_compile": False, **fields})
    task = families.make_task(kind, model_config, saved)
    trainer = Trainer(task, config, tf.distribute.get_strategy(), model_dir)
    dataset = train.distributed_dataset(tf.distribute.get_strategy(), data[kind], task, config, training=True)
    return trainer, dataset


@pytest.mark.slow
def test_gradient_accumulation_equals_the_large_batch(data, tmp_path):
    losses = {}
    for steps in (1, 2):
        trainer, dataset = _trainer("gpt", data, str(tmp_path / f"acc{steps}"), accumulation_steps=steps,
                                    shuffle_buffer=1)
        trainer.train(dataset)
        losses[steps] = [r["loss"] for _, r in sorted(_history(trainer.model_dir).items())]
    assert len(losses[1]) == 6
    np.testing.assert_allclose(losses[2], losses[1], rtol=2e-5)


@pytest.mark.slow
def test_train_only_updates_the_named_heads_and_leaves_the_encoder_frozen(data, tmp_path):
    trainer, dataset = _trainer("bert", data, str(tmp_path / "head"), train_only=("mlm_head", "nsp_head"))
    before = {v.path: v.numpy().copy() for v in trainer.model.trainable_variables}
    trainer.train(dataset)
    changed = {v.path for v in trainer.model.trainable_variables if not np.array_equal(v.numpy(), before[v.path])}
    heads = {v.path for v in trainer.model.trainable_variables if v.path.split("/")[0] in ("mlm_head", "nsp_head")}
    # 7 weights with a tied decoder (the token embeddings stay frozen too), 8 with bert_tiny's own output matrix
    assert changed == heads and len(heads) == (7 if trainer.task.config.tie_output else 8)
    with pytest.raises(UserError, match="encoder_head matches no weight"):
        _trainer("bert", data, str(tmp_path / "bad"), train_only=("encoder_head",))


TRAIN_S = 600  # one `python -m` training run of 12 tiny steps on a loaded machine: bounds a hang only
TRAIN_ENV = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
STEPS, CHECKPOINT_EVERY = 12, 4


def _train_args(data, model_dir):
    return ["--model", "bert", "--preset", "bert_tiny", "--train_data", data["bert"], "--model_dir", model_dir,
            "--set", f"train_steps={STEPS}", "--set", "warmup_steps=2", "--set", "log_every=1",
            "--set", f"checkpoint_every={CHECKPOINT_EVERY}", "--set", "batch_size=8", "--set", "steps_per_execution=1",
            "--set", "learning_rate=1e-3", "--set", "jit_compile=false"]  # XLA: test_each_model_trains_under_xla


def _start_paused(data, model_dir, pause_step):
    """A training run that has logged `pause_step` and waits (tests.fixtures.paused_training) until a line
    arrives on its stdin: killed or signalled then, it stops at that step however fast or slow the machine."""
    process = subprocess.Popen([sys.executable, "-m", "tests.fixtures.paused_training", str(pause_step),
                                *_train_args(data, model_dir)], cwd=ROOT, env=TRAIN_ENV,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    while line := process.stdout.readline():
        out.append(line)
        if line.strip() == f"paused at step {pause_step}":
            return process
    pytest.fail(f"the run ended ({process.wait()}) before step {pause_step}: {''.join(out)[-3000:]}")


@pytest.mark.slow
def test_killed_and_preempted_runs_resume_to_the_uninterrupted_losses(data, tmp_path):
    """The two runs that are stopped are processes of their own (SIGKILL, then SIGTERM); the uninterrupted run
    and the last resumption run the CLI's `main` in this process, as `python -m` would."""
    reference = str(tmp_path / "reference")
    assert train.main(_train_args(data, reference)) == 0
    expected = _history(reference)

    resumed = str(tmp_path / "resumed")
    process = _start_paused(data, resumed, pause_step=6)
    process.kill()  # SIGKILL: no chance to save; steps 5 and 6 are lost
    process.wait()
    process.stdin.close()
    process.stdout.close()
    assert tf.train.latest_checkpoint(resumed).endswith("ckpt-4")
    process = _start_paused(data, resumed, pause_step=10)  # resumes from ckpt-4
    process.send_signal(signal.SIGTERM)  # preemption: saves where it is and exits 128 + 15
    process.stdin.write("go on\n")
    process.stdin.close()
    out = process.stdout.read()
    process.stdout.close()
    assert process.wait(timeout=TRAIN_S) == 128 + signal.SIGTERM and "stopped by signal" in out, out[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["stopped_by_signal"] == signal.SIGTERM
    assert tf.train.latest_checkpoint(resumed).endswith("ckpt-10")
    assert train.main(_train_args(data, resumed)) == 0

    got = _history(resumed)
    assert sorted(got) == sorted(expected) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        for key in ("mlm_loss", "nsp_loss", "mlm_accuracy"):
            assert got[step][key] == pytest.approx(expected[step][key], rel=1e-5, abs=1e-6), (step, key)


def test_wrong_data_for_the_model_is_refused_before_training(data, tmp_path, capsys):
    common = ["--model_dir", str(tmp_path / "m"), "--set", "train_steps=2"]
    assert train.main(["--model", "gpt", "--preset", "gpt_tiny", "--train_data", data["bert"], *common]) == 2
    assert "made for bert, not gpt" in capsys.readouterr().err
    assert train.main(["--model", "bert", "--preset", "bert_tiny", "--train_data", data["bert"], "--set",
                       "vocab_size=99", *common]) == 2
    assert "vocab_size 99 but the data's vocabulary has 40" in capsys.readouterr().err
    assert train.main(["--model", "bert", "--preset", "gpt_tiny", "--train_data", data["bert"], *common]) == 2
    assert "not a bert preset" in capsys.readouterr().err
    assert train.main(["--model", "bert", "--preset", "bert_tiny", "--train_data", data["bert"],
                       "--set", "hidden_sise=3", *common]) == 2
    err = capsys.readouterr().err
    assert "hidden_sise: unknown key" in err and "model.hidden_size" in err
    assert not os.path.exists(tmp_path / "m")


@pytest.mark.slow
def test_a_different_model_in_model_dir_is_refused(data, tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    assert train.main(["--model", "gpt", "--preset", "gpt_tiny", "--train_data", data["gpt"], "--model_dir",
                       model_dir, "--set", "train_steps=2", "--set", "jit_compile=false"]) == 0
    assert train.main(["--model", "gpt", "--preset", "gpt_mini", "--train_data", data["gpt"], "--model_dir",
                       model_dir, "--set", "train_steps=4"]) == 2
    assert "holds a model with num_layers=2, asked for 4" in capsys.readouterr().err


@pytest.mark.slow
def test_corrupt_shard_is_named(data, tmp_path, capsys):
    directory = tmp_path / "corrupt"
    pattern = write_dataset(str(directory), "gpt", examples=64)
    shard = directory / "gpt-00001-of-00002.tfrecord"
    raw = bytearray(shard.read_bytes())
    raw[200:210] = b"\xff" * 10
    shard.write_bytes(bytes(raw))
    assert train.main(["--model", "gpt", "--preset", "gpt_tiny", "--train_data", pattern, "--model_dir",
                       str(tmp_path / "m"), "--set", "train_steps=20", "--set", "jit_compile=false"]) == 3
    err = capsys.readouterr().err
    assert "corrupt training data" in err and "gpt-00001-of-00002.tfrecord" in err


def test_asking_for_a_missing_tpu_fails_fast():
    from models.training.distribute import StrategyError, make_strategy
    start = time.time()
    with pytest.raises(StrategyError, match="no TPU"):
        make_strategy("tpu", tpu="grpc://127.0.0.1:1")
    with pytest.raises(StrategyError, match="no TPU"):
        make_strategy("tpu", tpu="no-such-tpu-here")
    assert time.time() - start < 60


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains(policy, data, tmp_path):
    import keras
    try:
        trainer, dataset = _trainer("bert", data, str(tmp_path / policy), mixed_precision=policy, train_steps=3,
                                    jit_compile=True)
        trainer.train(dataset)
        assert trainer.model.get_layer("bert_encoder").get_layer("transformer_layer_0").compute_dtype == \
            policy.split("_")[1]
        assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
        assert all(np.isfinite(r["loss"]) for r in _history(trainer.model_dir).values())
        if policy == "mixed_float16":
            assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    finally:
        keras.config.set_dtype_policy("float32")


@pytest.mark.slow
def test_a_non_finite_loss_stops_training_and_keeps_the_last_finite_checkpoint(data, tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    common = ["--model", "gpt", "--preset", "gpt_tiny", "--train_data", data["gpt"], "--model_dir", model_dir,
              "--set", "jit_compile=false", "--set", "warmup_steps=0", "--set", "log_every=2",
              "--set", "checkpoint_every=2", "--set", "steps_per_execution=1", "--set", "batch_size=8"]
    assert train.main(common + ["--set", "train_steps=4", "--set", "learning_rate=1e-3"]) == 0
    capsys.readouterr()
    # Adam steps of 1e30 overflow the weights: the next loss is NaN
    assert train.main(common + ["--set", "train_steps=12", "--set", "learning_rate=1e30",
                                "--allow_change", "learning_rate"]) == train.NON_FINITE_LOSS
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "non-finite loss in steps" in errors[0] and "ckpt-4" in errors[0], captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-4")  # the NaN state is never written
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        records = [json.loads(line) for line in f]  # valid JSON throughout
    assert all(np.isfinite(r["loss"]) for r in records)


def test_bad_training_parameters_are_refused_with_their_range(data, tmp_path, capsys):
    common = ["--model", "gpt", "--preset", "gpt_tiny", "--train_data", data["gpt"], "--model_dir",
              str(tmp_path / "m")]
    for override, message in [("learning_rate=nan", "--set train.learning_rate nan is not a finite number"),
                              ("learning_rate=0", "--set train.learning_rate 0.0 is out of range; allowed: (0, inf)"),
                              ("beta_2=1.5", "--set train.beta_2 1.5 is out of range; allowed: [0, 1)"),
                              ("dropout=1.0", "--set model.dropout 1.0 is out of range; allowed: [0, 1)"),
                              ("batch_size=0", "batch_size must be >= 1, got 0")]:
        assert train.main(common + ["--set", override]) == 2
        err = capsys.readouterr().err
        assert err.strip().splitlines()[-1] == f"error: {message}" or message in err.strip().splitlines()[-1], err
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert train.main(common[:-1] + [str(a_file)]) == 2
    assert f"--model_dir {a_file} is a file" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "m")
    assert evaluate.main(["--model_dir", str(tmp_path / "none"), "--eval_data", data["gpt"]]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert evaluate.main(["--model_dir", str(tmp_path), "--eval_data", data["gpt"], "--steps", "0"]) == 2
    assert "--steps 0 is out of range; allowed: [1, inf)" in capsys.readouterr().err


def test_json_safe_writes_null_for_non_finite_metrics():
    from models.training.trainer import json_safe

    assert json.dumps(json_safe({"loss": float("nan"), "step": 3, "x": float("inf"), "y": 1.5})) == \
        '{"loss": null, "step": 3, "x": null, "y": 1.5}'
