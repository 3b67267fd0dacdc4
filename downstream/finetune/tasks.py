"""The fine-tuning tasks, one object per kind: classify, pair, tag, squad and choice. A `FinetuneTask` owns
everything that differs by task: how its files are read and its labels found, how its examples are encoded
(`encoding.py`), which head each module family gets (`heads.py`), its loss, its metrics (`evaluation.py`) and
its text-in serving signature (`export.py`). The run (`run.py`) looks a task up once, by name (`get`), and
knows nothing else about it, as the pretraining loop knows a model family only through its
`models.objective.PretrainingTask`.

Example:
    task = get("pair")
    task.families, task.read("pairs.tsv")[0]  # ("bert", "gpt", "bilm"), TextExample(("a", "b"), "label")
"""

import abc

from commands.user_errors import UserError
from downstream.finetune import encoding
from downstream.finetune import evaluation
from downstream.finetune import inputs as inputs_lib
from downstream.finetune import task_data
from downstream.finetune.config import FinetuneConfig

DEFAULTS = FinetuneConfig()


class FinetuneTask(abc.ABC):
    """One kind of fine-tuning task.

    Subclasses set `name`, `heads` (module family -> the name of its head builder in `heads.py`; the
    families the task supports are its keys) and, for other outputs than `logits`, `outputs` and
    `loss_weights`.
    """

    name: str
    heads: dict[str, str]
    outputs: tuple[str, ...] = ("logits",)
    loss_weights: dict[str, float] | None = None
    select_metric: str = "accuracy"  # the validation metric that picks epochs and rates (`selection.py`)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(self.heads)

    @abc.abstractmethod
    def read(self, path: str, config: FinetuneConfig = DEFAULTS, cut: list | None = None) -> list:
        """The task file's examples (`task_data`); numbers of lines read as their first MiB go to `cut`."""

    def labels(self, train_examples: list) -> list[str]:
        """The label names, in the order of the model's logits."""
        return task_data.label_list(train_examples)

    def check_eval(self, eval_examples: list, labels: list[str], path: str) -> None:
        """Raises `TaskDataError` for eval examples the model cannot score. Default: none."""

    def refusal(self, kind: str, supported: list[str]) -> str:
        """Why a module of family `kind` cannot take this task (`supported`: the tasks it can take)."""
        return f"task {self.name!r} is not available for a {kind} module (it supports {', '.join(supported)})"

    @abc.abstractmethod
    def encode(self, backbone, examples: list, labels: list[str], config, training: bool) -> encoding.EncodedExamples:
        """Examples -> model inputs, targets and what evaluation needs (`training`: SQuAD keeps windows
        without the answer, pointing at `[CLS]`)."""

    def task_words(self, backbone, train_examples: list, config) -> tuple[str, ...]:
        """The head's own vocabulary from the training data. Default: none."""
        return ()

    def build_model(self, backbone, num_labels: int, config, sequences: int = 1, task_words=()):
        """The tf_keras task model over `backbone` (whose family the task must support: `check_module`);
        `config` is resolved (`FinetuneConfig.resolved`), `sequences` the S of the inputs."""
        import tf_keras

        from downstream.finetune import heads

        build = getattr(heads, self.heads[backbone.kind])
        tf_keras.utils.set_random_seed(config.seed)
        inputs, outputs = build(backbone, config, num_labels, sequences, task_words)
        return tf_keras.Model(inputs, outputs, name=f"{backbone.kind}_{self.name}")

    @abc.abstractmethod
    def metrics(self, outputs: dict, encoded, examples: list, train_examples: list, labels: list[str],
                config) -> dict:
        """The model's `outputs` on the eval examples -> metrics with their baselines (and `predictions`, to
        be written beside them, where the task has any)."""

    def fallback_tag(self, train_examples: list) -> str:
        """The served tag of words cut off by the length limit. Default: none."""
        return ""

    def exports(self, backbone) -> bool:
        """Whether the run writes a text-in serving export (`export.py`) for this module."""
        return True

    def serving(self, root):
        """The serving signature of `root` (an `export.TextTaskModel`) that reads this task's texts."""
        raise NotImplementedError(f"task {self.name} has no text-in serving form")


class TextTask(FinetuneTask):
    """Texts in, one label out (classify, pair, choice): `[N, S, ...]` inputs, accuracy against the
    majority class."""

    @abc.abstractmethod
    def sequences(self, kind: str, texts: list[tuple[str, ...]], gpt_pair: str) -> list[list[tuple[str, ...]]]:
        """How a module family reads the examples' texts: a list over sequences of each example's parts."""

    def encode(self, backbone, examples, labels, config, training):
        texts = encoding.window_texts(backbone, examples, config.max_seq_length)
        sequences = self.sequences(backbone.kind, texts, config.gpt_pair)
        return encoding.encode_texts(backbone, sequences, examples, labels, config.max_seq_length)

    def metrics(self, outputs, encoded, examples, train_examples, labels, config):
        return evaluation.accuracy_metrics(outputs, encoded, examples, train_examples)


