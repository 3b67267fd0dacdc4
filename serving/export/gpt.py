"""GPT's export: one SavedModel that is both the TF-Hub module and the TF Serving model.

- `__call__({"input_word_ids": [B, T]}, training)` -> `hidden_states` [B, T, H], `logits` [B, T, V],
  `embedding_output` [B, T, H] and `layer_outputs` (every block's output, for feature-based use)
  (fine-tunable through `hub.KerasLayer(trainable=True)`).
- `tokenize(strings [B])` -> ragged int32 [B, (P)] word-piece ids (the training data's tokenizer).
- `from_text(strings [B])` -> `hidden_states`, `logits`, `input_word_ids`, `input_mask` (right-padded).
- `generate(prompt [B], max_new_tokens [], top_k [], temperature [], seed [])` -> `text` [B] (the new text
  only), `ids` [B, N] (0-padded), `num_tokens` [B]. Runs entirely in the graph (`tf.while_loop`): each step
  reruns the decoder on a fixed `[B, max_seq_length]` buffer (no key/value cache: the trained context is
  short) and reads the logits at each row's own last position, so prompts of different lengths need no
  left padding. `top_k=1` is greedy decoding, `top_k=0` samples from the whole distribution; sampling is
  stateless (`seed`), so a request is reproducible. A row stops at the end-of-document token (`[SEP]`).
  The prompt is kept to its last `max_seq_length - 1 - max_new_tokens` pieces after a leading `[SEP]`
  (a document start, as in training). `max_new_tokens` < 1, `top_k` < 0 and a negative or non-finite
  `temperature` fail in the graph (INVALID_ARGUMENT: a 400 from TF Serving too); a `max_new_tokens` above
  `max_seq_length - 2` is cut to it.

Signatures (TF Serving): `serving_default(text)` -> `hidden_states`, `input_mask`, `next_token_logits`
[B, V] (at each row's last real position); `generate` as above (scalars: use the columnar `inputs` form).
"""

import tensorflow as tf

from serving.export.hub_module import ReusableModule
from serving.export.saved_models import SavedModelSpec

NEVER_GENERATED = ("[PAD]", "[UNK]", "[CLS]", "[MASK]")


class GptModule(ReusableModule):
    """The GPT SavedModel root.

    Args:
      decoder: the Keras GPT model (`models.gpt.build_decoder`).
      tokenizer: the data's `WordPieceTokenizer`.
      max_seq_length: the trained window (positions beyond it were never trained).
      vocab_file: a `tf.saved_model.Asset` of vocab.txt.
    """

    def __init__(self, decoder, tokenizer, max_seq_length: int, vocab_file: tf.saved_model.Asset):
        ids_spec = {"input_word_ids": tf.TensorSpec([None, None], tf.int32, name="input_word_ids")}
        super().__init__(lambda inputs, training: decoder(inputs, training=training), ids_spec,
                         decoder.variables, decoder.trainable_variables, tokenizer=tokenizer, vocab_file=vocab_file)
        text_spec = tf.TensorSpec([None], tf.string, name="text")

        def pieces(texts):
            return tf.cast(tokenizer.tokenize(texts), tf.int32)  # [B, (P)]

        @tf.function(input_signature=[text_spec])
        def tokenize(texts):
            return pieces(texts)

        def run_text(texts):
            ids = pieces(texts)[:, -max_seq_length:]  # [B, (P)], the last window
            word_ids = ids.to_tensor()  # [B, T]
            # At least one column, so a batch of empty texts reads position 0 (a [PAD]) instead of failing.
            word_ids = tf.pad(word_ids, [[0, 0], [0, tf.maximum(1 - tf.shape(word_ids)[1], 0)]])  # [B, max(T, 1)]
            mask = tf.sequence_mask(ids.row_lengths(), tf.shape(word_ids)[1], tf.int32)  # [B, T]
            out = decoder({"input_word_ids": word_ids}, training=False)
            return out, word_ids, mask, tf.cast(ids.row_lengths(), tf.int32)

        @tf.function(input_signature=[text_spec])
        def from_text(texts):
            out, word_ids, mask, _ = run_text(texts)
            return {"hidden_states": out["hidden_states"], "logits": out["logits"], "input_word_ids": word_ids,
                    "input_mask": mask}

        @tf.function(input_signature=[text_spec])
        def serve(text):
            out, _, mask, lengths = run_text(text)
            last = tf.maximum(lengths - 1, 0)  # [B] (an empty text reads position 0)
            return {"hidden_states": out["hidden_states"], "input_mask": mask,
                    "next_token_logits": tf.gather(out["logits"], last, batch_dims=1)}  # [B, V]

        self.tokenize = tokenize
        self.from_text = from_text
        self.serve = serve
        self.generate = _generator(decoder, tokenizer, max_seq_length, pieces)

    def signatures(self) -> dict:
        return {"serving_default": self.serve, "generate": self.generate}


