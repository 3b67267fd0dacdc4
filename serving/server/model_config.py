"""TF Serving's `--model_config_file`: the `model_config_list` text proto, read and written.

The file is the real `tensorflow.serving.ModelServerConfig` proto in text format, so the same file drives real
TF Serving and the local server (`serving.server`). TF Serving requires every `base_path` to be absolute (or a
URI): `ServerCore` rejects a relative one ("Expected model NAME to have an absolute path or URI") unless the
C++-only option `model_config_list_root_dir` is set, which the model server has no flag for. This module does
the same, so a file that loads here loads there. In a container, `base_path` is the path inside the container.

Example:
    write_model_config_list("export/serving/models.config", [("bert", "/models/bert")])
    read_model_config_list("export/serving/models.config")
    # [ModelEntry(name='bert', base_path='/models/bert', version_policy='latest', num_versions=1, ...)]
"""

import dataclasses
import os

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

PLATFORM = "tensorflow"
POLICIES = ("latest", "all", "specific")


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One `config { ... }` of a `model_config_list`.

    Args:
      name: the model name in request URLs (`/v1/models/NAME`).
      base_path: absolute path (or URI) of the folder holding integer-named version folders.
      version_policy: "latest" (the `num_versions` highest versions; TF Serving's default), "all", or "specific"
        (exactly `versions`).
      num_versions: for "latest"; TF Serving serves at least 1.
      versions: for "specific".
      version_labels: (label, version) pairs, e.g. (("stable", 1), ("canary", 2)).
    """

    name: str
    base_path: str
    version_policy: str = "latest"
    num_versions: int = 1
    versions: tuple[int, ...] = ()
    version_labels: tuple[tuple[str, int], ...] = ()

    def __post_init__(self):
        if self.version_policy not in POLICIES:
            raise ValueError(f"model {self.name}: version_policy must be one of {POLICIES}, "
                             f"got {self.version_policy!r}")

    @property
    def labels(self) -> dict[str, int]:
        return dict(self.version_labels)


def is_absolute(path: str) -> bool:
    """An absolute local path or a URI (`gs://...`), as TF Serving's `UriIsRelativePath` accepts."""
    return os.path.isabs(path) or "://" in path


def _check(entries: list[ModelEntry], source: str) -> None:
    seen = set()
    for entry in entries:
        if not entry.name:
            raise ValueError(f"{source}: a model has an empty name")
        if entry.name in seen:
            raise ValueError(f"{source}: Illegal to list model {entry.name} multiple times in config list")
        seen.add(entry.name)
        if not is_absolute(entry.base_path):
            raise ValueError(f"{source}: Expected model {entry.name} to have an absolute path or URI; "
                             f"got base_path()={entry.base_path}")


def _entry(config) -> ModelEntry:
    policy = config.model_version_policy
    which = policy.WhichOneof("policy_choice") or "latest"
    return ModelEntry(name=config.name, base_path=config.base_path, version_policy=which,
                      num_versions=max(1, policy.latest.num_versions),
                      versions=tuple(sorted(policy.specific.versions)),
                      version_labels=tuple(sorted(config.version_labels.items())))


def read_model_config_list(path: str) -> list[ModelEntry]:
    """Parses a `model_config_list` file -> its models, in file order.

    Raises:
      FileNotFoundError: no such file.
      ValueError: a text-format error (with `path:line:column`), a `custom_model_config`, a platform other than
        "tensorflow", a duplicate name or a relative base_path.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model config file not found: {path}")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as e:
        detail = str(e).split(" : ", 1)[-1]  # str(e) starts with "line:column : "
        raise ValueError(f"{path}:{e.GetLine()}:{e.GetColumn()}: cannot parse model config: {detail}") from None
    if config.WhichOneof("config") != "model_config_list":
        raise ValueError(f"{path}: expected a model_config_list, got {config.WhichOneof('config') or 'nothing'}")
    for model in config.model_config_list.config:
        if model.model_platform not in ("", PLATFORM):
            raise ValueError(f"{path}: model {model.name}: unsupported model_platform {model.model_platform!r}")
    entries = [_entry(model) for model in config.model_config_list.config]
    _check(entries, path)
    return entries


def write_model_config_list(path: str, models: list[tuple[str, str]]) -> None:
    """Writes `models` ((name, absolute base_path) pairs) as a `model_config_list` with platform "tensorflow"
    and TF Serving's default version policy (the latest version). Written to a temporary file, then renamed,
    so a server reading it never sees half a file."""
    _check([ModelEntry(name, base_path) for name, base_path in models], path)
    config = model_server_config_pb2.ModelServerConfig()
    for name, base_path in models:
        model = config.model_config_list.config.add()
        model.name, model.base_path, model.model_platform = name, base_path, PLATFORM
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text_format.MessageToString(config))
    os.replace(tmp, path)
