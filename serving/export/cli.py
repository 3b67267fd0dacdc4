"""Export a trained model_dir as TF-Hub modules and a TF Serving version folder.

    python -m serving.export --model_dir DIR --export_dir DIR [--version N] [--warmup_text FILE]
        [--model_name NAME] [--checkpoint ckpt-N] [--overwrite]

Rebuilds the model from `model_dir/config.json`, restores the latest checkpoint (or `--checkpoint`, one of the
checkpoints model_dir keeps: `keep_checkpoints`), and writes
  - `<export_dir>/hub/encoder/` + `hub/preprocessor/` (BERT) or `hub/module/` (GPT, biLM): TF2 reusable
    SavedModels with `assets/vocab.txt` (and the biLM's `options.json`) and a tfhub.dev model card
    (`README.md`); an existing `hub/` is replaced only with `--overwrite`;
  - `<export_dir>/serving/<model_name>/<version>/`: the text-in SavedModel for TF Serving with
    `assets.extra/tf_serving_warmup_requests` (from `--warmup_text`'s first lines, or built-in sentences);
    the version defaults to one more than the highest present, and an existing version is never replaced;
  - `<export_dir>/serving/models.config`: TF Serving's `model_config_list` for every model under serving/
    (absolute paths), and `models.container.config`, the same for the `tensorflow/serving` container with
    serving/ mounted at /models.
  - `<export_dir>/export.json`: which family the folder holds (`{"family": "bert", "hub": [...], "models": [...]}`).
One export folder holds one family: exporting a model of another family into it is refused (naming the family
there, from export.json or, for older exports, from hub/'s modules). An `--export_dir` that holds another kind
of output (a training model_dir, a converted checkpoint, a data job's run) is refused naming it, and so is a
`--model_dir` that is no model_dir (a HuggingFace folder, an export, a config.json naming no model family),
with or without `--overwrite` (`commands/overwrite.py`). Flags are checked before the model loads (folders
exist and are writable, names are plain, versions >= 1).
Every SavedModel is written to a temporary folder, checked (only ops that stock TF Serving links; the
serving model's warm-up requests replayed), then renamed into place, so a failed export leaves nothing
that looks finished. Exit status 2 for bad input (no checkpoint, vocabulary mismatch, existing version, an
existing hub/ without --overwrite, another family's folder, another kind of output, a bad flag), 3 for a model
that cannot be served (unsupported ops, a failing warm-up request).

The same from Python is one call on an `ExportJob` (`job.py`), whose fields are the flags; it prints the same
lines (through `log`) and returns an `ExportResult`:

    from serving.export import ExportJob, export

    result = export(ExportJob(model_dir="runs/bert_tiny", export_dir="export/bert"))
    result.hub["encoder"], result.serving
"""

import json
import os
import shutil

from commands.output_lock import OutputLock
from commands.overwrite import require_model_dir
from commands.tf_startup import quiet_command
from commands.user_errors import OneLineParser, run_to_summary
from serving.export.job import MANIFEST_FILE, UNSERVABLE, ExportError, ExportJob, ExportResult, writable_folder

SAMPLE_TEXTS = ("The bank raised its interest rates again this year.",
                "They had a picnic on the grassy bank of the river.",
                "She went to see a play at the theatre last night.",
                "The children play football in the park after school.")
MAX_WARMUP_TEXTS = 8
MODEL_CONFIG_FILE = "models.config"
# The same list for the tensorflow/serving container, with serving/ mounted at /models.
CONTAINER_CONFIG_FILE = "models.container.config"
CONTAINER_ROOT = "/models"


def parse_args(argv):
    parser = OneLineParser(prog="python -m serving.export", description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True, help="a model_dir written by models.training.train")
    parser.add_argument("--export_dir", required=True)
    parser.add_argument("--version", type=int, default=None, help="TF Serving version (default: next free)")
    parser.add_argument("--warmup_text", default=None, help="text file: its first lines become warm-up requests")
    parser.add_argument("--model_name", default=None, help="TF Serving model name (default: bert, gpt or bilm)")
    parser.add_argument("--checkpoint", default=None, metavar="ckpt-N",
                        help="a checkpoint of model_dir (name or path; default: the latest)")
    parser.add_argument("--overwrite", action="store_true", help="replace the hub/ modules of an earlier export")
    return parser.parse_args(argv)


