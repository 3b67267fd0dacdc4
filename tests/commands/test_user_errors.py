"""`commands.user_errors`: the one path from a user error to `error: <message>` and its exit status (2, or
the status its class or instance carries), for errors raised here and for those that arrive as a Beam
worker's text; argparse's errors on the same path; and no product code printing an `error:` line itself."""

import ast
import os

import pytest

from commands.user_errors import OneLineParser, UserError, exit_status, run_to_summary, user_error
from tests.conftest import ROOT, raised_from

PRODUCT = ("commands", "preprocessing", "pipeline", "models", "serving", "downstream", "demo")


class Corrupt(UserError):
    status = 3


def test_the_status_is_two_unless_the_class_or_the_instance_says_another(capsys):
    for error, status in ((UserError("bad flag"), 2), (Corrupt("bad shard"), 3),
                          (UserError("server said no", status=1), 1), (Corrupt("x", status=5), 5)):
        assert exit_status(error) == status
        assert capsys.readouterr().err == f"error: {error}\n"


def test_a_cause_keeps_its_status_and_a_workers_text_gets_its_classs(capsys):
    assert user_error(raised_from(Corrupt("cut short"), RuntimeError("the pipeline failed"))) == ("cut short", 3)
    text = ("Traceback (most recent call last):\n  ...\ntests.commands.test_user_errors.Corrupt: shard 3 is cut short"
            " [while running 'Read/ReadLines']\n")
    assert exit_status(RuntimeError(text)) == 3
    assert capsys.readouterr().err == "error: shard 3 is cut short\n"
    with pytest.raises(KeyError):  # not a user error: re-raised, traceback kept
        exit_status(KeyError("x"))


def test_the_instance_status_survives_pickling():
    import pickle

    assert pickle.loads(pickle.dumps(UserError("m", status=4))).status == 4


def test_argparse_errors_take_the_one_path(capsys):
    parser = OneLineParser(prog="tool")
    parser.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["--n", "x"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "error: argument --n: invalid int value: 'x'\n"


def _error_prints(path: str) -> list[int]:
    """Lines of `print("error...")` / `print(f"error...")` calls in a file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and node.args:
            first = node.args[0]
            text = first.value if isinstance(first, ast.Constant) else \
                first.values[0].value if isinstance(first, ast.JoinedStr) and first.values and \
                isinstance(first.values[0], ast.Constant) else None
            if isinstance(text, str) and text.startswith("error"):
                lines.append(node.lineno)
    return lines


def test_no_product_code_prints_an_error_line_but_the_one_path():
    found = []
    for package in PRODUCT:
        for folder, _, names in os.walk(os.path.join(ROOT, package)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    found += [f"{os.path.relpath(path, ROOT)}:{n}" for n in _error_prints(path)]
    assert [place.split(":")[0] for place in found] == ["commands/user_errors.py"], found  # exit_status's


def test_run_to_summary_prints_the_summary_last_or_one_error_line(capsys):
    assert run_to_summary(lambda: {"steps": 2}) == 0
    assert capsys.readouterr().out.splitlines()[-1] == '{"steps": 2}'

    def refused():
        raise Corrupt("shard 3 is cut short")

    assert run_to_summary(refused) == 3
    assert capsys.readouterr() == ("", "error: shard 3 is cut short\n")
    with pytest.raises(KeyError):  # not a user error: its traceback is kept
        run_to_summary(lambda: {}["x"])
