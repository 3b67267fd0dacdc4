"""Errors a user can cause: the one exception type for them, the argument checks that raise it, and how a
command's edge reports it.

A `UserError` says what is wrong, where, and what to do, in one line. Every command catches exceptions at
its edge with `exit_status`: a user error prints `error: <message>` on stderr and gives its exit status (2,
argparse's, unless its class says another: `status`, e.g. 3 for a corrupt data shard); any other exception
(an internal bug) propagates with its traceback. Library code past a command's edge only raises. A user error raised inside a Beam worker
reaches the launcher only as text (the worker's formatted traceback); `user_message` finds the innermost
`UserError` line in it, so the launcher prints the worker's message, not the stack. `--verbose`, or
`PRETRAINING_TRACEBACK=1` in the environment, prints the full traceback before the line.
"""

import argparse
import json
import math
import os
import re
import sys
import traceback

TRACEBACK_ENV = "PRETRAINING_TRACEBACK"
USAGE_ERROR = 2  # argparse's status for bad arguments; a user error's unless it says another


class UserError(ValueError):
    """Bad input or a bad environment that the user can fix (the message says how).

    `status` is the command's exit status for it: 2 (a usage error) unless a subclass, or the instance
    (`UserError(message, status=3)`), says another."""

    status = USAGE_ERROR

    def __init__(self, *args, status: int | None = None):
        super().__init__(*args)
        if status is not None:
            self.status = status


def _subclasses(cls) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub] + _subclasses(sub)
    return out


def user_message(exc: BaseException) -> str | None:
    """The one-line message of the user error behind `exc`, or None when `exc` is not one."""
    found = user_error(exc)
    return found[0] if found else None


def user_error(exc: BaseException) -> tuple[str, int] | None:
    """`(one-line message, exit status)` of the user error behind `exc`, or None when `exc` is not one.

    Looks at `exc` and its causes; then at their text, which is how errors from Beam workers arrive
    (`pipeline.corpus_io.InputFileError: cannot read ... [while running 'Read/ReadLines']`); such an error's
    status is its class's."""
    chain, seen = [], exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for e in chain:
        if isinstance(e, UserError):
            return _one_line(str(e)), e.status
    classes = {}
    for c in [UserError] + _subclasses(UserError):
        classes[f"{c.__module__}.{c.__qualname__}"] = classes.setdefault(c.__qualname__, c)
    names = sorted(classes, key=len, reverse=True)
    pattern = re.compile(r"(?:^|[\s'\"(])(%s): (.+)" % "|".join(re.escape(n) for n in names), re.MULTILINE)
    for e in chain:
        found = pattern.findall(str(e))
        if found:
            name, message = found[-1]  # the innermost: Beam appends outer wrappings after it
            return _one_line(message), classes[name].status
    return None


def _one_line(message: str) -> str:
    message = message.strip().splitlines()[0] if message.strip() else message
    return re.sub(r"(\s*\[while running '[^']*'\])+", "", message).replace("\\n", " ").strip()


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors take the one path: `error: <message>` on one line (no usage text), exit status 2."""

    def error(self, message):
        sys.exit(exit_status(UserError(message)))


def verbose_wanted(flag: bool = False) -> bool:
    return flag or os.environ.get(TRACEBACK_ENV, "") not in ("", "0")


def exit_status(exc: BaseException, verbose: bool = False) -> int:
    """At a command's edge, inside `except Exception as exc`: prints a user error as one line on stderr and
    returns its exit status (`UserError.status`); re-raises anything else (an internal bug keeps its
    traceback)."""
    found = user_error(exc)
    if found is None:
        raise exc
    if verbose_wanted(verbose):
        traceback.print_exception(exc, file=sys.stderr)
    print(f"error: {found[0]}", file=sys.stderr)
    return found[1]


def run_to_summary(call, verbose: bool = False) -> int:
    """A command's edge around its Python API: `call()` returns the result's JSON-ready summary, printed as the
    last line of stdout (exit status 0); a user error is one line (`exit_status`)."""
    try:
        summary = call()
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, verbose)
    print(json.dumps(summary))
    return 0


# --- argument checks (each raises UserError naming the flag and the allowed range) -------------------------


def check_range(flag: str, value, low=None, high=None, *, low_open: bool = False, high_open: bool = False):
    """`value` must be a finite number in the range; returns it."""
    bounds = f"{'(' if low_open else '['}{'-inf' if low is None else low}, {'inf' if high is None else high}" \
             f"{')' if high_open or high is None else ']'}"
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{flag} {value} is not a finite number; allowed: {bounds}")
    if (low is not None and (value < low or (low_open and value == low))) or \
            (high is not None and (value > high or (high_open and value == high))):
        raise UserError(f"{flag} {value} is out of range; allowed: {bounds}")
    return value


class _LocalFiles:
    """`tf.io.gfile`'s `exists`/`isdir` for a local path, without importing TensorFlow (seconds of start-up
    for a job that needs no TensorFlow, such as `pipeline.clean`)."""

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)


def _gfile(path: str):
    """`os.path` for a local path; `tf.io.gfile` for any other (gs://, ...), in the same calls."""
    if not path or _is_local(path):
        return _LocalFiles
    import tensorflow as tf

    return tf.io.gfile


def _is_local(path: str) -> bool:
    return "://" not in path


def require_file(flag: str, path: str) -> str:
    """`path` must be an existing file (not a folder)."""
    gfile = _gfile(path)
    if not path or not gfile.exists(path):
        raise UserError(f"{flag} {path}: no such file")
    if gfile.isdir(path):
        raise UserError(f"{flag} {path} is a folder; give a file")
    return path


def require_dir(flag: str, path: str) -> str:
    """`path` must be an existing folder."""
    gfile = _gfile(path)
    if not path or not gfile.exists(path):
        raise UserError(f"{flag} {path}: no such folder")
    if not gfile.isdir(path):
        raise UserError(f"{flag} {path} is a file; give a folder")
    return path


def writable_dir(flag: str, path: str) -> str:
    """`path` must be a folder that can be written, or creatable; nothing is created. Remote paths (gs://)
    are checked only for not being a file."""
    gfile = _gfile(path)
    if gfile.exists(path) and not gfile.isdir(path):
        raise UserError(f"{flag} {path} is a file; give a folder (new or existing)")
    if _is_local(path):
        _check_local_writable(flag, os.path.abspath(path))
    return path


def writable_file(flag: str, path: str) -> str:
    """`path` must be a file that can be (over)written: not a folder, in a writable or creatable folder."""
    gfile = _gfile(path)
    if not path or path.endswith(("/", os.sep)) or (gfile.exists(path) and gfile.isdir(path)):
        raise UserError(f"{flag} {path} is a folder; give a file name")
    if _is_local(path):
        _check_local_writable(flag, os.path.abspath(path), file=True)
    return path


def _check_local_writable(flag: str, path: str, file: bool = False) -> None:
    if file and os.path.exists(path) and not os.access(path, os.W_OK):
        raise UserError(f"{flag} {path} cannot be written (permission denied)")
    folder = os.path.dirname(path) if file else path
    while not os.path.exists(folder):  # the nearest existing ancestor decides
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise UserError(f"{flag} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path} cannot be written ({folder}: permission denied)")
