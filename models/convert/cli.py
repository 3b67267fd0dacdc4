"""Convert public checkpoints into model_dirs, and model_dirs back into those formats.

    python -m models.convert --from {bert_tf1,hf_bert,keras_hub,hf_gpt,bilm_hdf5} --checkpoint PATH \\
        [--config FILE] [--vocab FILE] --model_dir DIR [--max_seq_length N] [--max_predictions_per_seq N] \\
        [--cased|--lower_case]
    python -m models.convert --to {bert_tf1,hf_bert,keras_hub,hf_gpt,bilm_hdf5} --model_dir DIR --output DIR

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
"""

import argparse
import json
import os
import sys

from models.convert.formats import FORMATS

BERT_DEFAULT_SEQ, BERT_DEFAULT_PREDICTIONS, BILM_DEFAULT_SEQ = 128, 20, 20


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m models.convert", description=__doc__.split("\n")[0])
    direction = parser.add_mutually_exclusive_group(required=True)
    direction.add_argument("--from", dest="source", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    direction.add_argument("--to", dest="target", metavar="FORMAT", help=f"one of {', '.join(FORMATS)}")
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--checkpoint", help="--from: the checkpoint (file, prefix or folder)")
    parser.add_argument("--config", help="--from: bert_config.json / config.json / options.json")
    parser.add_argument("--vocab", help="--from: vocab.txt (WordPiece)")
    parser.add_argument("--output", help="--to: the folder to write")
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help=f"recorded for export and checks (BERT {BERT_DEFAULT_SEQ}, biLM: unroll_steps)")
    parser.add_argument("--max_predictions_per_seq", type=int, default=BERT_DEFAULT_PREDICTIONS)
    case = parser.add_mutually_exclusive_group()
    case.add_argument("--cased", dest="lower_case", action="store_false", default=None)
    case.add_argument("--lower_case", dest="lower_case", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    return parser.parse_args(argv)


def check_args(args) -> None:
    """Ranges and paths, before anything is read or written; raises `UserError`."""
    from commands.user_errors import check_range, writable_dir

    if args.max_seq_length is not None:
        check_range("--max_seq_length", args.max_seq_length, 1)
    check_range("--max_predictions_per_seq", args.max_predictions_per_seq, 1, args.max_seq_length)
    if args.source:
        writable_dir("--model_dir", args.model_dir)
    elif args.output:
        writable_dir("--output", args.output)


def _format(name: str) -> str:
    from models.convert.common import ConversionError

    if name not in FORMATS:
        raise ConversionError(f"unknown format {name!r}: use one of {', '.join(FORMATS)}")
    return FORMATS[name]


def _vocabulary(path: str, rows: int | None, config_path: str):
    from models.convert.common import ConversionError, require_file
    from preprocessing.vocabulary import Vocabulary, VocabularyError

    try:
        vocab = Vocabulary.from_file(require_file(path, "vocabulary", "--vocab"))
    except VocabularyError as e:
        raise ConversionError(str(e)) from None
    if rows is not None and len(vocab) != rows:
        raise ConversionError(f"the vocabulary {path} has {len(vocab)} entries but the word embeddings have "
                              f"{rows} rows (vocab_size in {config_path})")
    return vocab


def _read(fmt: str, kind: str, checkpoint: str, config_path: str | None, vocab_path: str | None,
          max_seq_length: int | None):
    """The source's config, vocabulary, sequence length, casing hint (None: unknown), nearest preset, and a
    function that assigns its weights to a built model and returns the groups left fresh."""
    from models import families
    from models.convert import bert as convert_bert
    from models.convert import bilm as convert_bilm
    from models.convert import hf_gpt
    from models.convert import keras_hub_bert
    from models.convert.common import beside

    if fmt == "keras_hub":  # the preset's own vocabulary unless --vocab
        preset = keras_hub_bert.read(checkpoint)
        vocab = _vocabulary(vocab_path or preset.vocab_path, preset.config.vocab_size, preset.config_path)
        seq = max_seq_length or preset.sequence_length or min(BERT_DEFAULT_SEQ, preset.config.max_position_embeddings)
        return (preset.config, vocab, seq, preset.lower_case, convert_bert.nearest_preset(preset.config),
                lambda model: keras_hub_bert.load(model, preset))
    vocab_path = vocab_path or beside(checkpoint, families.VOCAB_FILE)
    if fmt == "hf_gpt":
        config, tensors, config_path, vocab_path = hf_gpt.read_source(checkpoint, config_path, vocab_path)
        vocab = _vocabulary(vocab_path, config.vocab_size, config_path)
        seq = max_seq_length or min(BERT_DEFAULT_SEQ, config.max_position_embeddings)
        return config, vocab, seq, None, "converted", lambda model: hf_gpt.load(model, config, tensors, checkpoint)
    if kind == "bert":
        config, tensors, config_path, hint = convert_bert.read_source(fmt, checkpoint, config_path)
        vocab = _vocabulary(vocab_path, config.vocab_size, config_path)
        seq = max_seq_length or min(BERT_DEFAULT_SEQ, config.max_position_embeddings)
        return (config, vocab, seq, hint, convert_bert.nearest_preset(config),
                lambda model: convert_bert.load(model, config, tensors, checkpoint, hf=fmt == "hf_bert"))
    tensors, options, config_path = convert_bilm.read_source(checkpoint, config_path)
    vocab = _vocabulary(vocab_path, None, config_path)
    config = convert_bilm.config_from_options(options, len(vocab), config_path)

    def load(model):
        try:
            return convert_bilm.load(model, config, tensors, checkpoint)
        finally:
            tensors.close()

    return config, vocab, max_seq_length or options.get("unroll_steps") or BILM_DEFAULT_SEQ, None, "converted", load


def import_checkpoint(fmt: str, checkpoint: str, model_dir: str, config_path: str | None = None,
                      vocab_path: str | None = None, max_seq_length: int | None = None,
                      max_predictions_per_seq: int = BERT_DEFAULT_PREDICTIONS, lower_case: bool | None = None) -> dict:
    """Writes `model_dir` from a checkpoint in format `fmt`; returns a summary (preset, fresh weights, ...)."""
    import tensorflow as tf

    from models import families
    from models.config import TrainConfig
    from models.convert.common import ConversionError

    kind = _format(fmt)
    if not checkpoint:
        raise ConversionError("--checkpoint is required with --from")
    if not os.path.exists(checkpoint) and not os.path.exists(checkpoint + ".index"):
        raise ConversionError(f"checkpoint not found: {checkpoint}")
    if tf.io.gfile.isdir(model_dir) and tf.train.latest_checkpoint(model_dir):
        raise ConversionError(f"{model_dir} already holds a checkpoint; convert into a new --model_dir")
    config, vocab, seq, hint, preset, load = _read(fmt, kind, checkpoint, config_path, vocab_path, max_seq_length)
    lower = lower_case if lower_case is not None else hint if hint is not None else not vocab.looks_cased
    data = {"train_data": f"converted from {os.path.abspath(checkpoint)} ({fmt})", "max_seq_length": seq,
            "max_predictions_per_seq": max_predictions_per_seq if kind == "bert" else None,
            "lower_case": bool(lower), "vocab_size": len(vocab), "vocab_sha256": vocab.sha256,
            "special_ids": vocab.special_ids()}
    try:
        model = families.make_task(kind, config, data).build_model()
    except ValueError as e:
        raise ConversionError(str(e)) from None
    fresh = load(model)
    families.write_config(model_dir, kind, preset, config, TrainConfig(), data)
    vocab.write(os.path.join(model_dir, families.VOCAB_FILE))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step), model_dir, 3, step_counter=step)
    path = manager.save(checkpoint_number=0)
    return {"model_dir": model_dir, "model": kind, "preset": preset, "checkpoint": path, "lower_case": bool(lower),
            "vocab_size": len(vocab), "fresh": fresh, "parameters": int(model.count_params())}


