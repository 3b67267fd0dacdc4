"""Extractive question answering (SQuAD v1.1) as pure Python: windows over long contexts, span decoding and
the official scores. No TensorFlow here: the model only gives start/end logits per window.

- Contexts are cut into *units*, runs of word characters or single punctuation marks with their character
  spans (what BERT's basic tokenizer splits on), and each unit into word pieces. A predicted span of pieces
  maps back to units, and the answer is the context's own characters between them, so spacing, case and
  accents come out as written.
- `make_features`: `[CLS] question [SEP] window [SEP]` with google-research/bert's document stride: windows
  of the context start every `doc_stride` pieces; a piece seen in several windows is scored only in the
  window where it has the most context on both sides (`is_max_context`). For training, an answer outside a
  window points at `[CLS]` (position 0), as in BERT.
- `best_answers`: n-best decoding over every window of an example: top `n_best` starts and ends, legal pairs
  (inside the context, start max-context, start <= end, at most `max_answer_length` pieces), scored by
  start + end logit.
- `normalize_answer`, `exact_match`, `f1`, `evaluate`: the official v1.1 evaluation (lower-case, remove
  punctuation and the articles a/an/the, collapse whitespace; the best score over the gold answers).

Example:
    features = make_features(examples, unit_pieces, question_pieces, cls_id=2, sep_id=3, max_seq_length=128,
                             doc_stride=64, max_query_length=32)
    text = best_answers(example, [(f, start_logits[i], end_logits[i]) for i, f in ...])[0][0]
"""

import collections
import dataclasses
import re
import string

import numpy as np

UNIT = re.compile(r"[^\W_]+|[^\w\s]|_", re.UNICODE)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question. `answers`: (text, character start) pairs; `article`: its article's index."""

    qid: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    article: int = 0


def split_units(text: str) -> list[tuple[int, int]]:
    """Character spans `[start, end)` of the word and punctuation units of `text`."""
    return [m.span() for m in UNIT.finditer(text)]


def answer_units(units: list[tuple[int, int]], start: int, text: str) -> tuple[int, int] | None:
    """The first and last unit overlapping the answer's characters, or None when none does."""
    end = start + len(text)
    inside = [i for i, (a, b) in enumerate(units) if a < end and b > start]
    return (inside[0], inside[-1]) if inside else None


@dataclasses.dataclass
class SquadWindow:
    """One window of one example, with fixed-length model inputs."""

    example_index: int
    input_word_ids: list[int]
    input_mask: list[int]
    input_type_ids: list[int]
    token_to_unit: dict[int, int]  # position in the window -> unit of the context
    is_max_context: dict[int, bool]
    start_position: int = 0
    end_position: int = 0


