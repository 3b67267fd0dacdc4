"""The one check of a job object's fields, made when the job is built: `checked`, the class decorator every job
of docs/python.md's table carries (and the config dataclasses they hold), and `JobFieldError`, what it raises.

A job's fields are checked against the dataclass's type annotations, then against the job's table of per-field
`Rule`s, before the dataclass's own `__init__` (and so its `__post_init__`) sees them:

- an unknown field, a missing one or too many positional values: `VocabJob: no field 'vocab_sizee'; ...`;
- a value of the wrong type: `LearnerConfig.vocab_size='400': expected int, got str`. A bool is no int, a str
  no bool, None only where the annotation is `X | None`; an int is a float; a list is a tuple (kept as one);
  an `os.PathLike` is a str (kept as its text); numpy's scalars are ints and floats;
- a value out of its range (counts >= 1, probabilities in [0, 1], ...) in the text the command prints for its
  flag (the fields are the flags): `--dupe_factor 0 is out of range; allowed: [1, inf)`;
- an output equal to an input, inside it (an input folder) or matched by it (an input pattern), compared as
  text (no file is looked at): `--output corpus.txt is --input corpus.txt: ...`.

Files are not looked at here: whether an input exists is the job's run-time check, made before it writes
anything. `JobFieldError` is a `UserError`: a command prints it as its one `error:` line (status 2).
"""

import dataclasses
import fnmatch
import functools
import inspect
import numbers
import os
import posixpath
import types
import typing
from typing import Callable

from commands.user_errors import UserError, check_range


