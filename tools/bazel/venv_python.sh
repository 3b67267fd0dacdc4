#!/bin/sh
# The Python interpreter of the Bazel toolchain (tools/bazel/BUILD): the project's .venv, found from the real
# location of this script. Bazel calls it through runfiles or sandbox symlinks into the source tree, so
# `readlink -f` leads back to <workspace>/tools/bazel/venv_python.sh whatever the calling directory.
# Third-party packages therefore come from .venv (created by `make test`), not from Bazel: a deliberate
# non-hermeticity, documented in the README.
root=$(dirname "$(dirname "$(dirname "$(readlink -f "$0")")")")
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
    echo "venv_python.sh: $python not found; run \`make test\` or \`make demo\` once to create .venv" >&2
    exit 1
fi
exec "$python" "$@"
