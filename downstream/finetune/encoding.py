"""Examples -> what the task model trains and is scored on: `EncodedExamples`, the inputs `x`, targets `y`,
sample weights, and what evaluation needs to map predictions back (word positions, SQuAD windows). The three
shapes of encoding (texts, tagged words, SQuAD windows) are here; each task (`tasks.py`) picks its own, and
the inputs themselves are built by the rules of `inputs.py`, the ones the serving export calls too.

Example:
    texts = window_texts(backbone, examples, 128)
    encoded = encode_texts(backbone, [[t[:1] for t in texts]], examples, labels, 128)  # classify
    encoded.x["input_word_ids"].shape  # [N, 1, 128]
"""

import dataclasses

import numpy as np

from downstream.finetune import inputs as inputs_lib
from downstream.finetune import squad


@dataclasses.dataclass(frozen=True)
class EncodedExamples:
    """A task's examples as model inputs `x`, targets `y` and sample weights (dicts by output name), with
    what evaluation needs.

    Args:
      positions: tagging: each word's first position (-1: cut off).
      features: SQuAD: the windows (`squad.SquadWindow`).
      sequences: S of the `[N, S, ...]` inputs (1 for tagging's and SQuAD's `[N, T]`).
    """
    x: dict
    y: dict
    weights: dict | None = None
    positions: list | None = None
    features: list | None = None
    sequences: int = 1

    @property
    def rows(self) -> int:
        """N, the rows the model trains on (SQuAD: windows, not questions)."""
        return len(next(iter(self.y.values())))


def window_texts(backbone, examples: list, seq_length: int) -> list[tuple[str, ...]]:
    """Each example's texts, cut to a window's worth of words for BERT and GPT (`words.window_text`); the
    biLM reads its sentences whole."""
    from downstream.words import window_text

    texts = [e.texts for e in examples]
    if backbone.kind == "bilm":
        return texts
    return [tuple(window_text(x, seq_length, backbone.lower_case) for x in parts) for parts in texts]


def encode_texts(backbone, sequences: list[list[tuple[str, ...]]], examples: list, labels: list[str],
                 seq_length: int) -> EncodedExamples:
    """`sequences` (a list over sequences of each example's parts, `inputs.text_inputs`) -> `[N, S, ...]` inputs;
    targets: each example's label index `[N]`."""
    x = inputs_lib.text_inputs(backbone, sequences, seq_length)
    index = {n: i for i, n in enumerate(labels)}
    y = {"logits": np.array([index.get(e.label, 0) for e in examples], np.int32)}
    return EncodedExamples(x, y, sequences=x.get("input_word_ids", x.get("text")).shape[1])


def encode_tags(backbone, sentences: list, labels: list[str], seq_length: int) -> EncodedExamples:
    """Tagged sentences -> `[N, T]` inputs (BERT: pieces; biLM: the sentence, at most T words), targets `[N, T]`
    on each word's first position with sample weight 1 there (`inputs.tag_labels`)."""
    from downstream.words import word_bytes_cut

    words = [tuple(word_bytes_cut(w) for w in s.words) for s in sentences]
    if backbone.kind == "bert":
        x, positions = inputs_lib.bert_tag_inputs(backbone, words, seq_length)
    else:
        x, positions = inputs_lib.bilm_tag_inputs(backbone, words, seq_length)
    y, w = inputs_lib.tag_labels(positions, [s.tags for s in sentences], {n: i for i, n in enumerate(labels)},
                                 seq_length)
    return EncodedExamples(x, {"logits": y}, {"logits": w}, positions=positions)


def encode_squad(backbone, examples: list, config, training: bool) -> EncodedExamples:
    """SQuAD questions -> windows `[CLS] question [SEP] context window [SEP]` `[N, T]` (`squad.make_features`,
    `config`: a `FinetuneConfig`), targets the answer's start and end positions `[N]`."""
    unit_texts = [[e.context[a:b] for a, b in squad.split_units(e.context)] for e in examples]
    unit_pieces = backbone.word_pieces(unit_texts, unk_for_empty=False)  # as the context's tokenization
    question_pieces = backbone.pieces([e.question for e in examples])
    features = squad.make_features(examples, unit_pieces, question_pieces, backbone.token_id("[CLS]"),
                                   backbone.token_id("[SEP]"), config.max_seq_length, config.doc_stride,
                                   config.max_query_length, training=training)
    x = {k: np.array([getattr(f, k) for f in features], np.int32)
         for k in ("input_word_ids", "input_mask", "input_type_ids")}
    y = {"start_logits": np.array([f.start_position for f in features], np.int32),
         "end_logits": np.array([f.end_position for f in features], np.int32)}
    return EncodedExamples(x, y, features=features)