class JobFieldError(UserError):
    """A job object built with a bad field: unknown or missing, of the wrong type, out of range, or an output
    that is (or lies inside) an input. The message names the field and the value, in one line."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a field must hold beyond its type (checked only when it is not None).

    Args:
      low, high, low_open, high_open: its range (`user_errors.check_range`'s).
      inputs: the fields this one (an output path) must not equal, lie inside or be matched by.
      convert: turns the given value into the field's (`TrainJob.overrides`' mapping into pairs) before the
        type check; its `UserError`, `TypeError` or `ValueError` is the field's error.
      check: a further check of the value that raises `UserError` (`--progress_seconds`' own).
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    inputs: tuple[str, ...] = ()
    convert: Callable | None = None
    check: Callable | None = None


COUNT = Rule(low=1)
NON_NEGATIVE = Rule(low=0)
PROBABILITY = Rule(low=0.0, high=1.0)


def field_range(flag: str, value, low=None, high=None, *, low_open: bool = False, high_open: bool = False):
    """`user_errors.check_range` for a range that depends on other fields, checked in a job's `__post_init__`:
    the same message, raised as `JobFieldError`."""
    try:
        return check_range(flag, value, low, high, low_open=low_open, high_open=high_open)
    except UserError as e:
        raise JobFieldError(str(e)) from None


def output_of(*inputs: str) -> Rule:
    """The rule of an output path that must not be (nor lie inside, nor match) any of the `inputs` fields."""
    return Rule(inputs=inputs)


def checked(rules: dict[str, Rule] | None = None):
    """Class decorator (above `@dataclasses.dataclass`): every construction of the class, `dataclasses.replace`
    included, checks the given fields (`check_arguments`) before the dataclass's `__init__` runs."""
    rules = rules or {}

    def decorate(cls):
        init = cls.__init__
        signature = inspect.signature(init)
        unknown_rules = set(rules) - {f.name for f in dataclasses.fields(cls) if f.init}
        if unknown_rules:
            raise TypeError(f"{cls.__name__}: rules for no field: {sorted(unknown_rules)}")

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            bound = check_arguments(cls, signature, rules, (self, *args), kwargs)
            init(*bound.args, **bound.kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


def check_arguments(cls, signature: inspect.Signature, rules: dict[str, Rule], args: tuple, kwargs: dict):
    """The constructor's arguments bound, defaults applied, each checked and converted; raises `JobFieldError`."""
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise JobFieldError(f"{cls.__name__}: no field {unknown[0]!r}; its fields: {', '.join(names)}")
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:  # a missing field, too many positional values, a field given twice
        raise JobFieldError(f"{cls.__name__}: {e}") from None
    bound.apply_defaults()
    hints = _hints(cls)
    for name in names:
        rule = rules.get(name, Rule())
        bound.arguments[name] = checked_value(cls.__name__, name, bound.arguments[name], hints[name], rule)
    for name, rule in rules.items():
        for source in rule.inputs:
            _check_output(name, bound.arguments[name], source, bound.arguments[source])
    return bound


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def checked_value(owner: str, name: str, value, annotation, rule: Rule = Rule()):
    """`value` for the field `owner.name` of type `annotation` under `rule`, converted; raises `JobFieldError`."""
    where = f"{owner}.{name}={_one_line(value)}"
    if rule.convert is not None and value is not None:
        try:
            value = rule.convert(value)
        except UserError as e:
            raise JobFieldError(str(e)) from None
        except (TypeError, ValueError) as e:
            raise JobFieldError(f"{where}: {e}") from None
    ok, value = conform(value, annotation)
    if not ok:
        raise JobFieldError(f"{where}: expected {describe(annotation)}, got {_got(value, annotation)}")
    if value is None:
        return value
    if rule.low is not None or rule.high is not None:
        field_range(f"--{name}", value, rule.low, rule.high, low_open=rule.low_open, high_open=rule.high_open)
    if rule.check is not None:
        try:
            rule.check(value)
        except UserError as e:
            raise JobFieldError(str(e)) from None
    return value


def conform(value, annotation) -> tuple[bool, object]:
    """`(True, value as the field keeps it)` when `value` is of the type `annotation`, else `(False, value)`."""
    origin = typing.get_origin(annotation)
    if annotation is typing.Any or annotation is object:
        return True, value
    if origin in (typing.Union, types.UnionType):
        for member in typing.get_args(annotation):
            ok, kept = conform(value, member)
            if ok:
                return True, kept
        return False, value
    if annotation is type(None) or annotation is None:
        return value is None, value
    if annotation is bool:
        return isinstance(value, bool), value
    if annotation is int:
        if isinstance(value, numbers.Integral) and not _is_bool(value):
            return True, value if type(value) is int else int(value)
        return False, value
    if annotation is float:
        if isinstance(value, numbers.Real) and not _is_bool(value):
            return True, value if type(value) in (int, float) else float(value)
        return False, value
    if annotation is str:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        return isinstance(value, str), value
    if origin is tuple:
        return _conform_tuple(value, typing.get_args(annotation))
    if origin is dict or annotation is dict:
        return isinstance(value, dict), value
    if isinstance(annotation, type):
        return isinstance(value, annotation), value
    raise TypeError(f"no check for the annotation {annotation!r}")


def _conform_tuple(value, args: tuple) -> tuple[bool, object]:
    if not isinstance(value, (tuple, list)):
        return False, value
    items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
    if len(items) != len(value):
        return False, value
    kept = []
    for item, annotation in zip(value, items):
        ok, item = conform(item, annotation)
        if not ok:
            return False, value
        kept.append(item)
    return True, tuple(kept)


def _got(value, annotation) -> str:
    """The type of a refused value, for messages: `str`; `tuple holding int 3` for a tuple's bad item."""
    if isinstance(value, (tuple, list)):
        kinds = [a for a in typing.get_args(annotation) if typing.get_origin(a) is tuple] or [annotation]
        args = typing.get_args(kinds[0]) if typing.get_origin(kinds[0]) is tuple else ()
        if len(args) == 2 and args[1] is Ellipsis:
            bad = next((item for item in value if not conform(item, args[0])[0]), None)
            if bad is not None:
                return f"{type(value).__name__} holding {type(bad).__name__} {_one_line(bad)}"
    return type(value).__name__


def _one_line(value, limit: int = 80) -> str:
    """`repr(value)` on one line, cut to about `limit` characters (a long array's repr spans lines)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _is_bool(value) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's bool is no int either


def describe(annotation) -> str:
    """`int`, `int or None`, `a tuple of str`, `a Cleaning`, ... for messages."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    if origin is tuple:
        args = typing.get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a tuple of {describe(args[0])}"
        return f"a tuple ({', '.join(describe(a) for a in args)})"
    if annotation in (int, float, str, bool, dict):
        return annotation.__name__
    name = getattr(annotation, "__name__", str(annotation))
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def _check_output(name: str, output: str | None, source: str, given: str | None) -> None:
    """`output` (field `name`) must not be the input `given` (field `source`), lie inside it or match it."""
    if not output or not given:
        return
    out, into = _normal(output), _normal(given)
    if out == into:
        problem = "is"
    elif out.startswith(into.rstrip("/") + "/"):
        problem = "is inside"
    elif any(c in into for c in "*?[") and fnmatch.fnmatchcase(out, into):
        problem = "matches"
    else:
        return
    raise JobFieldError(f"--{name} {_shown(output)} {problem} --{source} {_shown(given)}: the job would write "
                        f"where it reads; give another --{name}")


def _shown(path: str) -> str:
    """A path as the message shows it: as it is, or quoted when it holds a line break or another control."""
    return path if path.isprintable() else repr(path)


def _normal(path: str) -> str:
    """A path as text, absolute and normalised (local), or normalised after its scheme (`gs://b/x/../y`)."""
    if "://" in path:
        scheme, _, rest = path.partition("://")
        return f"{scheme}://{posixpath.normpath(rest)}"
    return os.path.normpath(os.path.abspath(path)).replace(os.sep, "/")
