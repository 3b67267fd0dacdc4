"""How to fine-tune: `FinetuneConfig`, the frozen recipe (optimisation, sequence lengths, heads, SQuAD
decoding), and `apply_overrides`, `--set key=value` through the house's one parser (`models.config.override`).
Pure: no TensorFlow, no files.

Example:
    config = apply_overrides(FinetuneConfig(), ["epochs=2", "learning_rate=3e-5"])
    config.resolved("bilm").train_module  # False: the biLM stays frozen unless train_module=true
"""

import dataclasses
import typing

from commands.user_errors import UserError
from models import config as config_lib


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """How to fine-tune. Defaults are BERT's recipe (AdamW, linear warm-up over `warmup` of the steps,
    then linear decay to 0) with a learning rate suited to small models.

    Args:
      epochs, batch_size, learning_rate, warmup (fraction of steps), weight_decay, clip_norm: optimisation.
      max_seq_length: pieces per sequence (BERT, GPT); words per sentence (biLM tagging; biLM sentences are
        read whole, as the served graph reads them).
      doc_stride, max_query_length, max_answer_length, n_best: SQuAD windows and decoding.
      lm_coef: weight of GPT's auxiliary LM loss (Radford et al.: 0.5); 0 turns it off.
      train_module: fine-tune the module's weights (default: yes for BERT/GPT, no for the biLM, where the
        task learns its own scalar mix over the frozen layers).
      gpt_pair: `entail` (premise, delimiter, hypothesis) or `similarity` (both orders, added).
      tag_column: the tag's column in CoNLL files.
      max_train_examples: use only the first N training examples (after a seeded shuffle); 0 = all.
      dropout, tagger_units, classifier_units: head sizes (the two last for the biLM's heads).
      task_word_dim, task_word_min_count: the biLM tagger's own word vectors (Peters et al.'s `x_k`, beside
        ELMo): training words seen at least `task_word_min_count` times; `task_word_dim=0` leaves them out.
      elmo: the biLM tagger reads the module's ELMo vectors; false leaves them out (a control: the same
        tagger on its own word vectors only).
      eval_batch_size: examples per prediction batch in evaluation.
      seed: head initialisation, dropout, data order.
      validation_fraction: the share of the training file held out as the validation split (by a stable hash
        of each example's text, the same split for every module, rate and seed; `selection.py`); 0: none,
        unless the job gives a validation file. With a validation split, each epoch is scored on it and the
        best epoch's weights are kept.
      patience: stop after this many epochs without a better validation score (0: train every epoch).
      learning_rates: a grid of peak rates (for example `1e-4,3e-4,1e-3,3e-3`): one run per rate, the one
        with the best validation score kept (needs a validation split); empty: `learning_rate` alone.
      select_on: the validation metric that picks epochs and rates (empty: the task's, `tasks.py`:
        accuracy, or F1 for SQuAD); `f1` for entity tagging.
      bert_pooling: what BERT's sentence heads read: `pooled` (the module's `pooled_output`, its pooler trained
        with next-sentence prediction), `cls` (a fresh dense tanh pooler on `[CLS]`) or `mean` (the mean of
        `sequence_output` over real tokens).
      bilm_task_model: the biLM classifier's task model: `mean` (the scalar mix mean-pooled over words, one
        hidden layer) or `bilstm` (Peters et al.'s task models: a BiLSTM over the task's own word vectors
        beside ELMo, max-pooled; `elmo=false` is the same network without the biLM).
    """

    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 1e-4
    warmup: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    max_seq_length: int = 128
    doc_stride: int = 64
    max_query_length: int = 32
    max_answer_length: int = 30
    n_best: int = 20
    lm_coef: float = 0.5
    train_module: typing.Optional[bool] = None
    gpt_pair: str = "entail"
    tag_column: int = 1
    max_train_examples: int = 0
    dropout: float = 0.1
    tagger_units: int = 64
    classifier_units: int = 128
    task_word_dim: int = 64
    task_word_min_count: int = 1
    elmo: bool = True
    eval_batch_size: int = 64
    seed: int = 42
    validation_fraction: float = 0.0
    patience: int = 0
    learning_rates: tuple[float, ...] = ()
    select_on: str = ""
    bert_pooling: str = "pooled"
    bilm_task_model: str = "mean"

    def __post_init__(self):
        if self.gpt_pair not in ("entail", "similarity"):
            raise UserError(f"gpt_pair must be entail or similarity, got {self.gpt_pair!r}")
        for name in ("epochs", "batch_size", "max_seq_length", "doc_stride", "n_best", "max_answer_length"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise UserError(f"validation_fraction must be in [0, 1), got {self.validation_fraction}")
        if self.patience < 0:
            raise UserError(f"patience must be >= 0, got {self.patience}")
        if any(not rate > 0 for rate in self.learning_rates):
            raise UserError(f"learning_rates must all be > 0, got {','.join(map(str, self.learning_rates))}")
        if self.bert_pooling not in ("pooled", "cls", "mean"):
            raise UserError(f"bert_pooling must be pooled, cls or mean, got {self.bert_pooling!r}")
        if self.bilm_task_model not in ("mean", "bilstm"):
            raise UserError(f"bilm_task_model must be mean or bilstm, got {self.bilm_task_model!r}")

    @property
    def rates(self) -> tuple[float, ...]:
        """The peak rates to try: the grid, or `learning_rate` alone."""
        return tuple(self.learning_rates) or (self.learning_rate,)

    def resolved(self, kind: str) -> "FinetuneConfig":
        """`train_module` decided for a module of family `kind` (what `finetune_config.json` records)."""
        trains = self.train_module if self.train_module is not None else kind != "bilm"
        return dataclasses.replace(self, train_module=trains)


def apply_overrides(config: FinetuneConfig, overrides: list[str]) -> FinetuneConfig:
    """`--set key=value` through the house's one parser (`models.config.override`); raises its
    `OverrideError` for an unknown key or a value that does not parse."""
    return config_lib.override({"finetune": config}, overrides)["finetune"]