def job_from_args(args) -> ExportJob:
    return ExportJob(model_dir=args.model_dir, export_dir=args.export_dir, version=args.version,
                     warmup_text=args.warmup_text, model_name=args.model_name, checkpoint=args.checkpoint,
                     overwrite=args.overwrite)


@quiet_command
def main(argv=None) -> int:
    """`python -m serving.export`: parse, build the job, export; the result as the last line."""
    args = parse_args(argv)
    return run_to_summary(lambda: export(job_from_args(args)).summary())


def write_manifest(export_dir: str, kind: str, hub_names, model_names) -> None:
    path = os.path.join(export_dir, MANIFEST_FILE)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"family": kind, "hub": sorted(hub_names), "models": sorted(model_names)}, f, indent=2)
    os.replace(tmp, path)


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
        raise ExportError(f"the TF Serving model does not load: {e.message.splitlines()[0][:500]}",
                          code=UNSERVABLE) from e


def export(job: ExportJob, log=print) -> ExportResult:
    """Writes the export of `job`; `log` takes the lines the command prints before its result. Raises
    `ExportError` (a `UserError`; `status` 3 for a model that cannot be served) before anything is moved
    into place."""
    writable_folder(job.export_dir, "--export_dir")
    with OutputLock(job.export_dir, "--export_dir"):  # one export per folder: a second one is refused naming it
        return _export(job, log)


def _export(job: ExportJob, log) -> ExportResult:
    """`export` under the export folder's lock: the job checked, the model loaded, staged and published."""
    from models import families
    from preprocessing.wordpiece import WordPieceTokenizer

    import tensorflow as tf
    kind = model_family(job.model_dir)
    model_name = job.model_name or kind or "model"
    job.check(kind, model_name)
    try:
        restored = families.checkpoint_path(job.model_dir, job.checkpoint)
        _, model, saved = families.load_model(job.model_dir, restored)
    except (FileNotFoundError, families.CheckpointMismatchError) as e:
        raise ExportError(str(e)) from e
    latest = restored == tf.train.latest_checkpoint(job.model_dir)
    export_dir = os.path.abspath(job.export_dir)
    serving_root = os.path.join(export_dir, "serving")
    version = next_version(os.path.join(serving_root, model_name), job.version)
    vocab_path, vocab = _vocab(job.model_dir, saved)
    tokenizer = WordPieceTokenizer(vocab, lower_case=bool(saved["data"].get("lower_case", True)))
    texts = warmup_texts(job.warmup_text)
    facts = {**card_facts(job.model_dir, saved, None if latest else restored), "name": model_name,
             "export_dir": export_dir, "vocab_size": len(vocab), "lower_case": tokenizer.lower_case}
    staging = os.path.join(export_dir, f".staging-{os.getpid()}")
    try:
        specs, make_requests = family_exports(kind, model, tokenizer, saved, vocab_path, staging)
        hub, serving, requests = _stage_and_publish(specs, staging, export_dir, model_name, version, facts,
                                                    make_requests(texts))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for name, path in hub.items():
        log(f"hub module {name}: {path}")
    log(f"TF Serving model {model_name} version {version}: {serving} ({requests} warm-up requests)")
    config_path, names = write_model_configs(serving_root)
    log(f"model_config_list: {config_path} ({', '.join(names)})")
    write_manifest(export_dir, kind, hub, names)
    return ExportResult(hub=hub, serving=serving, version=version, warmup_requests=requests,
                        model_config=config_path)


