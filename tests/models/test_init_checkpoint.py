"""`models.training.train --init_checkpoint`: a new model_dir from another's weights only (continued
pretraining), checked against the data's vocabulary and the model's shapes before anything is written."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from models import families
from models.training import train
from models.training.trainer import Trainer
from tests.fixtures.training import train_tiny, write_dataset

FAST = ["--set", "warmup_steps=1", "--set", "log_every=1", "--set", "checkpoint_every=2", "--set", "batch_size=8",
        "--set", "steps_per_execution=1", "--set", "jit_compile=false"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A briefly trained tiny BERT model_dir and its data."""
    return train_tiny(tmp_path_factory.mktemp("init"), "bert", "--set", "train_steps=2", *FAST)


@pytest.mark.slow
def test_takes_the_weights_only_with_config_from_the_source(source, tmp_path, caplog):
    model_dir = str(tmp_path / "continued")
    plan = train.resolve(train.TrainJob(train_data=source["data"], model_dir=model_dir,
                                        init_checkpoint=source["model_dir"], overrides={"train_steps": 4}))
    saved = families.read_config(source["model_dir"])
    assert (plan.model, plan.preset, plan.model_config) == ("bert", "bert_tiny", saved["model_config"])
    assert (plan.init_checkpoint, plan.train_config.train_steps) == (source["model_dir"], 4)
    trainer = Trainer(families.make_task("bert", plan.model_config, plan.data), plan.train_config,
                      tf.distribute.get_strategy(), model_dir)
    assert trainer.restore() == 0
    assert families.init_from(trainer.model, source["model_dir"]) == []  # nothing fresh: the same model
    _, reference, _ = families.load_model(source["model_dir"])
    for mine, theirs in zip(trainer.model.weights, reference.weights, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=mine.path)
    assert int(trainer.optimizer.iterations.numpy()) == 0 and int(trainer.step.numpy()) == 0
    assert not os.path.exists(model_dir)  # nothing written until training starts

    caplog.set_level(logging.INFO, logger="models.training.train")
    assert train.main(["--train_data", source["data"], "--model_dir", model_dir, "--init_checkpoint",
                       source["model_dir"], "--set", "train_steps=2", *FAST]) == 0
    assert "initialised from" in caplog.text and "fresh weights" not in caplog.text
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-2")  # from step 0, not the source's step 2
    assert families.read_config(model_dir)["model_config"] == saved["model_config"]


@pytest.mark.slow
def test_a_model_dir_with_checkpoints_resumes_and_ignores_it(source, tmp_path, caplog):
    model_dir = str(tmp_path / "own")
    common = ["--model", "bert", "--preset", "bert_tiny", "--train_data", source["data"], "--model_dir", model_dir]
    assert train.main([*common, "--set", "train_steps=2", *FAST]) == 0
    caplog.set_level(logging.INFO, logger="models.training.train")
    assert train.main([*common, "--init_checkpoint", source["model_dir"], "--set", "train_steps=4", *FAST]) == 0
    assert f"{model_dir} holds checkpoints: resuming from them, ignoring --init_checkpoint" in caplog.text
    assert "initialised from" not in caplog.text
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-4")


def test_another_vocabulary_is_refused_and_nothing_written(source, tmp_path, capsys):
    other = write_dataset(str(tmp_path / "data41"), "bert", vocab_size=41)
    model_dir = str(tmp_path / "m")
    assert train.main(["--train_data", other, "--model_dir", model_dir, "--init_checkpoint", source["model_dir"],
                       "--set", "train_steps=2", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --init_checkpoint {source['model_dir']} has another vocabulary (40 entries")
    assert "(41 entries" in err and len(err.splitlines()) == 1
    assert not os.path.exists(model_dir)


def test_other_shapes_are_refused_and_nothing_written(source, tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    assert train.main(["--train_data", source["data"], "--model_dir", model_dir, "--init_checkpoint",
                       source["model_dir"], "--set", "intermediate_size=24", "--set", "train_steps=2", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --init_checkpoint: ") and "holds weights of other shapes" in err
    assert len(err.splitlines()) == 1
    assert not os.path.exists(model_dir) or os.listdir(model_dir) == []
    assert train.main(["--model", "gpt", "--train_data", source["data"], "--model_dir", model_dir,
                       "--init_checkpoint", source["model_dir"]]) == 2
    assert "holds a bert model, not gpt" in capsys.readouterr().err



def test_fresh_weights_are_those_the_source_lacks(source, tmp_path):
    """A weight of the target that the source lacks (one renamed here, as if the target had an extra head) is
    left as initialised and reported; the weights both have are taken."""
    _, reference, saved = families.load_model(source["model_dir"])
    target = families.make_task("bert", saved["model_config"], saved["data"]).build_model()
    renamed = target.weights[0]
    before = renamed.numpy()
    original = renamed.path
    renamed._path = "head_the_source_lacks/kernel"  # as if the target had an extra head
    try:
        assert families.init_from(target, source["model_dir"]) == ["head_the_source_lacks/kernel"]
    finally:
        renamed._path = original
    np.testing.assert_array_equal(renamed.numpy(), before)  # left as initialised
    for mine, theirs in zip(target.weights[1:], reference.weights[1:], strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=mine.path)
