"""Model selection on held-out data: the validation split carved from the training file, the epoch kept by
its validation score (with early stopping), and the peak rate picked from a grid. Dev (the eval file) is
never read here: the run (`run.py`) encodes and scores it only once the selection is made.

  - `carve`: a fixed share of the training examples, chosen by a stable hash of each example's text (seed 0,
    never the run's seed), so every module, rate and seed sees the same split, and duplicates of one text
    land on the same side;
  - `BestEpoch`: a tf_keras callback that scores the validation split after each epoch, keeps the best
    epoch's weights, stops after `patience` epochs without a better score and restores the best at the end;
  - `select`: one run per rate of `FinetuneConfig.rates`, the best validation score kept (ties: the earlier
    rate of the grid), with each run's epoch scores for the record.

Example:
    train, validation = carve(examples, 0.1)
    chosen = select(task, backbone, config, data, log=print)
    chosen.learning_rate, chosen.epochs, chosen.score, chosen.model
"""

import dataclasses
import time

from commands.user_errors import UserError
from downstream.finetune import task_data

SPLIT_SEED = 0  # the carve-out's hash seed: one split for every run


def example_key(example) -> str:
    """The text an example is hashed by: its texts (classify, pair, choice), its words (tagging), its
    question id (SQuAD)."""
    if isinstance(example, task_data.TaggedSentence):
        return " ".join(example.words)
    if isinstance(example, task_data.TextExample):
        return "\t".join(example.texts)
    return str(example.qid)


def carve(examples: list, fraction: float) -> tuple[list, list]:
    """`(train, validation)`: each example goes to validation when the stable hash of its text falls under
    `fraction` (`task_data.split_items`); both keep the file's order."""
    return task_data.split_items(examples, fraction, key=lambda _, example: example_key(example), seed=SPLIT_SEED)


@dataclasses.dataclass(frozen=True)
class Data:
    """What selection trains and scores on: the training examples and their encoding, the validation
    examples and theirs (None: no validation split), and the label names."""
    train: list
    train_encoded: object
    validation: list | None
    validation_encoded: object | None
    labels: list


@dataclasses.dataclass(frozen=True)
class Run:
    """One rate's run: its validation score after each epoch, the epoch kept (1-based), its score."""
    learning_rate: float
    epoch_scores: list
    best_epoch: int
    best_score: float | None
    steps: int
    losses: list
    seconds: float

    def record(self) -> dict:
        return {"learning_rate": self.learning_rate, "epoch_scores": list(self.epoch_scores),
                "best_epoch": self.best_epoch, "best_score": self.best_score, "seconds": round(self.seconds, 1)}


@dataclasses.dataclass(frozen=True)
class Selected:
    """The kept model, its run, every run of the grid, and the metric that chose."""
    model: object
    run: Run
    runs: list
    metric: str | None

    @property
    def learning_rate(self) -> float:
        return self.run.learning_rate

    @property
    def epochs(self) -> int:
        return self.run.best_epoch

    def record(self, validation_examples: int) -> dict:
        """`metrics.json`'s `selection`: what was tried and what was chosen."""
        return {"metric": self.metric, "validation_examples": validation_examples,
                "runs": [r.record() for r in self.runs],
                "chosen": {"learning_rate": self.learning_rate, "epochs": self.epochs,
                           "validation_score": self.run.best_score}}


def metric_name(task, config) -> str:
    return config.select_on or task.select_metric


def validation_score(task, model, data: Data, config) -> float:
    """The selection metric of `model` on the validation split."""
    from downstream.finetune import evaluation

    metrics, _ = evaluation.evaluate(task, model, data.validation_encoded, data.validation, data.train,
                                     data.labels, config)
    name = metric_name(task, config)
    if name not in metrics:
        raise UserError(f"select_on={name}: the {task.name} task scores "
                        f"{', '.join(k for k, v in metrics.items() if isinstance(v, float))}")
    return float(metrics[name])


def best_epoch_callback(score, patience: int, log=print):
    """A tf_keras callback: `score(model)` after each epoch; the best epoch's weights restored at the end
    (the earliest of equal scores); training stops after `patience` epochs without a better one (0: never).
    Its `scores` and `best_epoch` (1-based) are read after `fit`."""
    import tf_keras

    class BestEpoch(tf_keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.scores, self.best_epoch, self.best_weights = [], 0, None

        def on_epoch_end(self, epoch, logs=None):
            self.scores.append(score(self.model))
            if self.best_weights is None or self.scores[-1] > self.scores[self.best_epoch - 1]:
                self.best_epoch, self.best_weights = epoch + 1, self.model.get_weights()
            log(f"epoch {epoch + 1}: validation {self.scores[-1]:.4f} (best {self.scores[self.best_epoch - 1]:.4f}"
                f", epoch {self.best_epoch})")
            if patience and epoch + 1 - self.best_epoch >= patience:
                self.model.stop_training = True

        def on_train_end(self, logs=None):
            if self.best_weights is not None:
                self.model.set_weights(self.best_weights)

    return BestEpoch()


def select(task, backbone, config, data: Data, log=print) -> Selected:
    """Trains one model per rate of `config.rates` and keeps the best on the validation split; without one,
    the single rate's model after its last epoch. Raises `UserError` for a grid without a validation split."""
    from downstream.finetune import training

    if data.validation is None and len(config.rates) > 1:
        raise UserError("learning_rates needs a validation split: give --validation FILE or "
                        "--set validation_fraction=0.1")
    best, runs = None, []
    for rate in config.rates:
        run_config = dataclasses.replace(config, learning_rate=rate)
        model = task.build_model(backbone, max(len(data.labels), 1), run_config, data.train_encoded.sequences,
                                 task.task_words(backbone, data.train, run_config))
        callbacks = []
        if data.validation is not None:
            callbacks = [best_epoch_callback(lambda m: validation_score(task, m, data, run_config), config.patience,
                                             log)]
        started = time.time()
        trained = training.fit(model, task, data.train_encoded, run_config, log, callbacks=callbacks)
        scores = callbacks[0].scores if callbacks else []
        epoch = callbacks[0].best_epoch if callbacks else len(trained.losses)
        runs.append(Run(rate, scores, epoch, scores[epoch - 1] if scores else None, trained.steps, trained.losses,
                        time.time() - started))
        if len(config.rates) > 1:
            log(f"learning_rate {rate:g}: validation {runs[-1].best_score:.4f} at epoch {epoch}")
        if best is None or (runs[-1].best_score or 0.0) > (best[1].best_score or 0.0):
            best = (model, runs[-1])
    return Selected(best[0], best[1], runs, metric_name(task, config) if data.validation is not None else None)
