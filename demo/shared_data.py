"""Where the shared data set lives: `$SHARED_DATA`, else `shared/data` beside the checkout (`../shared/data`
from the project root). The one place that knows it: the demo, the tests and the benchmarks take their
default paths from here."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the project root
SHARED_DATA = os.environ.get("SHARED_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))


def path(*parts: str) -> str:
    """A path under the shared data, e.g. `path("corpus", "pretrain.txt.gz")`."""
    return os.path.join(SHARED_DATA, *parts)
