"""The `main` of every py_test (tools/bazel/python.bzl): runs pytest on the test file(s) named in argv.

Bazel runs this from the test's runfiles tree (`<name>.runfiles/contextual_pretraining_pipeline/`), which holds
the project's modules as the BUILD `deps` list them; pytest runs there with the project's pytest.ini, so
imports, `ROOT` in tests/conftest.py and the `python -m ...` subprocesses that tests start (cwd=ROOT,
PYTHONPATH=ROOT) all see what the BUILD files declare. What the runfiles lack is pointed at its real place:
  - SHARED_DATA: `<source root>/../shared/data`, as tests/conftest.py defaults to outside Bazel;
  - PROJECT_CACHE: `<source root>/.cache`, the downloaded reference checkpoints (read-only in Bazel's
    sandbox, like the whole source tree: `make test` fills it);
  - HOME, which Bazel leaves unset: the test's own TEST_TMPDIR.
An explicit value in the environment (`bazel test --test_env=SHARED_DATA=...`) wins. The source root is found
from the real path of this file, since runfiles and sandbox entries are symlinks into the source tree.
Exits with pytest's status and writes JUnit XML where Bazel asks for it ($XML_OUTPUT_FILE).
"""

import os
import sys

import pytest

_HERE = os.path.abspath(__file__)
RUNFILES_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(_HERE))))


def pytest_args(argv: list[str]) -> list[str]:
    """pytest's command line: the project's ini file and rootdir, no cache writes into runfiles, Bazel's XML."""
    args = ["-c", os.path.join(RUNFILES_ROOT, "pytest.ini"), "--rootdir", RUNFILES_ROOT, "-p", "no:cacheprovider"]
    if os.environ.get("TEST_TMPDIR"):
        args += ["--basetemp", os.path.join(os.environ["TEST_TMPDIR"], "pytest")]
    if os.environ.get("XML_OUTPUT_FILE"):
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"]]
    return args + argv


def main(argv: list[str]) -> int:
    os.environ.setdefault("SHARED_DATA", os.path.join(os.path.dirname(SOURCE_ROOT), "shared", "data"))
    os.environ.setdefault("PROJECT_CACHE", os.path.join(SOURCE_ROOT, ".cache"))
    if os.environ.get("TEST_TMPDIR"):  # Bazel 4 sets no HOME; the real one is read-only in the sandbox
        os.environ.setdefault("HOME", os.environ["TEST_TMPDIR"])
    # No __pycache__ folders in the runfiles tree (here and in the subprocesses tests start).
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    os.chdir(RUNFILES_ROOT)
    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
