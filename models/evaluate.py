"""Moved: `python -m models.evaluate` is now `python -m models.training.evaluate`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m models.evaluate has moved: run `python -m models.training.evaluate` instead (same flags)")
