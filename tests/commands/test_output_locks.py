"""One run per output folder (`commands.output_lock`): every command that writes a run into a folder holds its
lock, so a second run into a folder another one is writing is refused in one line naming the first (host,
PID) before it reads or writes anything, whatever the two commands; a lock left by a run that died is taken
over, and a finished run leaves no lock behind."""

import json
import logging
import os
import socket
import subprocess
import sys

import pytest

from commands.output_lock import RUN_LOCK, TRAIN_LOCK, Holder
from tests.conftest import TINY_TOKENS
from tests.fixtures.locking import held_lock
from tests.pipeline.test_job_faults import FN_API, documents


def _clean(tmp, out):
    from pipeline.clean import main
    return main, ["--input", _corpus(tmp), "--output_dir", out, *FN_API]


def _pretraining_data(tmp, out):
    from pipeline.pretraining_data import main
    vocab = tmp / "vocab.txt"
    vocab.write_text("\n".join(TINY_TOKENS) + "\n")
    return main, ["--model", "gpt", "--input", _corpus(tmp), "--vocab", str(vocab), "--output_dir", out,
                  "--max_seq_length", "8", "--seed", "2", *FN_API]


def _embed(tmp, out):
    from downstream.embed import main
    return main, ["--module", _folder(tmp / "export"), "--input", _corpus(tmp), "--output_dir", out, *FN_API]


def _finetune(tmp, out):
    from downstream.finetune.cli import main
    (tmp / "train.tsv").write_text("a\tgood film\nb\tbad film\n")
    return main, ["--task", "classify", "--module", _folder(tmp / "export"), "--train", str(tmp / "train.tsv"),
                  "--eval", str(tmp / "train.tsv"), "--output_dir", out]


def _convert_to(tmp, out):
    from models.convert.cli import main
    return main, ["--to", "hf_bert", "--model_dir", _folder(tmp / "run"), "--output", out]


def _convert_from(tmp, out):
    from models.convert.cli import main
    (tmp / "ckpt.index").write_text("")
    return main, ["--from", "bert_tf1", "--checkpoint", str(tmp / "ckpt"), "--model_dir", out]


def _export(tmp, out):
    from serving.export.cli import main
    return main, ["--model_dir", _folder(tmp / "run"), "--export_dir", out]


def _corpus(tmp) -> str:
    (tmp / "a.txt").write_text(documents(6))
    return str(tmp / "a.txt")


def _folder(path) -> str:
    path.mkdir(exist_ok=True)
    return str(path)


# command -> (its main and argv for (tmp_path, output folder), the output folder's flag, its lock file)
COMMANDS = {"pipeline.clean": (_clean, "--output_dir", RUN_LOCK),
            "pipeline.pretraining_data": (_pretraining_data, "--output_dir", RUN_LOCK),
            "downstream.embed": (_embed, "--output_dir", RUN_LOCK),
            "downstream.finetune": (_finetune, "--output_dir", RUN_LOCK),
            "models.convert --to": (_convert_to, "--output", RUN_LOCK),
            "models.convert --from": (_convert_from, "--model_dir", TRAIN_LOCK),
            "serving.export": (_export, "--export_dir", RUN_LOCK)}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_second_run_into_a_folder_in_use_is_refused_in_one_line(command, tmp_path, capsys):
    make, flag, lock_file = COMMANDS[command]
    out = str(tmp_path / "out")
    main, argv = make(tmp_path, out)
    with held_lock(out, lock_file) as pid:
        (tmp_path / "out" / "first.txt").write_text("the first run's")
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"error: {flag} {out} is in use by another ") and \
            f"(host {socket.gethostname()}, PID {pid}, started " in err, err
        assert sorted(os.listdir(out)) == sorted([lock_file, "first.txt"])  # nothing written, nothing removed
        assert (tmp_path / "out" / "first.txt").read_text() == "the first run's"


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.slow
def test_a_stale_lock_is_taken_over_and_a_finished_run_leaves_none(tmp_path, caplog, capsys):
    out = tmp_path / "out"
    out.mkdir()
    dead = Holder(socket.gethostname(), _gone_pid(), 1.0e9, "python -m pipeline.clean ...")
    (out / RUN_LOCK).write_text(json.dumps(vars(dead)))
    caplog.set_level(logging.WARNING, logger="commands.output_lock")
    main, argv = _clean(tmp_path, str(out))
    assert main(argv) == 0
    assert f"taking over the lock of a run that ended without releasing it (host {dead.host}, PID {dead.pid}" \
        in caplog.text
    assert sorted(os.listdir(out)) == ["00000-a.txt", "clean_report.json", "clean_report.md"]
    assert main(argv) == 2  # the next run meets the finished run, not a lock
    assert "already holds a run of pipeline.clean" in capsys.readouterr().err
