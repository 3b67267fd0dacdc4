"""Convert public checkpoints into model_dirs, and model_dirs back into those formats.

    python -m models.convert --from {bert_tf1,hf_bert,keras_hub,hf_gpt,bilm_hdf5} --checkpoint PATH \\
        [--config FILE] [--vocab FILE [--allow_vocab_change]] --model_dir DIR [--max_seq_length N] \\
        [--max_predictions_per_seq N] [--cased|--lower_case]
    python -m models.convert --to {bert_tf1,hf_bert,keras_hub,hf_gpt,bilm_hdf5} --model_dir DIR --output DIR \\
        [--overwrite]

Formats: `bert_tf1`, google-research/bert (`bert_model.ckpt` + `bert_config.json` + `vocab.txt`);
`hf_bert`, HuggingFace BERT in safetensors (`model.safetensors` + `config.json` + `vocab.txt`, read without
torch); `keras_hub`, a keras-hub `BertBackbone` preset folder (`models/convert/keras_hub_bert.py`);
`hf_gpt`, HuggingFace `openai-gpt` in safetensors (`models/convert/hf_gpt.py`); `bilm_hdf5`, allenai/bilm-tf
(`weights.hdf5` + `options.json`; a WordPiece `vocab.txt` for the softmax and the data). `--config` and
`--vocab` default to those files beside `--checkpoint`.

`--from` writes a model_dir as `models.training.train` does (config.json with `data.train_data` "converted from
...", vocab.txt, a model-only checkpoint `ckpt-0`): `models.training.train --model_dir DIR --train_data ...`
continues pretraining it, `serving.export` exports it, fine-tuning loads it. Every weight is mapped by name;
weights a checkpoint lacks (BERT's pooler or heads, the biLM's softmax) keep a fresh initialisation and are
listed. Casing: `--cased`/`--lower_case`, else HuggingFace's `tokenizer_config.json`, else uncased unless the
vocabulary has upper-case entries. `--to` writes the files the format's own tools read. Exit status 2 on bad
input, with the reason in one line (a config that does not match the weights names the first tensor and both
shapes; an unreadable or truncated checkpoint names the file); `--verbose` adds the traceback. `--to` writes a
model exactly or not at all: a config field the format cannot carry (an untied output in `bert_tf1`, pre-LN
blocks in `hf_bert`, an output bias in `hf_gpt`) is refused naming it, before anything is written
(`models/convert/formats.py`).

Vocabulary: a `--vocab` that differs from the checkpoint's own (`vocab.txt` beside it, a preset's
`assets/tokenizer/vocabulary.txt`) is refused, saying in how many lines, unless `--allow_vocab_change`; one
that nothing can check (the checkpoint has no vocabulary of its own) is named on stderr and recorded in
config.json (`models/convert/vocabularies.py`). Folders: a `--model_dir` (`--from`) or `--output` (`--to`) that
holds another kind of output (a model_dir, an export, a preset, another format's checkpoint) is refused naming
it; `--to` replaces an earlier output of its format only with `--overwrite`, and never a file it did not write
(`models/convert/outputs.py`, `commands/overwrite.py`).
"""

import argparse
import contextlib
import dataclasses
import json
import os
import sys

from commands.job_fields import COUNT, checked, output_of
from commands.tf_startup import quiet_command
from models.convert.formats import FORMATS

BERT_DEFAULT_SEQ, BERT_DEFAULT_PREDICTIONS, BILM_DEFAULT_SEQ = 128, 20, 20


@checked({"max_seq_length": COUNT, "max_predictions_per_seq": COUNT, "model_dir": output_of("checkpoint")})
@dataclasses.dataclass(frozen=True)
class ImportJob:
    """`--from`: writes the model_dir `model_dir` from the checkpoint `checkpoint` in format `fmt`.

    Args:
      fmt: one of `FORMATS`.
      checkpoint: the checkpoint (file, prefix or folder).
      model_dir: the model_dir to write: new, or one without checkpoints.
      config: the checkpoint's config file (None: the format's name beside `checkpoint`).
      vocab: a `vocab.txt` (None: the checkpoint's own); one that differs from the checkpoint's own is refused
        unless `allow_vocab_change`.
      max_seq_length: recorded for export and checks (None: the preset's, else BERT 128, the biLM's unroll).
      max_predictions_per_seq: recorded for BERT.
      lower_case: None: from the checkpoint's tokenizer config, else from the vocabulary's entries.

    Example:
      import_checkpoint(ImportJob("hf_bert", "all-minilm-l6-v2/", "runs/minilm"))
    """

    fmt: str
    checkpoint: str
    model_dir: str
    config: str | None = None
    vocab: str | None = None
    max_seq_length: int | None = None
    max_predictions_per_seq: int = BERT_DEFAULT_PREDICTIONS
    lower_case: bool | None = None
    allow_vocab_change: bool = False


