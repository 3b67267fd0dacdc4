"""Readers for the fine-tuning tasks' files, deterministic splits, label vocabularies and the trivial
baselines every metric is reported against. Pure Python (no TensorFlow ops); splits hash with the house's
`preprocessing.stable_random.stable_fraction`.

Formats (UTF-8):
Lines are read to their first MiB (`MAX_LINE_BYTES`; the rest of a longer one is skipped, never held); labels
and tags may not be empty.
  - classify: `label<TAB>sentence` per line (SST-2's layout).
  - pair: `label<TAB>sentence_a<TAB>sentence_b` per line (MNLI/QQP-style pairs, label any string).
  - tag: CoNLL-like, `token<TAB>tag[<TAB>more columns]` per line, a blank line between sentences; the tag is
    column `tag_column` (1: UPOS in UD files, the IOB2 tag in NER files). Lines starting with `#` are comments.
  - squad: SQuAD v1.1 JSON (`data[].paragraphs[].qas[]`).
  - choice: JSON lines `{"context": "...", "choices": ["...", ...], "label": 0}` (every line the same number
    of choices; SWAG/ROCStories-style).
"""

import codecs
import collections
import dataclasses
import json

from commands.user_errors import UserError
from downstream.finetune.squad import SquadExample, first_sentence
from preprocessing.stable_random import stable_fraction


class TaskDataError(UserError):
    """A task file is missing or malformed; the message names the file and line (a `UserError`: one line at
    the command's edge)."""


@dataclasses.dataclass(frozen=True)
class TextExample:
    """`texts`: one sentence (classify), two (pair) or a context followed by its choices (choice)."""

    texts: tuple[str, ...]
    label: str
    line: int = dataclasses.field(default=0, compare=False)  # in its file, for messages


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]


def check_file(flag: str, path: str) -> str:
    """`path` must be a readable file (not a folder); raises `TaskDataError` naming `flag`."""
    import os

    if not os.path.exists(path):
        raise TaskDataError(f"{flag} {path}: no such file")
    if os.path.isdir(path):
        raise TaskDataError(f"{flag} {path} is a folder; give the task file")
    if not os.access(path, os.R_OK):
        raise TaskDataError(f"{flag} {path} cannot be read (permission denied)")
    return path


MAX_LINE_BYTES = 1 << 20  # a longer line is read as its first MiB (the rest is never held in memory)


def _lines(path: str, cut: list | None = None):
    """`(number, line)` from 1, each line (newline kept) at most `MAX_LINE_BYTES` long: a longer one is read as
    its first MiB and its number appended to `cut`."""
    try:
        with open(path, "rb") as f:
            number = 0
            while raw := f.readline(MAX_LINE_BYTES + 1):
                number += 1
                over = len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n")
                if over:
                    while (rest := f.readline(1 << 16)) and not rest.endswith(b"\n"):
                        pass  # past the rest of the line, 64 KiB at a time
                    if cut is not None:
                        cut.append(number)
                text = _decode(raw[:MAX_LINE_BYTES] if over else raw, path, number, over)
                yield number, text + "\n" if over else text
    except FileNotFoundError:
        raise TaskDataError(f"task file not found: {path}") from None
    except IsADirectoryError:
        raise TaskDataError(f"{path} is a folder; give the task file") from None


def _decode(raw: bytes, path: str, number: int, cut: bool) -> str:
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(raw, final=not cut)  # a cut may split a character
    except UnicodeDecodeError as e:
        raise TaskDataError(f"{path}:{number} is not UTF-8 text ({e.reason} at byte {e.start} of the line)") from None