def _generator(decoder, tokenizer, max_seq_length: int, pieces):
    """The `generate` signature's function (the module docstring says what it does); `pieces`: strings [B] ->
    word-piece ids [B, (P)]."""
    eod = tokenizer.special_ids["[SEP]"]
    vocab_size = tokenizer.vocab_size
    banned = tf.constant([tokenizer.special_ids[t] for t in NEVER_GENERATED], tf.int32)

    @tf.function(input_signature=[
        tf.TensorSpec([None], tf.string, name="prompt"), tf.TensorSpec([], tf.int32, name="max_new_tokens"),
        tf.TensorSpec([], tf.int32, name="top_k"), tf.TensorSpec([], tf.float32, name="temperature"),
        tf.TensorSpec([], tf.int64, name="seed")])
    def generate(prompt, max_new_tokens, top_k, temperature, seed):
        checks = [  # INVALID_ARGUMENT from the graph itself, so TF Serving refuses these too
            tf.debugging.assert_greater_equal(max_new_tokens, 1, message="max_new_tokens must be at least 1"),
            tf.debugging.assert_greater_equal(top_k, 0, message="top_k must be at least 0 (0: no top-k cut)"),
            tf.debugging.assert_greater_equal(temperature, 0.0, message="temperature must be at least 0"),
            tf.debugging.assert_all_finite(temperature, message="temperature must be finite")]
        with tf.control_dependencies(checks):
            new = tf.clip_by_value(max_new_tokens, 1, max_seq_length - 2)
        keep = max_seq_length - 1 - new  # prompt pieces kept, after the leading [SEP]
        prompts = pieces(prompt)[:, -keep:]  # [B, (P)]
        batch = prompts.nrows(out_type=tf.int32)
        prompts = tf.concat([tf.fill([batch, 1], eod), prompts], axis=1)  # [B, (1 + P)]
        buffer = prompts.to_tensor(shape=[None, max_seq_length])  # [B, W]
        start = tf.cast(prompts.row_lengths(), tf.int32)  # [B]
        k = tf.where(top_k <= 0, vocab_size, tf.minimum(top_k, vocab_size))
        penalty = tf.scatter_nd(banned[:, None], tf.fill(tf.shape(banned), -1e9), [vocab_size])  # [V]

        def step(i, buffer, lengths, done):
            logits = decoder({"input_word_ids": buffer}, training=False)["logits"]  # [B, W, V]
            last = tf.gather(logits, lengths - 1, batch_dims=1)  # [B, V]
            scaled = last / tf.maximum(temperature, 1e-6) + penalty
            top_logits, top_ids = tf.math.top_k(scaled, k)  # [B, k]
            pick = tf.random.stateless_categorical(top_logits, 1, seed=tf.stack([seed, tf.cast(i, tf.int64)]),
                                                   dtype=tf.int32)  # [B, 1]
            token = tf.gather(top_ids, pick[:, 0], batch_dims=1)  # [B]
            token = tf.where(done, 0, token)
            position = tf.stack([tf.range(batch), tf.minimum(lengths, max_seq_length - 1)], axis=1)  # [B, 2]
            buffer = tf.tensor_scatter_nd_update(buffer, position, token)
            finished = done | (token == eod)
            lengths = lengths + tf.cast(~finished, tf.int32)
            return i + 1, buffer, lengths, finished

        _, buffer, lengths, _ = tf.while_loop(
            lambda i, b, n, done: (i < new) & ~tf.reduce_all(done), step,
            (tf.constant(0), buffer, start, tf.zeros([batch], tf.bool)))
        count = lengths - start  # [B] new tokens ([SEP] excluded)
        new_ids = _slice_rows(buffer, start, lengths)  # [B, (N)]
        text = tokenizer.detokenize(tf.cast(new_ids, tf.int64))
        return {"text": text, "ids": new_ids.to_tensor(), "num_tokens": count}

    return generate


def _slice_rows(buffer: tf.Tensor, start: tf.Tensor, end: tf.Tensor) -> tf.RaggedTensor:
    """`buffer[b, start[b]:end[b]]` for each row b: `[B, W]` -> `[B, (end - start)]`."""
    columns = tf.ragged.range(start, end)  # [B, (L)]
    return tf.gather(buffer, columns, batch_dims=1)


def exports(decoder, tokenizer, max_seq_length: int, vocab_path: str) -> list[SavedModelSpec]:
    module = GptModule(decoder, tokenizer, max_seq_length, tf.saved_model.Asset(vocab_path))
    return [SavedModelSpec("hub", "module", module, signatures=module.signatures(), card="gpt"),
            SavedModelSpec("serving", None, module, signatures=module.signatures())]


def warmup_requests(texts: list[str]) -> list[tuple[str, dict]]:
    return [("serving_default", {"text": texts}),
            ("generate", {"prompt": texts, "max_new_tokens": 4, "top_k": 1, "temperature": 1.0, "seed": 0})]
