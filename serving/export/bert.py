"""BERT's exports, shaped as TF-Hub's BERT models are: an encoder, its preprocessor, and a one-piece
text-in model for TF Serving.

- `encoder`: `__call__({"input_word_ids", "input_mask", "input_type_ids"}, training)` -> `sequence_output`
  [B, T, H], `pooled_output` [B, H], `default` (= pooled), `encoder_outputs` (every block's output),
  `embedding_output` [B, T, H] (the embeddings' layer norm: layer 0 for feature-based use);
  an `mlm` sub-object takes `masked_lm_positions` [B, P] too and adds `mlm_logits` [B, P, V].
  Legacy attributes, as TF Model Garden's encoders have them for code that reads them through
  `hub.KerasLayer(...).resolved_object`: `vocab_file` (an Asset) and `do_lower_case` (a non-trainable
  bool `tf.Variable`, in neither variable list).
- `preprocessor`, TF-Hub's preprocessor API (the `bert_en_uncased_preprocess` page, Model Garden's
  `BertTokenizer` / `BertPackInputs`): `tokenize(strings [B])` -> ragged int32 [B, (words), (pieces)], an
  object with `get_special_tokens_dict()` (`vocab_size`, `padding_id`, `start_of_sequence_id`,
  `end_of_segment_id`, `mask_id`: int32 scalars); `bert_pack_inputs(segments, seq_length=...)` for 1 to
  `type_vocab_size` (2) segments, each ragged `[B, (W), (P)]` or `[B, (P)]`, round-robin truncation
  (`preprocessing/packing.py`), `seq_length` defaulting to the trained length; `__call__(strings [B])` ->
  the encoder's inputs at the trained sequence length.
- `serving`: text in, embeddings out: signature `serving_default(text)` and `pair(text_a, text_b)` ->
  `pooled_output`, `sequence_output`, `input_mask` (padded to the batch's longest input).
"""

import tensorflow as tf

from models import bert
from preprocessing.packing import pack_inputs
from serving.export.hub_module import ReusableModule, raw_variables
from serving.export.saved_models import SavedModelSpec

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _encoder_spec() -> dict[str, tf.TensorSpec]:
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in ENCODER_INPUTS}


def encoder_module(pretrainer, vocab_file: tf.saved_model.Asset, do_lower_case: bool) -> ReusableModule:
    """The encoder (fine-tunable) with its `mlm` sub-object; vocab.txt rides along as an asset, and both it
    and `do_lower_case` are attributes, as Model Garden's exports have them."""
    encoder = bert.encoder_of(pretrainer)
    mlm_head = pretrainer.get_layer("mlm_head")

    def encode(inputs, training):
        out = encoder({k: inputs[k] for k in ENCODER_INPUTS}, training=training)
        return {"sequence_output": out["sequence_output"], "pooled_output": out["pooled_output"],
                "default": out["pooled_output"], "encoder_outputs": list(out["encoder_outputs"]),
                "embedding_output": out["embedding_output"]}

    def masked_lm(inputs, training):
        out = encode(inputs, training)
        logits = mlm_head(out["sequence_output"], mask_positions=inputs["masked_lm_positions"])  # [B, P, V]
        return {**out, "mlm_logits": logits}

    mlm_spec = {**_encoder_spec(), "masked_lm_positions": tf.TensorSpec([None, None], tf.int32,
                                                                        name="masked_lm_positions")}
    mlm_variables = _unique(list(encoder.variables) + list(mlm_head.variables))
    mlm = ReusableModule(masked_lm, mlm_spec, mlm_variables,
                         _unique(list(encoder.trainable_variables) + list(mlm_head.trainable_variables)))
    return ReusableModule(encode, _encoder_spec(), encoder.variables, encoder.trainable_variables, mlm=mlm,
                          vocab_file=vocab_file,
                          do_lower_case=tf.Variable(do_lower_case, trainable=False, name="do_lower_case"))


def num_segments(pretrainer) -> int:
    """How many segments the encoder tells apart: its segment embedding's rows (`type_vocab_size`)."""
    return int(bert.encoder_of(pretrainer).get_layer("segment_embedding").input_dim)


class SpecialTokens(tf.Module):
    """`get_special_tokens_dict()`: the ids a user needs to pack or mask inputs themselves, as int32 scalars
    (the keys of Model Garden's `BertTokenizer.get_special_tokens_dict()`)."""

    def __init__(self, tokenizer):
        super().__init__()
        ids = tokenizer.special_ids
        values = {"vocab_size": tokenizer.vocab_size, "padding_id": ids["[PAD]"],
                  "start_of_sequence_id": ids["[CLS]"], "end_of_segment_id": ids["[SEP]"], "mask_id": ids["[MASK]"]}
        self.__call__ = tf.function(lambda: {k: tf.constant(v, tf.int32) for k, v in values.items()},
                                    input_signature=[])