@checked({"output": output_of("model_dir")})
@dataclasses.dataclass(frozen=True)
class ExportJob:
    """`--to`: writes `model_dir`'s latest weights in format `fmt` into `output`; `overwrite` replaces an
    earlier output of the same format there (and nothing else).

    Example:
      export_checkpoint(ExportJob("hf_bert", "runs/bert", "hf/bert"))
    """

    fmt: str
    model_dir: str
    output: str
    overwrite: bool = False


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m models.convert", description=__doc__.split("\n")[0])
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from", dest="source", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    direction.add_argument("--to", dest="target", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--checkpoint", help="--from: the checkpoint (file, prefix or folder)")
    parser.add_argument("--config", help="--from: bert_config.json / config.json / options.json")
    parser.add_argument("--vocab", help="--from: vocab.txt (WordPiece; default: the checkpoint's own)")
    parser.add_argument("--allow_vocab_change", action="store_true",
                        help="--from: accept a --vocab whose lines differ from the checkpoint's own vocabulary")
    parser.add_argument("--output", help="--to: the folder to write")
    parser.add_argument("--overwrite", action="store_true",
                        help="--to: replace an earlier output of the same format in --output")
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help=f"recorded for export and checks (BERT {BERT_DEFAULT_SEQ}, biLM: unroll_steps)")
    parser.add_argument("--max_predictions_per_seq", type=int, default=BERT_DEFAULT_PREDICTIONS)
    case = parser.add_mutually_exclusive_group()
    case.add_argument("--cased", dest="lower_case", action="store_false", default=None)
    case.add_argument("--lower_case", dest="lower_case", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    return parser.parse_args(argv)


def build_job(args) -> ImportJob | ExportJob:
    """The job the flags describe, after the checks of ranges and paths (nothing read or written yet); raises
    `UserError`."""
    from commands.user_errors import UserError, check_range, writable_dir
    from models.convert.common import ConversionError

    if args.max_seq_length is not None:
        check_range("--max_seq_length", args.max_seq_length, 1)
    check_range("--max_predictions_per_seq", args.max_predictions_per_seq, 1, args.max_seq_length)
    if args.source:
        if args.overwrite:
            raise UserError("--overwrite is for --to: --from never replaces a model_dir; give a new --model_dir")
        if not args.checkpoint:
            raise ConversionError("--checkpoint is required with --from")
        writable_dir("--model_dir", args.model_dir)
        return ImportJob(args.source, args.checkpoint, args.model_dir, args.config, args.vocab, args.max_seq_length,
                         args.max_predictions_per_seq, args.lower_case, args.allow_vocab_change)
    if args.allow_vocab_change:
        raise UserError("--allow_vocab_change is for --from: --to writes the model_dir's own vocabulary")
    if not args.output:
        raise ConversionError("--output is required with --to")
    writable_dir("--output", args.output)
    return ExportJob(args.target, args.model_dir, args.output, args.overwrite)


def _format(name: str) -> str:
    from models.convert.common import ConversionError

    if name not in FORMATS:
        raise ConversionError(f"unknown format {name!r}: use one of {', '.join(FORMATS)}")
    return FORMATS[name]


def _read(job: ImportJob, kind: str):
    """The source's config, vocabulary (a `VocabChoice`), sequence length, casing hint (None: unknown), nearest
    preset, and a function that assigns its weights to a built model and returns the groups left fresh."""
    from models import families
    from models.convert import bert as convert_bert
    from models.convert import bilm as convert_bilm
    from models.convert import hf_gpt
    from models.convert import keras_hub_bert
    from models.convert import vocabularies
    from models.convert.common import beside

    fmt, checkpoint, seq = job.fmt, job.checkpoint, job.max_seq_length
    own = beside(checkpoint, families.VOCAB_FILE)  # where the checkpoint's own vocabulary is, if it has one
    if fmt == "keras_hub":
        preset = keras_hub_bert.read(checkpoint)
        vocab = vocabularies.choose(job.vocab, preset.vocab_path, preset.config.vocab_size, preset.config_path,
                                    job.allow_vocab_change)
        seq = seq or preset.sequence_length or min(BERT_DEFAULT_SEQ, preset.config.max_position_embeddings)
        return (preset.config, vocab, seq, preset.lower_case, convert_bert.nearest_preset(preset.config),
                lambda model: keras_hub_bert.load(model, preset))
    if fmt == "hf_gpt":
        config, tensors, config_path, _ = hf_gpt.read_source(checkpoint, job.config, job.vocab)
        vocab = vocabularies.choose(job.vocab, own, config.vocab_size, config_path, job.allow_vocab_change)
        seq = seq or min(BERT_DEFAULT_SEQ, config.max_position_embeddings)
        return config, vocab, seq, None, "converted", lambda model: hf_gpt.load(model, config, tensors, checkpoint)
    if kind == "bert":
        config, tensors, config_path, hint = convert_bert.read_source(fmt, checkpoint, job.config)
        vocab = vocabularies.choose(job.vocab, own, config.vocab_size, config_path, job.allow_vocab_change)
        seq = seq or min(BERT_DEFAULT_SEQ, config.max_position_embeddings)
        return (config, vocab, seq, hint, convert_bert.nearest_preset(config),
                lambda model: convert_bert.load(model, config, tensors, checkpoint, hf=fmt == "hf_bert"))
    tensors, options, config_path = convert_bilm.read_source(checkpoint, job.config)
    vocab = vocabularies.choose(job.vocab, own, None, config_path, job.allow_vocab_change)
    config = convert_bilm.config_from_options(options, len(vocab.vocab), config_path)

    def load(model):
        try:
            return convert_bilm.load(model, config, tensors, checkpoint)
        finally:
            tensors.close()

    return config, vocab, seq or options.get("unroll_steps") or BILM_DEFAULT_SEQ, None, "converted", load


def import_checkpoint(job: ImportJob) -> dict:
    """Writes `job.model_dir` from the checkpoint; returns a summary (preset, fresh weights, vocabulary, ...).
    Raises `UserError` (a missing file too) with the message the command prints."""
    from commands.output_lock import model_dir_lock
    from models.convert.common import ConversionError

    with _missing_files_as_user_errors():
        kind = _format(job.fmt)
        if not job.checkpoint:
            raise ConversionError("--checkpoint is required with --from")
        if not os.path.exists(job.checkpoint) and not os.path.exists(job.checkpoint + ".index"):
            raise ConversionError(f"checkpoint not found: {job.checkpoint}")
        with model_dir_lock(job.model_dir, run="run"):  # a training or another conversion into it is refused
            return _import_checkpoint(job, kind)


@contextlib.contextmanager
def _missing_files_as_user_errors():
    from models.convert.common import ConversionError

    try:
        yield
    except FileNotFoundError as e:  # a missing model_dir, config or vocabulary: named in the message
        raise ConversionError(str(e)) from e


def _import_checkpoint(job: ImportJob, kind: str) -> dict:
    """`import_checkpoint` under the model_dir's lock."""
    import tensorflow as tf

    from commands import overwrite
    from models import families
    from models.config import TrainConfig
    from models.convert.common import ConversionError

    overwrite.refuse_other(job.model_dir, overwrite.MODEL_DIR, flag="--model_dir")
    if tf.io.gfile.isdir(job.model_dir) and tf.train.latest_checkpoint(job.model_dir):
        raise ConversionError(f"{job.model_dir} already holds a checkpoint; convert into a new --model_dir")
    config, choice, seq, hint, preset, load = _read(job, kind)
    vocab = choice.vocab
    lower = job.lower_case if job.lower_case is not None else hint if hint is not None else not vocab.looks_cased
    data = {"train_data": f"converted from {os.path.abspath(job.checkpoint)} ({job.fmt})", "max_seq_length": seq,
            "max_predictions_per_seq": job.max_predictions_per_seq if kind == "bert" else None,
            "lower_case": bool(lower), "vocab_size": len(vocab), "vocab_sha256": vocab.sha256,
            "special_ids": vocab.special_ids(), **choice.record()}
    try:
        model = families.make_task(kind, config, data).build_model()
    except ValueError as e:
        raise ConversionError(str(e)) from None
    fresh = load(model)
    families.write_config(job.model_dir, kind, preset, config, TrainConfig(), data)
    vocab.write(os.path.join(job.model_dir, families.VOCAB_FILE))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step), job.model_dir, 3,
                                         step_counter=step)
    path = manager.save(checkpoint_number=0)
    return {"model_dir": job.model_dir, "model": kind, "preset": preset, "checkpoint": path,
            "lower_case": bool(lower), "vocab_size": len(vocab), "vocab": choice.path, "vocab_sha256": vocab.sha256,
            "fresh": fresh, "parameters": int(model.count_params()), "vocab_note": choice.note()}


