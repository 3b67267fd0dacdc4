"""The demo's held-out split: a deterministic share of the corpus's documents, chosen by a stable hash of
each document's text, kept out of training so that the models are measured on text they never saw.

A document (BERT's format: lines of sentences, a blank line between documents) goes to the held-out file
when `stable_fraction(seed, text) < fraction`, so the choice is the same on every machine and does not depend
on the files' order; at least one document is held out (the one with the smallest fraction). `split` is pure;
`write_split` reads the corpus files and writes `train.txt` and `heldout.txt`, reused while they are unchanged.
"""

import glob
import gzip
import json
import os

from preprocessing.stable_random import stable_fraction

HELDOUT_FRACTION = 0.05
SEED = "heldout"


def documents(lines) -> list[list[str]]:
    """Lines -> documents (lists of non-blank lines), split at blank lines."""
    docs, current = [], []
    for line in lines:
        line = line.rstrip("\n")
        if line.strip():
            current.append(line)
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    return docs


def split(docs: list[list[str]], fraction: float = HELDOUT_FRACTION) -> tuple[list, list]:
    """Documents -> (train, heldout), each in corpus order; heldout holds at least one document when there
    are two or more."""
    shares = [stable_fraction(SEED, "\n".join(doc)) for doc in docs]
    held = {i for i, share in enumerate(shares) if share < fraction}
    if not held and len(docs) > 1:
        held = {min(range(len(docs)), key=shares.__getitem__)}
    return ([d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held])


def _write(path: str, docs: list[list[str]]) -> None:
    with open(path + ".partial", "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(doc) for doc in docs) + "\n")
    os.replace(path + ".partial", path)


def write_split(corpus: str, out_dir: str, key: list) -> dict:
    """Splits the documents of the files matching `corpus` into `out_dir/train.txt` and `out_dir/heldout.txt`
    (reused when `out_dir/split.json` has the same `key`); returns {train, heldout, *_documents}."""
    meta_path = os.path.join(out_dir, "split.json")
    if os.path.exists(meta_path):
        saved = json.load(open(meta_path))
        paths = {"train": os.path.join(out_dir, "train.txt"), "heldout": os.path.join(out_dir, "heldout.txt")}
        if saved.get("key") == key and all(map(os.path.exists, paths.values())):
            print(f"reusing {out_dir} (same corpus files)")
            return {**saved["split"], **paths}  # named from this run's out_dir: the demo_dir may be spelt otherwise
    docs = []
    for path in sorted(glob.glob(corpus)):
        with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8", errors="replace") as f:
            docs.extend(documents(f))
    train, heldout = split(docs)
    os.makedirs(out_dir, exist_ok=True)
    result = {"train": os.path.join(out_dir, "train.txt"), "heldout": os.path.join(out_dir, "heldout.txt"),
              "train_documents": len(train), "heldout_documents": len(heldout)}
    _write(result["train"], train)
    _write(result["heldout"], heldout)
    with open(meta_path, "w") as f:
        json.dump({"key": key, "split": result}, f)
    return result
