"""Moved: `python -m models.curves` is now `python -m models.training.curves`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m models.curves has moved: run `python -m models.training.curves` instead (same flags)")
