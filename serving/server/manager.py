"""Which model versions are served: version folders, version policies, loading, unloading and their states.

`ModelManager(entries).poll()` does what TF Serving's file-system source and manager do on each poll: list the
integer-named subfolders of each model's base_path that hold a `saved_model.pb`, pick the aspired versions by
the model's policy (the latest `num_versions`, all, or specific ones), load the new ones (state LOADING, then
AVAILABLE, or END with the error in the status) and only then unload versions that left the policy or whose
folder disappeared (UNLOADING, then END), so a model that had a version keeps one while the next loads. A
failed version is retried when its folder changes (a file added, removed, resized or rewritten: a copy
completed after a first poll saw it half-written), not on every poll. A base path with no versions (or
missing) is warned about once, and again only after it had versions.

Lookups follow TF Serving's ServerCore: the latest AVAILABLE version, a specific one or a version label, with
its NOT_FOUND / INVALID_ARGUMENT messages ("Servable not found for request: Specific(NAME, N)").
"""

import logging
import os
import threading

from serving.server.servable import Servable, ServingError
from serving.server.model_config import ModelEntry

log = logging.getLogger(__name__)


def version_folders(base_path: str) -> dict[int, str]:
    """version -> folder, for the integer-named subfolders of `base_path` holding a saved_model.pb."""
    try:
        names = os.listdir(base_path)
    except OSError:
        return {}
    found = {}
    for name in names:
        path = os.path.join(base_path, name)
        if name.isdigit() and os.path.isfile(os.path.join(path, "saved_model.pb")):
            found[int(name)] = path
    return found


def fingerprint(path: str) -> tuple:
    """What a version folder holds: (relative path, size, mtime) of every file, to see it change."""
    found = []
    for folder, _, files in os.walk(path):
        for name in files:
            full = os.path.join(folder, name)
            try:
                stat = os.stat(full)
            except OSError:
                continue
            found.append((os.path.relpath(full, path), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


def aspired(entry: ModelEntry, versions) -> set[int]:
    """The versions the entry's policy serves among those on disk."""
    if entry.version_policy == "all":
        return set(versions)
    if entry.version_policy == "specific":
        return set(versions) & set(entry.versions)
    return set(sorted(versions)[-entry.num_versions:])


class VersionState:
    """One version's state and status, as GetModelStatus reports it."""

    def __init__(self, version: int, path: str):
        self.version, self.path = version, path
        self.state, self.error_code, self.error_message = "START", "OK", ""
        self.servable: Servable | None = None
        self.fingerprint = fingerprint(path)  # the folder as it was when its load began


class ModelManager:
    """The served models. `poll()` syncs with the file system; lookups are thread-safe.

    Args:
      entries: the models (from `model_config.read_model_config_list` or built directly).
      batching: merge concurrent predict calls (see `serving.server.servable.Batcher`).
      method_check: Classify/Regress check the signature's method_name (`Servable.signature`).
    """

    def __init__(self, entries: list[ModelEntry], batching: bool = False, method_check: bool = False):
        self.entries = {entry.name: entry for entry in entries}
        self.batching, self.method_check = batching, method_check
        self._states: dict[str, dict[int, VersionState]] = {name: {} for name in self.entries}
        self._lock = threading.Lock()
        self._poll_lock = threading.Lock()
        self._warned: set[str] = set()  # models whose empty base path was already warned about

    def poll(self) -> None:
        with self._poll_lock:
            for entry in self.entries.values():
                self._sync(entry)

    def _sync(self, entry: ModelEntry) -> None:
        on_disk = version_folders(entry.base_path)
        if not on_disk and entry.name not in self._warned:
            self._warned.add(entry.name)
            log.warning("No versions of servable %s found under base path %s%s", entry.name, entry.base_path,
                        "" if os.path.isdir(entry.base_path) else " (no such folder)")
        elif on_disk:
            self._warned.discard(entry.name)
        wanted = aspired(entry, on_disk)
        states = self._states[entry.name]
        for version in sorted(wanted, reverse=True):
            known = states.get(version)
            if known is None or (known.state == "END" and known.error_code == "OK"):  # new, or unloaded before
                self._load(entry.name, VersionState(version, on_disk[version]))
            elif known.state == "END" and fingerprint(on_disk[version]) != known.fingerprint:
                log.info("Version folder %s changed since its load failed: loading it again", on_disk[version])
                self._load(entry.name, VersionState(version, on_disk[version]))  # failed, and changed since
        available = [v for v, s in states.items() if s.state == "AVAILABLE" and v in wanted]
        for version, state in list(states.items()):
            gone = version not in on_disk
            if gone and state.state == "END" and state.error_code != "OK":
                with self._lock:
                    del states[version]  # a failed version whose folder went: forget it, reload if it returns
            elif state.state == "AVAILABLE" and version not in wanted and (available or gone):
                self._unload(entry.name, state)

    def _load(self, name: str, state: VersionState) -> None:
        with self._lock:
            state.state = "LOADING"
            self._states[name][state.version] = state
        log.info("Loading servable: {name: %s version: %d} from %s", name, state.version, state.path)
        try:
            servable = Servable.load(name, state.version, state.path, self.batching, self.method_check)
        except ServingError as e:
            log.error("Loading servable: {name: %s version: %d} failed: %s", name, state.version, e.message)
            with self._lock:
                state.state, state.error_code, state.error_message = "END", e.code, e.message
            return
        with self._lock:
            state.servable, state.state = servable, "AVAILABLE"
        log.info("Successfully loaded servable version {name: %s version: %d}", name, state.version)

    def _unload(self, name: str, state: VersionState) -> None:
        with self._lock:
            state.state = "UNLOADING"
        log.info("Unloading servable version {name: %s version: %d}", name, state.version)
        with self._lock:
            state.servable, state.state = None, "END"  # requests holding it finish; Python frees it after

    def status(self, name: str, version: int | None = None, label: str | None = None) -> list[VersionState]:
        """GetModelStatus: every known version of the model (END ones included), or one."""
        if label is not None:
            version = self._label_version(name, label)
        with self._lock:
            states = dict(self._states.get(name, {}))
        if version is None:
            if not states:
                raise ServingError("NOT_FOUND", f"Could not find any versions of model {name}")
            return [states[v] for v in sorted(states)]
        if version not in states:
            raise ServingError("NOT_FOUND", f"Could not find version {version} of model {name}")
        return [states[version]]

    def servable(self, name: str, version: int | None = None, label: str | None = None) -> Servable:
        """The servable for a request: latest available, a specific version, or a label's version."""
        if label is not None:
            version = self._label_version(name, label)
        with self._lock:
            states = self._states.get(name, {})
            available = {v: s.servable for v, s in states.items() if s.state == "AVAILABLE"}
        if version is None:
            if available:
                return available[max(available)]
            raise ServingError("NOT_FOUND", f"Servable not found for request: Latest({name})")
        if version in available:
            return available[version]
        raise ServingError("NOT_FOUND", f"Servable not found for request: Specific({name}, {version})")

    def _label_version(self, name: str, label: str) -> int:
        entry = self.entries.get(name)
        if entry is None or label not in entry.labels:
            raise ServingError("INVALID_ARGUMENT", f"Unrecognized servable version label: {label}")
        return entry.labels[label]

    def available(self) -> dict[str, list[int]]:
        """model -> its AVAILABLE versions (for logs and the CLI's start-up line)."""
        with self._lock:
            return {name: sorted(v for v, s in states.items() if s.state == "AVAILABLE")
                    for name, states in self._states.items()}
