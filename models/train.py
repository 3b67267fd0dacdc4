"""Moved: `python -m models.train` is now `python -m models.training.train`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m models.train has moved: run `python -m models.training.train` instead (same flags)")
