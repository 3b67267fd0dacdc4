"""Moved: `python -m pipeline.demo` is now `python -m demo`."""

import sys

if __name__ == "__main__":
    sys.exit("python -m pipeline.demo has moved: run `python -m demo` instead (same flags)")
