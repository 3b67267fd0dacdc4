"""Moved: `python -m models.evaluate_senses` is now `python -m downstream.evaluate_senses`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m models.evaluate_senses has moved: run `python -m downstream.evaluate_senses` instead (same flags)")