def doc_windows(length: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the windows over `length` context pieces, as google-research/bert makes them."""
    windows, start = [], 0
    while start < length:
        span = min(length - start, max_tokens)
        windows.append((start, span))
        if start + span == length:
            break
        start += min(span, stride)
    return windows or [(0, 0)]


def is_max_context(windows: list[tuple[int, int]], current: int, position: int) -> bool:
    """Whether window `current` gives piece `position` its most context (min of left and right, ties to the
    longer window)."""
    best, best_score = None, None
    for index, (start, span) in enumerate(windows):
        end = start + span - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * span
        if best_score is None or score > best_score:
            best, best_score = index, score
    return best == current


def make_features(examples: list[SquadExample], unit_pieces: list[list[list[int]]],
                  question_pieces: list[list[int]], cls_id: int, sep_id: int, max_seq_length: int,
                  doc_stride: int, max_query_length: int, training: bool = False) -> list[SquadWindow]:
    """Windows of every example.

    Args:
      examples: the questions.
      unit_pieces: per example, per context unit (`split_units`), its word-piece ids.
      question_pieces: per example, the question's word-piece ids.
      training: set start/end positions from the first answer (0 = `[CLS]` when outside the window).
    """
    features = []
    for index, (example, units, question) in enumerate(zip(examples, unit_pieces, question_pieces)):
        query = question[:max_query_length]
        pieces, piece_unit, unit_first = [], [], []
        for u, unit in enumerate(units):
            unit_first.append(len(pieces))
            pieces.extend(unit)
            piece_unit.extend([u] * len(unit))
        target = None
        if training and example.answers:
            span = answer_units(split_units(example.context), example.answers[0][1], example.answers[0][0])
            if span is not None:
                last = unit_first[span[1] + 1] - 1 if span[1] + 1 < len(units) else len(pieces) - 1
                target = (unit_first[span[0]], last)
        windows = doc_windows(len(pieces), max_seq_length - len(query) - 3, doc_stride)
        for w, (start, span) in enumerate(windows):
            ids = [cls_id, *query, sep_id]
            types = [0] * len(ids)
            token_to_unit, max_context = {}, {}
            for i in range(start, start + span):
                token_to_unit[len(ids)] = piece_unit[i]
                max_context[len(ids)] = is_max_context(windows, w, i)
                ids.append(pieces[i])
                types.append(1)
            ids.append(sep_id)
            types.append(1)
            pad = max_seq_length - len(ids)
            feature = SquadWindow(index, ids + [0] * pad, [1] * len(ids) + [0] * pad, types + [0] * pad,
                              token_to_unit, max_context)
            if target is not None and start <= target[0] and target[1] < start + span:
                offset = len(query) + 2 - start
                feature.start_position, feature.end_position = target[0] + offset, target[1] + offset
            features.append(feature)
    return features


def best_answers(example: SquadExample, scored: list[tuple[SquadWindow, np.ndarray, np.ndarray]], n_best: int = 20,
                 max_answer_length: int = 30) -> list[tuple[str, float]]:
    """The n best distinct answer texts for `example` with their probabilities (softmax over the kept
    candidates' start + end logits), best first; `[("", 1.0)]` when no legal span exists."""
    units = split_units(example.context)
    candidates = []
    for feature, start_logits, end_logits in scored:
        starts = np.argsort(-np.asarray(start_logits))[:n_best]
        ends = np.argsort(-np.asarray(end_logits))[:n_best]
        for s in starts:
            for e in ends:
                s, e = int(s), int(e)
                if s not in feature.token_to_unit or e not in feature.token_to_unit:
                    continue
                if not feature.is_max_context.get(s, False) or e < s or e - s + 1 > max_answer_length:
                    continue
                candidates.append((float(start_logits[s] + end_logits[e]), feature.token_to_unit[s],
                                   feature.token_to_unit[e]))
    candidates.sort(key=lambda c: -c[0])
    answers, seen = [], set()
    for score, first, last in candidates:
        text = example.context[units[first][0]:units[last][1]]
        if text not in seen:
            seen.add(text)
            answers.append((text, score))
        if len(answers) == n_best:
            break
    if not answers:
        return [("", 1.0)]
    scores = np.array([s for _, s in answers])
    probs = np.exp(scores - scores.max())
    probs /= probs.sum()
    return [(text, float(p)) for (text, _), p in zip(answers, probs)]


def first_sentence(context: str) -> str:
    """The baseline's guess: the context's first sentence."""
    return SENTENCE_END.split(context.strip(), maxsplit=1)[0]


# The official SQuAD v1.1 evaluation.

def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1(prediction: str, truth: str) -> float:
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def evaluate(examples: list[SquadExample], predictions: dict[str, str]) -> dict[str, float]:
    """`exact_match` and `f1` in percent, each the best over an example's gold answers; an unanswered
    question scores 0."""
    em = f = 0.0
    for example in examples:
        truths = [text for text, _ in example.answers]
        prediction = predictions.get(example.qid)
        if prediction is None or not truths:
            continue
        em += max(exact_match(prediction, t) for t in truths)
        f += max(f1(prediction, t) for t in truths)
    n = max(len(examples), 1)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f / n}
