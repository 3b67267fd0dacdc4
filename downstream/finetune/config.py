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

    def __post_init__(self):
        if self.gpt_pair not in ("entail", "similarity"):
            raise UserError(f"gpt_pair must be entail or similarity, got {self.gpt_pair!r}")
        for name in ("epochs", "batch_size", "max_seq_length", "doc_stride", "n_best", "max_answer_length"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be >= 1, got {getattr(self, name)}")

    def resolved(self, kind: str) -> "FinetuneConfig":
        """`train_module` decided for a module of family `kind` (what `finetune_config.json` records)."""
        trains = self.train_module if self.train_module is not None else kind != "bilm"
        return dataclasses.replace(self, train_module=trains)


def apply_overrides(config: FinetuneConfig, overrides: list[str]) -> FinetuneConfig:
    """`--set key=value` through the house's one parser (`models.config.override`); raises its
    `OverrideError` for an unknown key or a value that does not parse."""
    return config_lib.override({"finetune": config}, overrides)["finetune"]