class ClassifyTask(TextTask):
    name = "classify"
    heads = {"bert": "bert_classifier", "gpt": "gpt_classifier", "bilm": "bilm_classifier"}

    def read(self, path, config=DEFAULTS, cut=None):
        return task_data.read_classification(path, 1, cut)

    def check_eval(self, eval_examples, labels, path):
        task_data.check_eval_labels(eval_examples, labels, path)

    def sequences(self, kind, texts, gpt_pair):
        return [[t[:1] for t in texts]]

    def task_words(self, backbone, train_examples, config):
        if backbone.kind != "bilm" or config.bilm_task_model != "bilstm" or not config.task_word_dim:
            return ()
        from downstream.finetune.layers import task_vocabulary

        return task_vocabulary([(t,) for e in train_examples for t in e.texts], config.task_word_min_count)

    def serving(self, root):
        return root.text_signature()


class PairTask(ClassifyTask):
    name = "pair"

    def read(self, path, config=DEFAULTS, cut=None):
        return task_data.read_classification(path, 2, cut)

    def sequences(self, kind, texts, gpt_pair):
        pairs = inputs_lib.pair_sequences(kind, gpt_pair, [t[0] for t in texts], [t[1] for t in texts])
        return [list(zip(*sequence)) for sequence in pairs]

    def serving(self, root):
        return root.pair_signature()


class ChoiceTask(TextTask):
    name = "choice"
    heads = {"bert": "bert_choice", "gpt": "gpt_choice"}

    def read(self, path, config=DEFAULTS, cut=None):
        return task_data.read_choices(path, cut)

    def labels(self, train_examples):
        return [str(i) for i in range(len(train_examples[0].texts) - 1)]

    def refusal(self, kind, supported):
        return "the biLM has no multiple-choice head: use a BERT or GPT module"

    def sequences(self, kind, texts, gpt_pair):
        return [[(t[0], t[1 + c]) for t in texts] for c in range(len(texts[0]) - 1)]

    def serving(self, root):
        return root.choice_signature()


class TagTask(FinetuneTask):
    """One tag per word; labels sit on each word's first position. BERT tags pieces, the biLM tags words with
    a BiLSTM over ELMo and its own word vectors."""

    name = "tag"
    heads = {"bert": "bert_tagger", "bilm": "bilm_tagger"}

    def read(self, path, config=DEFAULTS, cut=None):
        return task_data.read_conll(path, config.tag_column, cut)

    def encode(self, backbone, examples, labels, config, training):
        return encoding.encode_tags(backbone, examples, labels, config.max_seq_length)

    def task_words(self, backbone, train_examples, config):
        if backbone.kind != "bilm" or not config.task_word_dim:
            return ()
        from downstream.finetune.layers import task_vocabulary

        return task_vocabulary([s.words for s in train_examples], config.task_word_min_count)

    def metrics(self, outputs, encoded, examples, train_examples, labels, config):
        return evaluation.tagging_metrics(outputs, encoded, examples, train_examples, labels)

    def fallback_tag(self, train_examples):
        return task_data.most_frequent_tags(train_examples)[1]

    def exports(self, backbone):
        return backbone.kind == "bert"  # the biLM tagger's served form is its tf_keras model (text in)

    def serving(self, root):
        return root.words_signature()


class SquadTask(FinetuneTask):
    """Extractive question answering (SQuAD v1.1): start and end logits over windows of the context, an equal
    mix of their losses; answers decoded over every window of a question."""

    name = "squad"
    heads = {"bert": "bert_span"}
    outputs = ("start_logits", "end_logits")
    loss_weights = {"start_logits": 0.5, "end_logits": 0.5}
    select_metric = "f1"

    def read(self, path, config=DEFAULTS, cut=None):
        return task_data.read_squad(path)

    def labels(self, train_examples):
        return []

    def refusal(self, kind, supported):
        return "SQuAD fine-tuning needs a BERT module"

    def encode(self, backbone, examples, labels, config, training):
        return encoding.encode_squad(backbone, examples, config, training)

    def metrics(self, outputs, encoded, examples, train_examples, labels, config):
        return evaluation.squad_metrics(outputs, encoded, examples, config)

    def exports(self, backbone):
        return False


TASKS = {task.name: task for task in (ClassifyTask(), PairTask(), TagTask(), SquadTask(), ChoiceTask())}
NAMES = tuple(TASKS)


def get(name: str) -> FinetuneTask:
    """The task called `name`; a `UserError` naming the tasks for any other name."""
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}: use one of {', '.join(NAMES)}")
    return TASKS[name]


def check_module(task: FinetuneTask, backbone) -> None:
    """Raises `UserError` when `backbone`'s family has no head for `task`."""
    if backbone.kind not in task.heads:
        raise UserError(task.refusal(backbone.kind, [t.name for t in TASKS.values() if backbone.kind in t.heads]))