class Tokenize(tf.Module):
    """`tokenize(strings [B])` -> int32 `[B, (words), (pieces)]`, with `get_special_tokens_dict()`: an object,
    as TF-Hub's `preprocessor.tokenize` is, not a bare function."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer
        self.get_special_tokens_dict = SpecialTokens(tokenizer)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def tokenize(texts):
            return tf.cast(tokenizer.tokenize_words(texts), tf.int32)  # [B, (W), (P)]

        self.__call__ = tokenize


class PackInputs(tf.Module):
    """`bert_pack_inputs(segments, seq_length=default)`: 1 to `max_segments` segments (ragged `[B, (W), (P)]`
    or `[B, (P)]` int32) -> the encoder's inputs, `[B, seq_length]` each. `seq_length` is an argument so
    `hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=128))` can change it."""

    def __init__(self, tokenizer, seq_length: int, max_segments: int):
        super().__init__()
        cls_id, sep_id = tokenizer.special_ids["[CLS]"], tokenizer.special_ids["[SEP]"]

        @tf.function
        def pack(segments, seq_length=seq_length):
            return pack_inputs(list(segments), seq_length, cls_id, sep_id)

        for n in range(1, max_segments + 1):  # the restored function has these traces only
            for ragged_rank in (2, 1):
                spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank)
                pack.get_concrete_function([spec] * n, tf.TensorSpec([], tf.int32, name="seq_length"))
        self.__call__ = pack


def _unique(variables) -> list:
    seen, out = set(), []
    for v in raw_variables(variables):
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


class BertPreprocessor(tf.train.Checkpoint):
    """Text -> BERT encoder inputs, as TF-Hub BERT preprocessors do it (the project's WordPiece ops).

    Args:
      tokenizer: the `WordPieceTokenizer` the training data was made with.
      seq_length: the default packed length (the trained `max_seq_length`).
      vocab_file: a `tf.saved_model.Asset` of vocab.txt (shipped in `assets/`).
      max_segments: how many segments `bert_pack_inputs` takes at most (the encoder's `type_vocab_size`).

    Example (after `tf.saved_model.save`):
      preprocessor = hub.load(path)
      tokens = preprocessor.tokenize(tf.constant(["a b"]))             # int32 [1, (words), (pieces)]
      preprocessor.tokenize.get_special_tokens_dict()["mask_id"]       # an int32 scalar
      preprocessor.bert_pack_inputs([tokens, tokens], seq_length=16)   # input_word_ids, ... [1, 16]
    """

    def __init__(self, tokenizer, seq_length: int, vocab_file: tf.saved_model.Asset, max_segments: int = 2):
        super().__init__(vocab_file=vocab_file)
        self.tokenize = Tokenize(tokenizer)
        self.bert_pack_inputs = PackInputs(tokenizer, seq_length, max_segments)
        cls_id, sep_id = tokenizer.special_ids["[CLS]"], tokenizer.special_ids["[SEP]"]
        tokenize = self.tokenize.__call__

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def call(texts):
            return pack_inputs([tokenize(texts)], seq_length, cls_id, sep_id)

        self.__call__ = call


class BertTextModel(tf.train.Checkpoint):
    """Text in, embeddings out: the TF Serving model (also loadable with `hub.load`)."""

    def __init__(self, pretrainer, tokenizer, seq_length: int, vocab_file: tf.saved_model.Asset):
        encoder = bert.encoder_of(pretrainer)
        super().__init__(tokenizer=tokenizer, vocab_file=vocab_file)
        self.variables = raw_variables(encoder.variables)
        cls_id, sep_id = tokenizer.special_ids["[CLS]"], tokenizer.special_ids["[SEP]"]

        def embed(segments):
            inputs = pack_inputs([tokenizer.tokenize(s) for s in segments], seq_length, cls_id, sep_id,
                                 pad_to="longest")
            out = encoder(inputs, training=False)
            return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"],
                    "input_mask": inputs["input_mask"]}

        text = tf.TensorSpec([None], tf.string, name="text")
        self.serve = tf.function(lambda text: embed([text]), input_signature=[text])
        self.serve_pair = tf.function(lambda text_a, text_b: embed([text_a, text_b]), input_signature=[
            tf.TensorSpec([None], tf.string, name="text_a"), tf.TensorSpec([None], tf.string, name="text_b")])

    def signatures(self) -> dict:
        return {"serving_default": self.serve, "pair": self.serve_pair}


def exports(pretrainer, tokenizer, seq_length: int, vocab_path: str) -> list[SavedModelSpec]:
    vocab = tf.saved_model.Asset(vocab_path)
    text_model = BertTextModel(pretrainer, tokenizer, seq_length, vocab)
    return [
        SavedModelSpec("hub", "encoder", encoder_module(pretrainer, vocab, tokenizer.lower_case), card="encoder"),
        SavedModelSpec("hub", "preprocessor", BertPreprocessor(tokenizer, seq_length, vocab, num_segments(pretrainer)),
                       card="preprocessor"),
        SavedModelSpec("serving", None, text_model, signatures=text_model.signatures()),
    ]


def warmup_requests(texts: list[str]) -> list[tuple[str, dict]]:
    """(signature, inputs) pairs that exercise every serving signature."""
    half = max(1, len(texts) // 2)
    return [("serving_default", {"text": texts}),
            ("pair", {"text_a": texts[:half], "text_b": texts[half:half * 2] or texts[:half]})]