def export_checkpoint(fmt: str, model_dir: str, output: str) -> dict:
    """Writes `model_dir`'s latest weights in format `fmt` under `output`, exactly or not at all (a config
    field the format cannot carry is refused first); returns the files written."""
    from models import families
    from models.convert import bert as convert_bert
    from models.convert import bilm as convert_bilm
    from models.convert import formats
    from models.convert import hf_gpt
    from models.convert import keras_hub_bert
    from models.convert.common import ConversionError

    _format(fmt)
    if not output:
        raise ConversionError("--output is required with --to")
    saved = families.read_config(model_dir)
    kind, config, data = saved["model"], saved["model_config"], saved["data"]
    formats.check(fmt, kind, config)  # before the weights are read, and before anything is written
    try:
        _, model, saved = families.load_model(model_dir)
    except families.CheckpointMismatchError as e:
        raise ConversionError(str(e)) from None
    vocab = _vocabulary(os.path.join(model_dir, families.VOCAB_FILE), config.vocab_size,
                        os.path.join(model_dir, families.CONFIG_FILE))
    lower = bool(data.get("lower_case", True))
    if fmt == "keras_hub":
        seq = data.get("max_seq_length") or BERT_DEFAULT_SEQ
        files = keras_hub_bert.write(model, config, output, vocab, lower, seq)
        return {"output": output, "format": fmt, "files": files, "not_written": keras_hub_bert.NOT_WRITTEN}
    elif fmt == "hf_gpt":
        files = hf_gpt.write(model, config, output, vocab, lower)
    elif kind == "bert":
        files = convert_bert.write(model, config, fmt, output, vocab, lower)
    else:
        files = convert_bilm.write(model, config, output, vocab, data.get("max_seq_length"))
    return {"output": output, "format": fmt, "files": files}


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = parse_args(argv)
    from commands.user_errors import exit_status

    try:
        check_args(args)
        if args.source:
            result = import_checkpoint(args.source, args.checkpoint, args.model_dir, args.config, args.vocab,
                                       args.max_seq_length, args.max_predictions_per_seq, args.lower_case)
            if result["fresh"]:
                print(f"not in the checkpoint, freshly initialised: {', '.join(result['fresh'])}", file=sys.stderr)
        else:
            result = export_checkpoint(args.target, args.model_dir, args.output)
            for part, why in result.get("not_written", {}).items():
                print(f"not written: {part} ({why})", file=sys.stderr)
    except FileNotFoundError as e:
        from commands.user_errors import UserError

        return exit_status(UserError(str(e)), args.verbose)
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)
    print(json.dumps(result))
    return 0

