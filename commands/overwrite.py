"""The one `--overwrite` contract of every command that writes a run into an output folder, and what a folder
holds by its files: `pipeline.clean`, `pipeline.pretraining_data`, `downstream.embed`, `downstream.finetune`
and `models.convert` call it, `serving.export` and `models.convert --from` refuse another kind of output
with it (`refuse_other`), and commands that read a model_dir name what a folder holds instead
(`require_model_dir`); nothing else decides.

A finished run leaves a record that names what it wrote (`clean_report.json`'s and `metadata.json`'s
`files`); fine-tuning writes a fixed set of names; a converter's record is the format's config file, which
the format's other files accompany. An export and a training model_dir are told by their files alone.
`plan(...)` runs with the command's other checks, before anything is written or removed, and refuses in one
line (`UserError`):
  - a folder that holds another kind of output (an export, a training model_dir, another command's run, a
    checkpoint in one of the converter's formats), naming what it holds, with or without `--overwrite`;
  - a folder that holds an earlier run of this command, without `--overwrite`;
  - an output folder that is the folder of an input file, or that the input pattern reaches into (a
    rerun would read this run's outputs as its input), or that is (inside) an input folder such as
    fine-tuning's `--module`;
  - a record that lists anything but the plain name of a file beside it that its command writes (`../../x`,
    an absolute path, `sub/x`, a name such as `notes.txt` that the command never writes); a symbolic link
    or a folder where the command writes or would remove a file (an output linked to the input or into a
    model_dir; the user's `sub/`): a run never writes through a link nor removes one, and `--overwrite`
    removes no folder but the command's own (fine-tuning's `model/`, a staging folder);
  - for a command without a record (fine-tuning), its names without the files that mark its run
    (`marks`): the user's own `model/`, not an earlier fine-tuning.
Every check is made under the folder's lock (`commands.output_lock`), which the command takes first: no
other run writes into the folder meanwhile. The command calls `Plan.remove()` only once every check has
passed, just before it writes: it removes the earlier run's own outputs (the files its record lists, the
record and its fixed companions) and this command's own unfinished leftovers (hidden `.incomplete` files,
`.staging-*` folders), the record first, so a half-cleared folder never looks finished. Nothing else in the
folder is touched. `serving.export` refuses links where it writes with `refuse_links`.

Example:
    plan = overwrite.plan(args.output_dir, overwrite.CLEAN, args.overwrite, input_files=files)
    ...  # every other check
    plan.remove()
"""

import dataclasses
import json
import os
import re
import shutil
from typing import Callable

from commands.output_lock import TRAIN_LOCK
from commands.user_errors import UserError


@dataclasses.dataclass(frozen=True)
class OutputKind:
    """What one command writes into its output folder.

    Args:
      command: the command, for messages (`pipeline.clean`).
      earlier: how a refusal names an earlier run of it (`already holds a run of pipeline.clean`).
      record: the file that lists a finished run's outputs (None: `fixed` is the list).
      listed: the record's JSON -> the names of the outputs it lists.
      is_record: tells this command's record from another command's file of the same name.
      companions: names written with the record by every run (a report's `.md`).
      fixed: names the command always writes (fine-tuning's `model/`, `serving/`, ...).
      folders: those of its names that are folders (fine-tuning's `model/`, `serving/`); every other name it
        writes or removes is a file.
      outputs: a regular expression of the names its record may list (the files the command writes).
      leftovers: a regular expression of this command's own files of an unfinished run (no record yet).
      marks: without a record, names that mark a run of this kind to another command (fine-tuning's
        `finetune_config.json`; a `model/` folder alone is anybody's).
      debris: a regular expression of the hidden remains of this command's failed runs (a staging folder, an
        `.incomplete` file): the next run removes them, `--overwrite` or not.
      holds: how a refusal names a folder of this kind (`a keras-hub preset in the keras_hub format`); default
        `a run of <command>`.
      run: how a refusal names what this command writes (`a model_dir`); default `a <command> run`.
      evidence: `evidence(folder, names)` -> the names that show a folder of this kind, for the kinds told by
        their files alone (an export, a model_dir); None: the record, or `marks`, tells it.
    """

    command: str
    earlier: str
    record: str | None = None
    listed: Callable[[dict], list] = lambda record: []
    is_record: Callable[[dict], bool] = lambda record: True
    companions: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    outputs: str = r"(?!)"
    leftovers: str = r"(?!)"
    marks: tuple[str, ...] = ()
    debris: str = r"(?!)"
    holds: str = ""
    run: str = ""
    evidence: Callable[[str, set[str]], list[str]] | None = None

    @property
    def described(self) -> str:
        return self.holds or f"a run of {self.command}"

    @property
    def output(self) -> str:
        return self.run or f"a {self.command} run"

    @property
    def names(self) -> tuple[str, ...]:
        """The names a run of this kind writes (the record and its companions, or the fixed names)."""
        return ((self.record,) if self.record else ()) + self.companions + self.fixed

    def finished(self, folder: str, names: set[str]) -> dict | None:
        """The record of a finished run of this kind in `folder`, or None."""
        if not self.record or self.record not in names:
            return None
        record = _read_json(os.path.join(folder, self.record))
        return record if isinstance(record, dict) and self.is_record(record) else None


