"""`downstream.finetune` refuses what would mislabel or overwrite, in one line, before any module loads: eval
labels outside the training labels (named, with their lines), an output dir holding an earlier run without
`--overwrite`, a folder or a missing file given as task data."""

import os

import pytest

from downstream.finetune import cli as finetune
from downstream.finetune import task_data


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def files(tmp_path):
    train = _write(tmp_path / "train.tsv", ["pos\tgood film", "neg\tbad film", "pos\tfine"])
    (tmp_path / "module").mkdir()  # a folder that holds no module: the run stops when it loads it
    return train, tmp_path


def _main(train, eval_path, out, module, *more):
    return finetune.main(["--task", "classify", "--module", str(module), "--train", train, "--eval", eval_path,
                          "--output_dir", str(out), *more])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_eval_labels_outside_the_training_labels_are_refused_with_their_lines(files, capsys):
    train, root = files
    bogus = _write(root / "eval.tsv", ["pos\tgood", "bogus\tx", "", "neg\ty", "other\tz", "bogus\tw"])
    assert _main(train, bogus, root / "out", root / "module") == 2
    err = _one_line(capsys)
    assert err == (f"error: {bogus}: label(s) 'bogus', 'other' not among the training labels (neg, pos), "
                   f"line(s) 2, 5, 6: fix the labels, or train on data that has them")
    assert not os.path.exists(root / "out")


def test_pairs_are_checked_too_and_known_labels_pass(tmp_path):
    train = task_data.read_classification(_write(tmp_path / "t.tsv", ["a\tx\ty", "b\tx\tz"]), 2)
    labels = task_data.label_list(train)
    task_data.check_eval_labels(train, labels, "t.tsv")  # no error
    many = task_data.read_classification(_write(tmp_path / "e.tsv", [f"c{i}\tx\ty" for i in range(12)]), 2)
    with pytest.raises(task_data.TaskDataError, match=r"line\(s\) 1, 2, .*, 10, \.\.\. \(12 lines\)"):
        task_data.check_eval_labels(many, labels, "e.tsv")


def test_an_earlier_run_in_the_output_dir_needs_overwrite(files, capsys):
    train, root = files
    out = root / "out"
    (out / "serving" / "1").mkdir(parents=True)
    (out / "metrics.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    assert _main(train, train, out, root / "module", "--overwrite") == 2  # without its marks: not a fine-tuning's
    assert _one_line(capsys) == (f"error: --output_dir {out} holds serving, metrics.json, which no "
                                 f"downstream.finetune run wrote (there is no finetune_config.json): "
                                 f"downstream.finetune never replaces what it did not write; move them away, or "
                                 f"use another --output_dir")
    (out / "finetune_config.json").write_text("{}")
    assert _main(train, train, out, root / "module") == 2
    assert _one_line(capsys) == (f"error: --output_dir {out} holds an earlier fine-tuning (serving, metrics.json, "
                                 f"finetune_config.json): pass --overwrite to replace it, or use another "
                                 f"--output_dir")
    assert (out / "metrics.json").exists() and (out / "serving" / "1").is_dir()
    # --overwrite removes the earlier run's files only once this run has passed its checks: here it stops at the
    # fake module, so they stay (issue 38: they used to be deleted first)
    assert _main(train, train, out, root / "module", "--overwrite") == 2
    assert "no exported module" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["finetune_config.json", "metrics.json", "notes.txt", "serving"]


@pytest.mark.parametrize("which", ["--train", "--eval"])
def test_a_folder_or_a_missing_file_as_task_data_is_one_line(files, capsys, which):
    train, root = files
    for path, said in ((str(root), "is a folder; give the task file"), (str(root / "nope.tsv"), "no such file")):
        args = (path, train) if which == "--train" else (train, path)
        assert _main(*args, root / "out", root / "module") == 2
        err = _one_line(capsys)
        assert err.startswith(f"error: {which} {path}") and said in err


def test_the_readers_name_a_folder_in_one_line(tmp_path):
    with pytest.raises(task_data.TaskDataError, match="is a folder"):
        task_data.read_classification(str(tmp_path))
    with pytest.raises(task_data.TaskDataError, match="is a folder"):
        task_data.read_squad(str(tmp_path))
