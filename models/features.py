"""Moved: `python -m models.features` is now `python -m downstream.features`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m models.features has moved: run `python -m downstream.features` instead (same flags)")