def read_classification(path: str, fields: int = 1, cut: list | None = None) -> list[TextExample]:
    """`label<TAB>text[<TAB>text_b]` lines; `fields` texts per line (1 classify, 2 pair). An empty label is
    refused (it would become a class named "")."""
    examples = []
    for number, line in _lines(path, cut):
        line = line.rstrip("\n\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != fields + 1:
            raise TaskDataError(f"{path}:{number}: expected label and {fields} text field(s) separated by tabs, "
                                f"got {len(parts)} field(s)")
        if not parts[0].strip():
            raise TaskDataError(f"{path}:{number}: the label (the first field) is empty: give every line its label")
        examples.append(TextExample(tuple(parts[1:]), parts[0], number))
    if not examples:
        raise TaskDataError(f"{path} holds no example")
    return examples


def read_choices(path: str, cut: list | None = None) -> list[TextExample]:
    examples = []
    for number, line in _lines(path, cut):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            context, choices, label = row["context"], list(row["choices"]), int(row["label"])
        except (ValueError, KeyError, TypeError) as e:
            raise TaskDataError(f"{path}:{number}: expected {{context, choices, label}}: {e}") from None
        if not 0 <= label < len(choices) or (examples and len(choices) != len(examples[0].texts) - 1):
            raise TaskDataError(f"{path}:{number}: label {label} out of range or a different number of choices")
        examples.append(TextExample((context, *choices), str(label), number))
    if not examples:
        raise TaskDataError(f"{path} holds no example")
    return examples


def read_conll(path: str, tag_column: int = 1, cut: list | None = None) -> list[TaggedSentence]:
    sentences, words, tags = [], [], []
    for number, line in _lines(path, cut):
        line = line.rstrip("\n\r")
        if line.startswith("#"):
            continue
        if not line.strip():
            if words:
                sentences.append(TaggedSentence(tuple(words), tuple(tags)))
                words, tags = [], []
            continue
        parts = line.split("\t")
        if len(parts) <= tag_column or not parts[tag_column].strip():
            raise TaskDataError(f"{path}:{number}: no tag in column {tag_column}: {line[:80]!r}")
        words.append(parts[0])
        tags.append(parts[tag_column])
    if words:
        sentences.append(TaggedSentence(tuple(words), tuple(tags)))
    if not sentences:
        raise TaskDataError(f"{path} holds no sentence")
    return sentences


def read_squad(path: str) -> list[SquadExample]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
    except FileNotFoundError:
        raise TaskDataError(f"task file not found: {path}") from None
    except IsADirectoryError:
        raise TaskDataError(f"{path} is a folder; give the task file") from None
    except (ValueError, KeyError) as e:
        raise TaskDataError(f"{path}: not SQuAD v1.1 JSON: {e}") from None
    return [SquadExample(qa["id"], qa["question"], paragraph["context"],
                         tuple((a["text"], int(a["answer_start"])) for a in qa.get("answers", ())), article)
            for article, entry in enumerate(data) for paragraph in entry["paragraphs"] for qa in paragraph["qas"]]


def split_items(items: list, heldout: float, key=lambda index, item: str(index), seed: int = 0):
    """`(train, heldout)`: each item goes to heldout when `stable_fraction(seed, key(i, item)) < heldout`
    (`preprocessing.stable_random`, the house's stable hash)."""
    train, rest = [], []
    for index, item in enumerate(items):
        (rest if stable_fraction(seed, key(index, item)) < heldout else train).append(item)
    return train, rest


def label_list(examples: list) -> list[str]:
    """The sorted label (or tag) set of `examples`."""
    if examples and isinstance(examples[0], TaggedSentence):
        return sorted({t for s in examples for t in s.tags})
    return sorted({e.label for e in examples}, key=lambda x: (len(x), x))


def check_eval_labels(examples: list, labels: list[str], path: str) -> None:
    """Raises `TaskDataError` when `examples` (classify, pair) have labels outside the training `labels`:
    such an example can only be scored wrongly (or, mapped to some label, rightly by accident)."""
    if not examples or not isinstance(examples[0], TextExample):
        return
    known = set(labels)
    unseen = collections.defaultdict(list)
    for e in examples:
        if e.label not in known:
            unseen[e.label].append(e.line)
    if unseen:
        lines = sorted(n for ns in unseen.values() for n in ns)
        shown = ", ".join(map(str, lines[:10])) + (f", ... ({len(lines)} lines)" if len(lines) > 10 else "")
        names = ", ".join(repr(k) for k in sorted(unseen)[:10]) + (" ..." if len(unseen) > 10 else "")
        raise TaskDataError(f"{path}: label(s) {names} not among the training labels ({', '.join(labels)}), "
                            f"line(s) {shown}: fix the labels, or train on data that has them")


# Baselines: what a model that ignores the input (or context) gets.

def majority_label(examples: list[TextExample]) -> str:
    return collections.Counter(e.label for e in examples).most_common(1)[0][0]


def most_frequent_tags(sentences: list[TaggedSentence]) -> tuple[dict[str, str], str]:
    """Per word form, its most frequent tag in `sentences`; and the most frequent tag overall."""
    counts = collections.defaultdict(collections.Counter)
    overall = collections.Counter()
    for sentence in sentences:
        for word, tag in zip(sentence.words, sentence.tags):
            counts[word][tag] += 1
            overall[tag] += 1
    return {w: c.most_common(1)[0][0] for w, c in counts.items()}, overall.most_common(1)[0][0]


def tag_baseline(train: list[TaggedSentence], sentences: list[TaggedSentence]) -> list[list[str]]:
    per_word, overall = most_frequent_tags(train)
    return [[per_word.get(w, overall) for w in s.words] for s in sentences]


def squad_baseline(examples: list[SquadExample]) -> dict[str, str]:
    return {e.qid: first_sentence(e.context) for e in examples}