def export_checkpoint(job: ExportJob) -> dict:
    """Writes the model_dir's latest weights in the format under `job.output`, exactly or not at all (a config
    field the format cannot carry, or an output folder that is not this format's to write, is refused
    first); returns the files written. Raises `UserError` (a missing file too) with the command's message."""
    from commands.output_lock import OutputLock
    from models.convert.common import ConversionError

    with _missing_files_as_user_errors():
        _format(job.fmt)
        if not job.output:
            raise ConversionError("--output is required with --to")
        with OutputLock(job.output, "--output"):  # one run per folder: a second one is refused naming the first
            return _export_checkpoint(job)


def _export_checkpoint(job: ExportJob) -> dict:
    """`export_checkpoint` under the output folder's lock."""
    from commands import overwrite
    from models import families
    from models.convert import bert as convert_bert
    from models.convert import bilm as convert_bilm
    from models.convert import formats
    from models.convert import hf_gpt
    from models.convert import keras_hub_bert
    from models.convert import outputs
    from models.convert import vocabularies
    from models.convert.common import ConversionError

    fmt, model_dir = job.fmt, job.model_dir
    overwrite.require_model_dir(model_dir)
    saved = families.read_config(model_dir)
    kind, config, data = saved["model"], saved["model_config"], saved["data"]
    formats.check(fmt, kind, config)  # before the weights are read, and before anything is written
    where = outputs.plan(fmt, job.output, job.overwrite)
    try:
        _, model, saved = families.load_model(model_dir)
    except families.CheckpointMismatchError as e:
        raise ConversionError(str(e)) from None
    vocab = vocabularies.read(os.path.join(model_dir, families.VOCAB_FILE), config.vocab_size,
                              os.path.join(model_dir, families.CONFIG_FILE))
    lower, seq = bool(data.get("lower_case", True)), data.get("max_seq_length")
    writers = {"keras_hub": lambda out: keras_hub_bert.write(model, config, out, vocab, lower, seq or BERT_DEFAULT_SEQ),
               "hf_gpt": lambda out: hf_gpt.write(model, config, out, vocab, lower),
               "bilm_hdf5": lambda out: convert_bilm.write(model, config, out, vocab, seq)}
    writer = writers.get(fmt, lambda out: convert_bert.write(model, config, fmt, out, vocab, lower))
    result = {"output": job.output, "format": fmt, "files": outputs.write(where, writer)}
    if fmt == "keras_hub":
        result["not_written"] = keras_hub_bert.NOT_WRITTEN
    return result


@quiet_command
def main(argv=None) -> int:
    args = parse_args(argv)
    from commands.user_errors import exit_status

    try:
        job = build_job(args)
        if isinstance(job, ImportJob):
            result = import_checkpoint(job)
            if result["fresh"]:
                print(f"not in the checkpoint, freshly initialised: {', '.join(result['fresh'])}", file=sys.stderr)
            if result["vocab_note"]:
                print(result["vocab_note"], file=sys.stderr)
        else:
            result = export_checkpoint(job)
            for part, why in result.get("not_written", {}).items():
                print(f"not written: {part} ({why})", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)
    print(json.dumps(result))
    return 0