def _shards(prefix: str) -> str:
    return rf"{prefix}-\d{{5}}-of-\d{{5}}\.tfrecord(\.gz)?"


def _incomplete(prefix: str) -> str:
    return rf"\.{prefix}-\d{{5}}-of-\d{{5}}\.tfrecord(\.gz)?\.incomplete"


CLEAN = OutputKind("pipeline.clean", "already holds a run of pipeline.clean", "clean_report.json",
                   listed=lambda r: list(r.get("files", [])), is_record=lambda r: "counters" in r,
                   companions=("clean_report.md",), outputs=r"\d{5}-.+", debris=r"\.\d{5}-.+\.incomplete")
PRETRAINING_DATA = OutputKind(
    "pipeline.pretraining_data", "already holds a run of pipeline.pretraining_data", "metadata.json",
    listed=lambda r: list(r.get("files", [])), is_record=lambda r: "schema_version" in r,
    companions=("vocab.txt", "cleaning.json", "cleaning.md"), outputs=_shards("(bert|gpt|bilm)"),
    leftovers=_shards("(bert|gpt|bilm)"), debris=_incomplete("(bert|gpt|bilm)"))
EMBED = OutputKind("downstream.embed", "already holds a run of downstream.embed", "metadata.json",
                   listed=lambda r: list(r.get("files", [])), is_record=lambda r: "module" in r and "choices" in r,
                   outputs=_shards("embeddings"), leftovers=_shards("embeddings"),
                   debris=r"\.staging-[0-9a-f]{12}|" + _incomplete("embeddings"))
FINETUNE = OutputKind("downstream.finetune", "holds an earlier fine-tuning",
                      fixed=("model", "serving", "metrics.json", "finetune_config.json", "labels.json",
                             "predictions.json"), folders=("model", "serving"),
                      marks=("finetune_config.json", "labels.json"))


def _export_files(folder: str, names: set[str]) -> list[str]:
    if "export.json" in names or ("hub" in names and _isdir(os.path.join(folder, "hub"))):
        return [n for n in ("export.json", "hub/", "serving/") if n.rstrip("/") in names]
    return []


def _model_dir_files(folder: str, names: set[str]) -> list[str]:
    if "config.json" in names and ({"checkpoint", TRAIN_LOCK} & names or any(n.startswith("ckpt-") for n in names)):
        return ["config.json"] + sorted({"checkpoint", TRAIN_LOCK} & names)
    return []


EXPORT = OutputKind("serving.export", "holds an earlier export", holds="an export of serving.export",
                    evidence=_export_files)
MODEL_DIR = OutputKind("models.training.train", "holds a model_dir",
                       holds="a training model_dir of models.training.train", run="a model_dir",
                       evidence=_model_dir_files)


def _converted(fmt: str, what: str, record: str, is_record: Callable[[dict], bool], companions: tuple[str, ...],
               folders: tuple[str, ...] = ()):
    """What `models.convert --to fmt` writes: the format's config file as the record, its other files beside."""
    return OutputKind(f"models.convert --to {fmt}", f"already holds {what}", record, is_record=is_record,
                      companions=companions, folders=folders, debris=r"\.convert-staging-[0-9a-f]{12}",
                      holds=f"{what} in the {fmt} format")


