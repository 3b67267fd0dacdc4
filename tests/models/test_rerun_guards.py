"""Training runs are described truthfully (issue 38): a rerun on other `--train_data` is refused unless
`--allow_change train_data`, and then recorded and read from the new data's start; an `--allow_change` name
that is no field is refused on any model_dir; a `.train.lock` that is a folder or cannot be opened is one
line. Each refusal comes before a model is built (no training here: a copy of the shared tiny model_dir)."""

import json
import os
import shutil

import pytest

from models.training import rerun, train
from commands.output_lock import TRAIN_LOCK as LOCK_FILE, model_dir_lock
from commands.user_errors import UserError
from tests.fixtures.tiny_models import copy_of


@pytest.fixture
def gpt_run(tiny_models, tmp_path):
    """A private copy of the tiny GPT model_dir (2 steps trained) and its training data pattern."""
    model_dir = copy_of(tiny_models["gpt"].model_dir, str(tmp_path / "run"))
    with open(os.path.join(model_dir, "config.json")) as f:
        return model_dir, json.load(f)["data"]["train_data"]


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if line.startswith("error: ")]
    assert len(lines) == 1 and not any("Traceback" in line for line in err), err
    return lines[0]


def test_other_training_data_is_refused_unless_allowed(gpt_run, tmp_path, capsys):
    model_dir, pattern = gpt_run
    moved = shutil.copytree(os.path.dirname(pattern), tmp_path / "other_data")  # the same shards, elsewhere
    other = os.path.join(moved, os.path.basename(pattern))
    with open(os.path.join(model_dir, "config.json")) as f:
        before = f.read()
    assert train.main(["--train_data", other, "--model_dir", model_dir]) == 2
    line = _error(capsys)
    assert f"train_data={pattern!r} -> {other!r}" in line and "pass --allow_change train_data" in line
    with open(os.path.join(model_dir, "config.json")) as f:
        assert f.read() == before  # config.json still describes the data it was trained on


def test_allowed_data_is_recorded_and_read_from_its_start():
    from models.config import TrainConfig

    saved = TrainConfig(train_steps=4)
    changes = rerun.check_rerun("m", 4, saved, TrainConfig(train_steps=8), {"train_data"}, [],
                                {"train_data": "a/*.tfrecord"}, {"train_data": "b/*.tfrecord"})
    assert changes == [{"from_step": 4, "train_data": ["a/*.tfrecord", "b/*.tfrecord"]}]
    assert rerun.data_start_step(changes) == 4  # step 4 of b: nothing of b consumed yet (was: 4 batches skipped)
    assert rerun.data_start_step([{"from_step": 2, "learning_rate": [1, 2]}]) == 0
    assert rerun.check_rerun("m", 4, saved, TrainConfig(train_steps=8), set(), [], {"train_data": "a/*.tfrecord"},
                             {"train_data": os.path.abspath("a/*.tfrecord")}) == []  # the same files


def test_an_unknown_allow_change_name_is_refused_on_a_new_model_dir(gpt_run, tmp_path, capsys):
    _, pattern = gpt_run
    new = tmp_path / "new"
    assert train.main(["--model", "gpt", "--preset", "gpt_tiny", "--train_data", pattern, "--model_dir", str(new),
                       "--allow_change", "learnin_rate"]) == 2
    assert _error(capsys).startswith("error: --allow_change learnin_rate: no such training field; fields: ")
    assert not new.exists()


def test_a_lock_file_that_is_a_folder_is_one_line(gpt_run, capsys):
    model_dir, pattern = gpt_run
    os.mkdir(os.path.join(model_dir, LOCK_FILE))
    assert train.main(["--train_data", pattern, "--model_dir", model_dir]) == 2
    assert _error(capsys) == (f"error: --model_dir {model_dir}: its lock file {os.path.join(model_dir, LOCK_FILE)} "
                              f"is a folder: if no training run uses this model_dir, remove it and rerun")
    if os.geteuid() != 0:  # root opens any file
        os.rmdir(os.path.join(model_dir, LOCK_FILE))
        open(os.path.join(model_dir, LOCK_FILE), "w").close()
        os.chmod(os.path.join(model_dir, LOCK_FILE), 0)
        with pytest.raises(UserError, match="cannot be opened"):
            model_dir_lock(model_dir).acquire()
