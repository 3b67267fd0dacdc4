"""Scores of a tagging: word accuracy, and for IOB tags conlleval's entity precision, recall and F1. Pure
Python; the tagging task (`tasks.TagTask`) and the peers of `benchmarks.downstream.finetune_parity` score with it.

Example:
    tag_scores([("B-PER", "I-PER", "O")], [["B-PER", "O", "O"]])  # accuracy 2/3, precision 0, recall 0, f1 0
"""


def entities(tags: list[str]) -> set[tuple[int, int, str]]:
    """IOB1/IOB2 chunks `(start, end, type)` as conlleval (and seqeval's default mode) reads them: a chunk
    starts at `B-X`, or at `I-X` after anything but a chunk of type X, and ends before `O`, `B-` or a
    change of type."""
    chunks, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-") if tag != "O" else ("O", "", "")
        if start is not None and (prefix != "I" or label != kind):
            chunks.add((start, i, kind))
            start = None
        if prefix in ("B", "I") and start is None:
            start, kind = i, label
    return chunks


def tag_scores(gold: list[tuple[str, ...]], predicted: list[list[str]]) -> dict:
    """`accuracy` over words; `precision`, `recall`, `f1` over entities when every gold tag is `O` or IOB."""
    words = sum(len(g) for g in gold)
    correct = sum(p == g for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps))
    scores = {"accuracy": correct / max(words, 1)}
    if all(t == "O" or t[:2] in ("B-", "I-") for g in gold for t in g):
        found = sum(len(entities(p)) for p in predicted)
        true = sum(len(entities(g)) for g in gold)
        hit = sum(len(entities(p) & entities(g)) for g, p in zip(gold, predicted))
        precision, recall = hit / max(found, 1), hit / max(true, 1)
        scores.update(precision=precision, recall=recall,
                      f1=2 * precision * recall / (precision + recall) if hit else 0.0)
    return scores