def _stage_and_publish(specs, staging: str, export_dir: str, model_name: str, version: int, facts: dict,
                       requests) -> tuple[dict, str, int]:
    """Writes and checks every SavedModel of `specs` under `staging`, then moves them all into place;
    returns `(hub modules by name, the serving folder, its warm-up requests)`."""
    from serving.export import model_card
    from serving.export import saved_models

    hub, placed, serving, count = {}, [], None, 0  # placed: (staged folder, final folder)
    for spec in specs:
        if spec.place == "hub":
            path = os.path.join(export_dir, "hub", spec.name)
            card = model_card.model_card(spec.card, {**facts, "name": f"{model_name}/{spec.name}"})
            staged = os.path.join(staging, "hub", spec.name)
            saved_models.stage(spec, staged, {"README.md": card.encode("utf-8")}, verify=check_ops)
            hub[spec.name] = path
        else:
            path = os.path.join(export_dir, "serving", model_name, str(version))
            staged = os.path.join(staging, "serving")
            count = stage_serving(spec, staged, model_name, version, requests)
            serving = path
        placed.append((staged, path))
    for staged, path in placed:  # everything written and checked: move it into place
        saved_models.publish(staged, path)
    return hub, serving, count


def check_ops(path: str) -> None:
    """Only ops that stock TF Serving links (ExportError, exit status 3)."""
    from serving.export import op_check

    try:
        op_check.check_serving_ops(path)
    except op_check.UnsupportedOpsError as e:
        raise ExportError(str(e), code=UNSERVABLE) from e


def stage_serving(spec, staged: str, model_name: str, version: int, requests) -> int:
    """Stages the TF Serving model with its warm-up records, checked by replaying them; returns their count."""
    from serving.export import saved_models
    from serving.server import warmup

    records = warmup.warmup_records(model_name, requests, spec.signatures)

    def verify(tmp):
        check_ops(tmp)
        replay_warmup(tmp, model_name, version)

    saved_models.stage(spec, staged, {warmup.WARMUP_FILE: warmup.tfrecord_bytes(records)}, verify=verify)
    return len(records)


def model_family(model_dir: str) -> str | None:
    """The family `model_dir/config.json` names (None when model_dir is no folder: `check_flags` says so);
    ExportError for a folder that is no model_dir, naming what it holds."""
    import tensorflow as tf

    from models import families

    if not tf.io.gfile.isdir(model_dir):
        return None
    try:
        require_model_dir(model_dir)
        return families.read_config(model_dir)["model"]
    except (FileNotFoundError, ValueError, KeyError) as e:  # UserError is a ValueError
        raise ExportError(str(e).splitlines()[0] if str(e) else f"{model_dir}: unreadable config.json") from e


def card_facts(model_dir: str, saved: dict, earlier: str | None) -> dict:
    """What the model cards say of the training: data, steps, sequence length, the final metrics (of the latest
    checkpoint only: none for an `earlier` one, whose steps its name gives)."""
    from models.training import rerun

    metrics_path = os.path.join(model_dir, "metrics.json")
    metrics = {}
    if earlier is None and os.path.exists(metrics_path):
        with open(metrics_path) as f:
            metrics = json.load(f)
    steps = saved["train_config"].train_steps if earlier is None else rerun.trained_steps(earlier)
    return {"preset": saved["preset"], "train_data": saved["data"].get("train_data"), "train_steps": steps,
            "max_seq_length": saved["data"]["max_seq_length"], "metrics": metrics}


def write_model_configs(serving_root: str) -> tuple[str, list[str]]:
    """TF Serving's model_config_list for every model under serving/ (and the container's copy); returns its
    path and the model names."""
    from serving.server.model_config import write_model_config_list

    names = sorted(d for d in os.listdir(serving_root) if os.path.isdir(os.path.join(serving_root, d))
                   and not d.startswith("."))
    config_path = os.path.join(serving_root, MODEL_CONFIG_FILE)
    write_model_config_list(config_path, [(name, os.path.join(serving_root, name)) for name in names])
    write_model_config_list(os.path.join(serving_root, CONTAINER_CONFIG_FILE),
                            [(name, f"{CONTAINER_ROOT}/{name}") for name in names])
    return config_path, names
