"""The biLM's export, shaped like TF-Hub's `elmo/2`: one SavedModel that is both the TF-Hub module and the
TF Serving model.

Signatures (as `elmo/2`): `default(text [B])` (untokenized sentences) and `tokens(tokens [B, T],
sequence_len [B])`, both returning
  - `word_emb` [B, T, P]: the character CNN's token representations;
  - `lstm_outputs1`, `lstm_outputs2` [B, T, 2L]: each biLSTM layer, forward ‖ backward;
  - `elmo` [B, T, 2L]: the scalar mix `gamma * sum_k softmax(s)_k h_k` over (word_emb ‖ word_emb,
    lstm_outputs1, lstm_outputs2), its 4 scalars trainable;
  - `default` [B, 2L]: the mean of `elmo` over the real tokens only (as `elmo/3` fixed it);
  - `sequence_len` [B].
Positions past a sentence's length are zeros. `__call__(text [B], training)` returns the same dict and is
what `hub.KerasLayer(path, trainable=True)` fine-tunes (every weight, the mix included).

Tokens are formed exactly as the pretraining data's were (`preprocessing/lm_windows.py`): `default`
normalizes and splits sentences with the data's BERT word splitter (on already space-separated text this
is splitting on spaces, punctuation aside), `tokens` normalizes each given token the same way (case,
accents); `<S>`/`</S>` are added around each sentence, the character ids (`elmo_chars`) are computed in
the graph, and the boundary positions are dropped from the outputs, as bilm-tf's `elmo/2` does.
"""

import json

import tensorflow as tf

from models.bilm import bilm_tf_options
from models.scalar_mix import ScalarMix, elmo_layers
from preprocessing.elmo_chars import add_sentence_boundaries, char_ids
from serving.export.hub_module import ReusableModule
from serving.export.saved_models import SavedModelSpec

class ElmoModule(ReusableModule):
    """The `elmo/2`-shaped root.

    Args:
      bilm: the Keras `BiLM`.
      tokenizer: the data's `WordPieceTokenizer` (its normalizer and word splitter).
      vocab_file, options_file: `tf.saved_model.Asset`s of vocab.txt and options.json.
    """

    def __init__(self, bilm, tokenizer, vocab_file, options_file):
        config = bilm.model_config
        if config.projection_dim != config.lstm_projection_dim:
            raise ValueError(f"the elmo mix needs projection_dim == lstm_projection_dim (word_emb is doubled to "
                             f"2 x {config.projection_dim} to mix with the {2 * config.lstm_projection_dim}-wide "
                             f"LSTM layers), got {config.projection_dim} and {config.lstm_projection_dim}")
        mix = ScalarMix(config.n_lstm_layers + 1, name="elmo_scalar_mix")
        mix.build([(None, None, 2 * config.lstm_projection_dim)] * (config.n_lstm_layers + 1))
        basic = tokenizer.basic
        width = config.max_characters_per_token

        def embed(words: tf.RaggedTensor, training: bool) -> dict:
            """`[B, (T)]` normalized words -> the outputs, `[B, T_max, ...]`."""
            bounded = add_sentence_boundaries(words)  # [B, (T + 2)]
            chars = char_ids(bounded.to_tensor(""), bounded.row_lengths(), width)  # [B, T_max + 2, C]
            out = bilm({"char_ids": chars}, training=training)
            lengths = tf.cast(words.row_lengths(), tf.int32)  # [B]
            t_max = tf.shape(chars)[1] - 2
            mask = tf.sequence_mask(lengths, t_max, tf.float32)[..., tf.newaxis]  # [B, T_max, 1]

            def strip(x):  # drop <S> and the last column; zero what is past each sentence
                return x[:, 1:-1] * mask

            layers = {"word_emb": strip(out["word_emb"])}  # [B, T, P]
            for k in range(1, config.n_lstm_layers + 1):
                layers[f"lstm_outputs{k}"] = strip(out[f"lstm_outputs{k}"])  # [B, T, 2L]
            mixed = mix(elmo_layers(layers)) * mask  # [B, T, 2L]
            count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)  # [B, 1]
            return {**layers, "elmo": mixed, "default": tf.reduce_sum(mixed, axis=1) / count,
                    "sequence_len": lengths}

        def split(texts):
            return basic.split_words(basic.normalize(texts))  # [B, (T)]

        text_spec = tf.TensorSpec([None], tf.string, name="text")
        super().__init__(lambda texts, training: embed(split(texts), training), text_spec,
                         list(bilm.variables) + list(mix.variables),
                         list(bilm.trainable_variables) + list(mix.trainable_variables),
                         tokenizer=tokenizer, vocab_file=vocab_file, options_file=options_file)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def default(text):
            return embed(split(text), False)

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="tokens"),
                                      tf.TensorSpec([None], tf.int32, name="sequence_len")])
        def tokens(tokens, sequence_len):
            words = tf.RaggedTensor.from_tensor(tokens, lengths=sequence_len)  # [B, (T)]
            words = tf.ragged.map_flat_values(basic.normalize, words)
            out = embed(words, False)
            pad = tf.shape(tokens)[1] - tf.shape(out["elmo"])[1]  # keep the input's T
            return {k: v if k in ("default", "sequence_len") else tf.pad(v, [[0, 0], [0, pad], [0, 0]])
                    for k, v in out.items()}

        self.default = default
        self.tokens = tokens

    def signatures(self) -> dict:
        return {"default": self.default, "tokens": self.tokens, "serving_default": self.default}


def exports(bilm, tokenizer, max_seq_length: int, vocab_path: str, options_path: str) -> list[SavedModelSpec]:
    module = ElmoModule(bilm, tokenizer, tf.saved_model.Asset(vocab_path), tf.saved_model.Asset(options_path))
    return [SavedModelSpec("hub", "module", module, signatures=module.signatures(), card="bilm"),
            SavedModelSpec("serving", None, module, signatures=module.signatures())]


def options_json(config, max_seq_length: int | None) -> str:
    return json.dumps(bilm_tf_options(config, max_seq_length), indent=2)


def warmup_requests(texts: list[str]) -> list[tuple[str, dict]]:
    words = [t.split()[:16] for t in texts]
    width = max(1, max(len(w) for w in words))
    return [("serving_default", {"text": texts}),
            ("tokens", {"tokens": [w + [""] * (width - len(w)) for w in words],
                        "sequence_len": [len(w) for w in words]})]
