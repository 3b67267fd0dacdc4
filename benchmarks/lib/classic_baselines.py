"""The baselines a reviewer runs first, on the same splits as the fine-tuned arms (the training file less
`downstream.finetune.selection.carve`'s validation split; settings chosen on that split, scored on dev):

  - `majority`: the most frequent training label (or tag) for every example (word);
  - `bow_logreg`: scikit-learn's logistic regression on a bag of unigrams and bigrams (counts of lower-cased
    tokens, `CountVectorizer`), its inverse L2 strength `C` chosen on the validation split;
  - `most_frequent_tag`: each word's most frequent training tag, the most frequent tag overall for a word
    never seen (`downstream.finetune.task_data.tag_baseline`, what `metrics.json` reports beside a tagger).

Example:
    split = splits(train_examples, 0.1)
    bow_logreg(split.train, split.validation, dev_examples)  # {"score": 0.79, "chosen": {"C": 1.0}, ...}
"""

import collections
import dataclasses

from downstream.finetune import selection
from downstream.finetune import task_data

C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


@dataclasses.dataclass(frozen=True)
class Split:
    train: list
    validation: list


def splits(examples: list, validation_fraction: float) -> Split:
    """The fine-tuned arms' split of the training file (`selection.carve`)."""
    return Split(*selection.carve(examples, validation_fraction))


def majority(train: list, dev: list) -> dict:
    """Accuracy of the majority training label (classification) or tag (tagging) on `dev`."""
    if isinstance(train[0], task_data.TaggedSentence):
        overall = task_data.most_frequent_tags(train)[1]
        gold = [t for s in dev for t in s.tags]
        return {"score": sum(t == overall for t in gold) / len(gold), "chosen": {"tag": overall}}
    label = task_data.majority_label(train)
    return {"score": sum(e.label == label for e in dev) / len(dev), "chosen": {"label": label}}


def bow_logreg(train: list, validation: list, dev: list, c_grid=C_GRID, seed: int = 0) -> dict:
    """A bag-of-n-grams (1-2) logistic regression: `C` by validation accuracy (the smaller of equals), refit
    on the training split alone, scored on `dev`."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = CountVectorizer(ngram_range=(1, 2), lowercase=True, token_pattern=r"(?u)\b\w+\b|[^\w\s]")
    x_train = vectorizer.fit_transform([e.texts[0] for e in train])
    x_validation, x_dev = (vectorizer.transform([e.texts[0] for e in part]) for part in (validation, dev))
    y_train = [e.label for e in train]
    scores = {}
    for c in c_grid:
        model = LogisticRegression(C=c, solver="liblinear", max_iter=1000, random_state=seed).fit(x_train, y_train)
        scores[c] = model.score(x_validation, [e.label for e in validation])
    best = max(c_grid, key=lambda c: (scores[c], -c))
    model = LogisticRegression(C=best, solver="liblinear", max_iter=1000, random_state=seed).fit(x_train, y_train)
    return {"score": model.score(x_dev, [e.label for e in dev]),
            "chosen": {"C": best, "validation_score": scores[best], "features": x_train.shape[1]}}


def most_frequent_tag(train: list, dev: list) -> dict:
    """Word accuracy of each word's most frequent training tag on `dev`, with the accuracy on words seen in
    training and the share of dev words never seen (what separates corpora's published figures)."""
    per_word, _ = task_data.most_frequent_tags(train)
    predicted = task_data.tag_baseline(train, dev)
    pairs = [(w, g, p) for s, ps in zip(dev, predicted) for w, g, p in zip(s.words, s.tags, ps)]
    known = [(g, p) for w, g, p in pairs if w in per_word]
    counts = collections.Counter(g == p for _, g, p in pairs)
    return {"score": counts[True] / len(pairs),
            "chosen": {"known_word_accuracy": round(sum(g == p for g, p in known) / max(len(known), 1), 4),
                       "unknown_word_share": round(1 - len(known) / len(pairs), 4)}}
