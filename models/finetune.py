"""Moved: `python -m models.finetune` is now `python -m downstream.finetune`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m models.finetune has moved: run `python -m downstream.finetune` instead (same flags)")
