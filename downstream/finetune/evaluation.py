"""Scoring a fine-tuned model on the eval examples, each metric beside the trivial baseline a model that
ignores its input (or context) would get: accuracy against the majority class (classify, pair, choice), word
accuracy and entity F1 (`ner_scores`) against the most frequent tag of each word, SQuAD's exact match and F1
against the context's first sentence. `evaluate` runs the model; each task (`tasks.py`) names its scores.

Example:
    metrics, predictions = evaluate(task, model, eval_encoded, eval_examples, train_examples, labels, config)
    metrics["accuracy"], metrics["baseline"]["accuracy"]
"""

import numpy as np

from downstream.finetune import inputs as inputs_lib
from downstream.finetune import squad
from downstream.finetune import task_data
from downstream.finetune.ner_scores import tag_scores


def evaluate(task, model, encoded, examples: list, train_examples: list, labels: list[str], config):
    """The task's metrics on `examples` (encoded as `encoded`) and its predictions to write beside them (SQuAD's
    answers by question id; None for the other tasks)."""
    outputs = model.predict(encoded.x, batch_size=config.eval_batch_size, verbose=0)
    metrics = task.metrics(outputs, encoded, examples, train_examples, labels, config)
    return metrics, metrics.pop("predictions", None)


def accuracy_metrics(outputs: dict, encoded, examples: list, train_examples: list) -> dict:
    """Accuracy of the `logits` `[N, K]` argmax against the majority training label's."""
    predicted = outputs["logits"].argmax(-1)  # [N]
    accuracy = float(np.mean(predicted == encoded.y["logits"]))
    majority = task_data.majority_label(train_examples)
    return {"accuracy": accuracy, "baseline": {"name": f"majority class of the training data ({majority})",
                                               "accuracy": float(np.mean([e.label == majority for e in examples]))}}


def tagging_metrics(outputs: dict, encoded, sentences: list, train_sentences: list, labels: list[str]) -> dict:
    """`tag_scores` of each word's tag (read at its first position of the `logits` `[N, T, K]`; words cut off
    get the most frequent training tag), of the most-frequent-tag-per-word baseline and of the majority tag."""
    per_word, overall = task_data.most_frequent_tags(train_sentences)
    predicted = inputs_lib.words_from_positions(outputs["logits"], encoded.positions, labels, overall)
    gold = [s.tags for s in sentences]
    return {**tag_scores(gold, predicted),
            "baseline": {"name": "most frequent tag of the word in training (else the most frequent tag)",
                         **tag_scores(gold, task_data.tag_baseline(train_sentences, sentences))},
            "majority_baseline": {"name": f"always {overall}",
                                  **tag_scores(gold, [[overall] * len(s.words) for s in sentences])}}


def squad_metrics(outputs: dict, encoded, examples: list, config) -> dict:
    """SQuAD v1.1's exact match and F1 of the best answer over every window of each question, with the
    answers themselves under `predictions`."""
    by_example = {}
    for i, feature in enumerate(encoded.features):
        by_example.setdefault(feature.example_index, []).append(
            (feature, outputs["start_logits"][i], outputs["end_logits"][i]))
    predictions = {e.qid: squad.best_answers(e, by_example.get(n, []), config.n_best,
                                              config.max_answer_length)[0][0] for n, e in enumerate(examples)}
    return {**squad.evaluate(examples, predictions), "predictions": predictions,
            "baseline": {"name": "first sentence of the context",
                         **squad.evaluate(examples, task_data.squad_baseline(examples))}}