def _keras_hub_object(record: dict) -> bool:
    return str(record.get("module", "")).startswith("keras_hub.") or \
        str(record.get("registered_name") or "").startswith("keras_hub>")


HF_BERT = _converted("hf_bert", "a HuggingFace BERT checkpoint", "config.json",
                     lambda r: r.get("model_type") == "bert",
                     ("model.safetensors", "tokenizer_config.json", "vocab.txt"))
HF_GPT = _converted("hf_gpt", "a HuggingFace openai-gpt checkpoint", "config.json",
                    lambda r: r.get("model_type") == "openai-gpt",
                    ("model.safetensors", "tokenizer_config.json", "vocab.txt"))
BERT_TF1 = _converted("bert_tf1", "a google-research BERT checkpoint", "bert_config.json",
                      lambda r: "num_hidden_layers" in r and "model_type" not in r,
                      ("bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "checkpoint", "vocab.txt"))
KERAS_HUB = _converted("keras_hub", "a keras-hub preset", "config.json", _keras_hub_object,
                       ("assets", "metadata.json", "model.weights.h5", "preprocessor.json", "tokenizer.json"),
                       folders=("assets",))
BILM_HDF5 = _converted("bilm_hdf5", "a bilm-tf checkpoint", "options.json",
                       lambda r: "lstm" in r and "char_cnn" in r, ("vocab.txt", "weights.hdf5"))
CONVERTED = {"hf_bert": HF_BERT, "hf_gpt": HF_GPT, "bert_tf1": BERT_TF1, "keras_hub": KERAS_HUB,
             "bilm_hdf5": BILM_HDF5}
# In the order a folder is told: an export or a model_dir first (their files say so whatever else is there).
KINDS = (EXPORT, MODEL_DIR, CLEAN, PRETRAINING_DATA, EMBED, FINETUNE, *CONVERTED.values())


def _read_json(path: str):
    try:
        with _open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _is_local(path: str) -> bool:
    return "://" not in path


def _open(path: str):
    if _is_local(path):
        return open(path, encoding="utf-8")
    import tensorflow as tf

    return tf.io.gfile.GFile(path)


def _listdir(folder: str) -> set[str]:
    if _is_local(folder):
        return set(os.listdir(folder)) if os.path.isdir(folder) else set()
    import tensorflow as tf

    return {n.rstrip("/") for n in tf.io.gfile.listdir(folder)} if tf.io.gfile.isdir(folder) else set()


def _isdir(path: str) -> bool:
    if _is_local(path):
        return os.path.isdir(path)
    import tensorflow as tf

    return tf.io.gfile.isdir(path)


def _remove(path: str) -> None:
    if _is_local(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
        return
    import tensorflow as tf

    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def other_outputs(folder: str, names: set[str], kind: OutputKind | None) -> str | None:
    """What another kind of output than `kind` `folder` holds (`an export of serving.export (export.json,
    hub/)`), or None."""
    for other in KINDS:
        if other is kind:
            continue
        present = _evidence(folder, names, other)
        if present:
            return f"{other.described} ({', '.join(present[:3])}{', ...' if len(present) > 3 else ''})"
    return None


def _evidence(folder: str, names: set[str], kind: OutputKind) -> list[str]:
    """The names that show `folder` holds a run of `kind` (finished or not); [] when none does."""
    if kind.evidence is not None:
        return kind.evidence(folder, names)
    present = _own_names(folder, names, kind)
    return present if present and (kind.record or set(kind.marks) & names) else []


def _own_names(folder: str, names: set[str], kind: OutputKind) -> list[str]:
    """The names in `folder` that belong to a run of `kind` (finished or not); [] when none does."""
    record = kind.finished(folder, names)
    if record is not None:
        listed = [n for n in kind.listed(record) if isinstance(n, str) and _plain_name(n)]
        own = [kind.record] + [n for n in (*kind.companions, *listed) if n in names]
    else:
        own = [n for n in kind.fixed if n in names]
    pattern = re.compile(kind.leftovers)
    own += sorted(n for n in names if pattern.fullmatch(n) and n not in own)
    return own


def _plain_name(name: str) -> bool:
    """A record may only name files directly in its folder (never `..`, a path or an absolute one)."""
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `--overwrite` will remove: `names` (in `output_dir`), the record first."""

    output_dir: str
    names: tuple[str, ...]

    def remove(self) -> None:
        for name in self.names:
            _remove(os.path.join(self.output_dir, name))


def plan(output_dir: str, kind: OutputKind, overwrite: bool, input_files=(), reads=None,
         input_folders: dict[str, str] | None = None, flag: str = "--output_dir") -> Plan:
    """Checks `output_dir` for `kind`'s run (see the module docstring); raises `UserError`, else returns the
    `Plan` of what `--overwrite` removes (nothing when the folder holds no earlier run).

    Args:
      input_files: the files the run reads (a folder holding one of them is refused).
      reads: `reads(path)` is True when the command's input pattern would match `path` (a folder it reaches
        into is refused).
      input_folders: flag -> an input folder (fine-tuning's `--module`): the output may be neither it nor
        inside it.
    """
    check_not_in_inputs(output_dir, kind, input_files, reads, input_folders or {}, flag)
    names = refuse_other(output_dir, kind, overwrite, flag)
    if not names:
        return Plan(output_dir, ())
    own = _own_names(output_dir, names, kind)
    debris = sorted(n for n in names if re.fullmatch(kind.debris, n))
    record = kind.finished(output_dir, names)
    refuse_unsafe(output_dir, kind, names, record, own + debris, flag)
    if not own:
        return Plan(output_dir, tuple(debris))
    if kind.marks and record is None and not set(kind.marks) & names:
        shown = ", ".join(own[:3]) + (", ..." if len(own) > 3 else "")
        raise UserError(f"{flag} {output_dir} holds {shown}, which no {kind.command} run wrote (there is no "
                        f"{kind.marks[0]}): {kind.command} never replaces what it did not write; move "
                        f"{'it' if len(own) == 1 else 'them'} away, or use another {flag}")
    inputs = {os.path.abspath(f) for f in input_files if _is_local(f)}
    clash = [n for n in own if os.path.abspath(os.path.join(output_dir, n)) in inputs]
    if clash:
        raise UserError(f"{flag} {output_dir}: its earlier run's {clash[0]} is an input of this run; give another "
                        f"{flag}")
    if not overwrite:
        shown = ", ".join(own[:3]) + (", ..." if len(own) > 3 else "")
        raise UserError(f"{flag} {output_dir} {kind.earlier} ({shown}): pass --overwrite to replace it, or use "
                        f"another {flag}")
    return Plan(output_dir, tuple(own + debris))


def refuse_unsafe(output_dir: str, kind: OutputKind, names: set[str], record: dict | None, removed: list[str],
                  flag: str = "--output_dir") -> None:
    """Raises `UserError` for what `kind`'s run may neither remove nor write through in `output_dir` (holding
    `names`; `record`: its finished run's record, or None; `removed`: what `--overwrite` would remove): a
    record entry that is no plain name of a file beside the record (`../../x`, an absolute path), or that
    the command never writes; a symbolic link among the command's names, the record's or `removed`; a folder
    among them that is none of the command's own folders."""
    listed = kind.listed(record) if record is not None else []
    for entry in listed:
        if not (isinstance(entry, str) and _plain_name(entry)):
            raise UserError(f"{flag} {output_dir}: its {kind.record} lists {entry!r}, which is not a file name of "
                            f"this folder (a record names only files beside it): remove {kind.record} if no "
                            f"{kind.command} run wrote it, or use another {flag}")
    if _is_local(output_dir):
        touched = sorted((set(kind.names) | set(listed) | set(removed)) & names)
        refuse_links(output_dir, touched, kind.command, flag)
        for name in touched:
            path = os.path.join(output_dir, name)
            if os.path.isdir(path) and name not in kind.folders and not re.fullmatch(kind.debris, name):
                raise UserError(f"{flag} {output_dir}: {name} is a folder, which {kind.command} never writes nor "
                                f"removes; move it away, or use another {flag}")
    for entry in listed:
        if not re.fullmatch(kind.outputs, entry):
            raise UserError(f"{flag} {output_dir}: its {kind.record} lists {entry!r}, which {kind.command} never "
                            f"writes: remove {kind.record} if no {kind.command} run wrote it, or use another {flag}")


def refuse_links(folder: str, names, command: str, flag: str = "--output_dir") -> None:
    """Raises `UserError` when one of `names` (paths in the local `folder`, which `command` writes, replaces or
    removes) is a symbolic link: written through, it would change what it points to (an input, a model_dir)."""
    for name in names:
        path = os.path.join(folder, name)
        if os.path.islink(path):
            raise UserError(f"{flag} {folder}: {name} is a symbolic link (to {os.readlink(path)}): {command} never "
                            f"writes through a link nor removes one; move it away, or use another {flag}")


def refuse_other(output_dir: str, kind: OutputKind, overwrite: bool = False, flag: str = "--output_dir") -> set[str]:
    """Raises `UserError` when `output_dir` holds another kind of output than `kind`, naming it; returns the
    names in it (none when it does not exist). For commands with rules of their own for an earlier run of
    theirs (`serving.export`, `models.convert --from`)."""
    names = _listdir(output_dir)
    other = other_outputs(output_dir, names, kind) if names else None
    if other:
        also = f" (--overwrite replaces only an earlier {kind.command} run)" if overwrite else ""
        raise UserError(f"{flag} {output_dir} holds {other}, not {kind.output}: give another {flag}{also}")
    return names


def require_model_dir(folder: str, flag: str = "--model_dir") -> None:
    """Raises `UserError` naming what `folder` holds when its `config.json` is not a model_dir's (it names no
    model family): another kind of output (a HuggingFace checkpoint, an export, ...), or a config.json of
    something else. A folder without config.json that holds nothing known is left to the model_dir's reader
    (`no config.json in ...`)."""
    names = _listdir(folder)
    config = _read_json(os.path.join(folder, "config.json")) if "config.json" in names else None
    if isinstance(config, dict) and isinstance(config.get("model"), str) and isinstance(config.get("model_config"),
                                                                                        dict):
        return
    held = other_outputs(folder, names, MODEL_DIR)
    if held is None and "config.json" not in names:
        return
    what = f"holds {held}" if held else "has a config.json that names no model family"
    raise UserError(f"{flag} {folder} {what}, not a model_dir of models.training.train or models.convert --from: "
                    f"give a model_dir (models.convert --from FORMAT makes one of a checkpoint)")


def _norm(path: str) -> str:
    return os.path.realpath(path) if _is_local(path) else path.rstrip("/")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def check_not_in_inputs(output_dir: str, kind: OutputKind, input_files=(), reads=None,
                        input_folders: dict[str, str] | None = None, flag: str = "--output_dir") -> None:
    """Refuses an output folder that a rerun would read as input (see `plan`)."""
    out = _norm(output_dir)
    for path in input_files:
        if _norm(os.path.dirname(path) or ".") == out:
            raise UserError(f"{flag} {output_dir} is the folder of the input file {path}: a rerun would read this "
                            f"run's outputs as input; give another {flag}")
    if reads is not None and reads(os.path.join(output_dir, _probe(kind))):
        raise UserError(f"{flag} {output_dir} lies where the input pattern reaches: a rerun would read this run's "
                        f"outputs as input; give another {flag}")
    for input_flag, folder in (input_folders or {}).items():
        if folder and _inside(out, _norm(folder)):
            raise UserError(f"{flag} {output_dir} is {'' if out == _norm(folder) else 'inside '}{input_flag} "
                            f"{folder}, an input of this run: give another {flag}")


def _probe(kind: OutputKind) -> str:
    """A name like the outputs `kind` writes, to ask whether the input pattern would match them."""
    return {"pipeline.clean": "00000-probe.txt", "downstream.embed": "embeddings-00000-of-00001.tfrecord"}.get(
        kind.command, "bert-00000-of-00001.tfrecord")


def remove_unfinished(output_dir: str, kind: OutputKind, debris: bool = True) -> None:
    """After a failed run of `kind`: removes what it wrote (its record and companions, its own unfinished
    files, and with `debris` its hidden remains), the record first; nothing else."""
    names = _listdir(output_dir)
    own = [n for n in (kind.record, *kind.companions, *kind.fixed) if n and n in names]
    pattern = re.compile(kind.leftovers + (f"|{kind.debris}" if debris else ""))
    for name in own + sorted(n for n in names if pattern.fullmatch(n) and n not in own):
        _remove(os.path.join(output_dir, name))


def existing(folder: str) -> set[str]:
    """The names in `folder` (none when it does not exist)."""
    return _listdir(folder)
