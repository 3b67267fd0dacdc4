"""Export a trained model_dir as TF-Hub modules and a TF Serving version folder.

    python -m serving.export --model_dir DIR --export_dir DIR [--version N] [--warmup_text FILE]
        [--model_name NAME]

Rebuilds the model from `model_dir/config.json`, restores the latest checkpoint, and writes
  - `<export_dir>/hub/encoder/` + `hub/preprocessor/` (BERT) or `hub/module/` (GPT, biLM): TF2 reusable
    SavedModels with `assets/vocab.txt` (and the biLM's `options.json`) and a tfhub.dev model card
    (`README.md`); replaced by each export;
  - `<export_dir>/serving/<model_name>/<version>/`: the text-in SavedModel for TF Serving with
    `assets.extra/tf_serving_warmup_requests` (from `--warmup_text`'s first lines, or built-in sentences);
    the version defaults to one more than the highest present, and an existing version is never replaced;
  - `<export_dir>/serving/models.config`: TF Serving's `model_config_list` for every model under serving/
    (absolute paths), and `models.container.config`, the same for the `tensorflow/serving` container with
    serving/ mounted at /models.
Every SavedModel is written to a temporary folder, checked (only ops that stock TF Serving links; the
serving model's warm-up requests replayed), then renamed into place, so a failed export leaves nothing
that looks finished. Exit status 2 for bad input (no checkpoint, vocabulary mismatch, existing version),
3 for a model that cannot be served (unsupported ops, a failing warm-up request).
"""

import argparse
import shutil
import json
import os
import sys

SAMPLE_TEXTS = ("The bank raised its interest rates again this year.",
                "They had a picnic on the grassy bank of the river.",
                "She went to see a play at the theatre last night.",
                "The children play football in the park after school.")
MAX_WARMUP_TEXTS = 8
MODEL_CONFIG_FILE = "models.config"
# The same list for the tensorflow/serving container, with serving/ mounted at /models.
CONTAINER_CONFIG_FILE = "models.container.config"
CONTAINER_ROOT = "/models"


class ExportError(RuntimeError):
    """The export cannot proceed; `code` is the exit status."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m serving.export", description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True, help="a model_dir written by models.training.train")
    parser.add_argument("--export_dir", required=True)
    parser.add_argument("--version", type=int, default=None, help="TF Serving version (default: next free)")
    parser.add_argument("--warmup_text", default=None, help="text file: its first lines become warm-up requests")
    parser.add_argument("--model_name", default=None, help="TF Serving model name (default: bert, gpt or bilm)")
    return parser.parse_args(argv)


def warmup_texts(path: str | None) -> list[str]:
    if path is None:
        return list(SAMPLE_TEXTS)
    if not os.path.exists(path):
        raise ExportError(f"--warmup_text file not found: {path}")
    texts = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                texts.append(line.strip()[:2000])
            if len(texts) == MAX_WARMUP_TEXTS:
                break
    if not texts:
        raise ExportError(f"--warmup_text {path} has no non-empty line")
    return texts


def next_version(base: str, requested: int | None) -> int:
    present = [int(d) for d in os.listdir(base) if d.isdigit()] if os.path.isdir(base) else []
    if requested is None:
        return max(present, default=0) + 1
    if requested < 1:
        raise ExportError(f"--version must be >= 1, got {requested}")
    if requested in present:
        raise ExportError(f"{os.path.join(base, str(requested))} exists; TF Serving versions are immutable: "
                          f"pick another --version (or none for {max(present) + 1})")
    return requested


def _vocab(model_dir: str, saved: dict):
    from models.families import VOCAB_FILE
    from preprocessing.vocabulary import Vocabulary, VocabularyError

    path = os.path.join(model_dir, VOCAB_FILE)
    try:
        vocab = Vocabulary.from_file(path)
    except VocabularyError as e:
        raise ExportError(str(e)) from e
    expected = saved["data"].get("vocab_sha256")
    if expected and vocab.sha256 != expected:
        raise ExportError(f"{path} (sha256 {vocab.sha256[:12]}) is not the vocabulary the model was trained with "
                          f"(config.json: {expected[:12]})")
    return path, vocab


def family_exports(kind: str, model, tokenizer, saved: dict, vocab_path: str, scratch: str):
    """The family's SavedModelSpecs and its warm-up request builder."""
    seq = saved["data"]["max_seq_length"]
    if kind == "bert":
        from serving.export import bert as family
        return family.exports(model, tokenizer, seq, vocab_path), family.warmup_requests
    if kind == "gpt":
        from serving.export import gpt as family
        return family.exports(model, tokenizer, seq, vocab_path), family.warmup_requests
    from serving.export import bilm as family
    options = os.path.join(scratch, "options.json")
    os.makedirs(scratch, exist_ok=True)
    with open(options, "w") as f:
        f.write(family.options_json(saved["model_config"], seq))
    return family.exports(model, tokenizer, seq, vocab_path, options), family.warmup_requests


def replay_warmup(saved_model_dir: str, model_name: str, version: int) -> None:
    """Loads the SavedModel as the local server (and TF Serving) does, warm-up requests replayed."""
    from serving.server.servable import Servable, ServingError

    try:
        Servable.load(model_name, version, saved_model_dir)
    except ServingError as e:
        raise ExportError(f"the TF Serving model does not load: {e.message.splitlines()[0][:500]}", code=3) from e


def export(model_dir: str, export_dir: str, version: int | None = None, warmup_text: str | None = None,
           model_name: str | None = None, log=print) -> dict:
    """Writes the export; returns `{"hub": {name: path}, "serving": path, "model_config": path, "version": N}`."""
    from models import families
    from preprocessing.wordpiece import WordPieceTokenizer
    from serving.export import model_card
    from serving.export import op_check
    from serving.export import saved_models
    from serving.server import warmup
    from serving.server.model_config import write_model_config_list

    try:
        _, model, saved = families.load_model(model_dir)
    except (FileNotFoundError, families.CheckpointMismatchError) as e:
        raise ExportError(str(e)) from e
    kind = saved["model"]
    model_name = model_name or kind
    serving_root = os.path.join(os.path.abspath(export_dir), "serving")
    version = next_version(os.path.join(serving_root, model_name), version)
    vocab_path, vocab = _vocab(model_dir, saved)
    tokenizer = WordPieceTokenizer(vocab, lower_case=bool(saved["data"].get("lower_case", True)))
    texts = warmup_texts(warmup_text)
    metrics_path = os.path.join(model_dir, "metrics.json")
    metrics = {}
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            metrics = json.load(f)
    facts = {"name": model_name, "preset": saved["preset"], "export_dir": os.path.abspath(export_dir),
             "train_data": saved["data"].get("train_data"), "train_steps": saved["train_config"].train_steps,
             "vocab_size": len(vocab), "max_seq_length": saved["data"]["max_seq_length"],
             "lower_case": tokenizer.lower_case, "metrics": metrics}

    def check_ops(path):
        try:
            op_check.check_serving_ops(path)
        except op_check.UnsupportedOpsError as e:
            raise ExportError(str(e), code=3) from e

    result = {"hub": {}, "version": version}
    staging = os.path.join(os.path.abspath(export_dir), f".staging-{os.getpid()}")
    try:
        placed = []  # (staged folder, final folder)
        specs, make_requests = family_exports(kind, model, tokenizer, saved, vocab_path, staging)
        for spec in specs:
            if spec.place == "hub":
                path = os.path.join(os.path.abspath(export_dir), "hub", spec.name)
                card = model_card.model_card(spec.card, {**facts, "name": f"{model_name}/{spec.name}"})
                staged = os.path.join(staging, "hub", spec.name)
                saved_models.stage(spec, staged, {"README.md": card.encode("utf-8")}, verify=check_ops)
                result["hub"][spec.name] = path
            else:
                path = os.path.join(serving_root, model_name, str(version))
                records = warmup.warmup_records(model_name, make_requests(texts), spec.signatures)

                def verify(tmp):
                    check_ops(tmp)
                    replay_warmup(tmp, model_name, version)

                staged = os.path.join(staging, "serving")
                saved_models.stage(spec, staged, {warmup.WARMUP_FILE: warmup.tfrecord_bytes(records)}, verify=verify)
                result["serving"] = path
                result["warmup_requests"] = len(records)
            placed.append((staged, path))
        for staged, path in placed:  # everything written and checked: move it into place
            saved_models.publish(staged, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for name, path in result["hub"].items():
        log(f"hub module {name}: {path}")
    log(f"TF Serving model {model_name} version {version}: {result['serving']} "
        f"({result['warmup_requests']} warm-up requests)")
    names = sorted(d for d in os.listdir(serving_root) if os.path.isdir(os.path.join(serving_root, d))
                   and not d.startswith("."))
    config_path = os.path.join(serving_root, MODEL_CONFIG_FILE)
    write_model_config_list(config_path, [(name, os.path.join(serving_root, name)) for name in names])
    write_model_config_list(os.path.join(serving_root, CONTAINER_CONFIG_FILE),
                            [(name, f"{CONTAINER_ROOT}/{name}") for name in names])
    result["model_config"] = config_path
    log(f"model_config_list: {config_path} ({', '.join(names)})")
    return result


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = parse_args(argv)
    try:
        result = export(args.model_dir, args.export_dir, args.version, args.warmup_text, args.model_name)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    print(json.dumps(result))
    return 0

