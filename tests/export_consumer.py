"""Loads exports the way their users do, in a fresh process (no project code imported: only TensorFlow,
TF-Text, TF-Hub and Keras), and writes what they compute to an .npz for `test_export.py` to compare.

    python tests/export_consumer.py OUT.npz TEXTS.json bert=EXPORT_DIR gpt=EXPORT_DIR bilm=EXPORT_DIR
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_hub as hub  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the TF-Text ops the graphs use)


def serving_dir(export_dir: str, name: str) -> str:
    base = os.path.join(export_dir, "serving", name)
    return os.path.join(base, max(os.listdir(base), key=lambda d: int(d) if d.isdigit() else -1))


def bert(export_dir, texts, out):
    preprocessor = hub.load(os.path.join(export_dir, "hub", "preprocessor"))
    encoder = hub.load(os.path.join(export_dir, "hub", "encoder"))
    inputs = preprocessor(tf.constant(texts))
    encoded = encoder(inputs, training=False)
    out["bert_input_word_ids"] = inputs["input_word_ids"].numpy()
    out["bert_sequence_output"] = encoded["sequence_output"].numpy()
    out["bert_pooled_output"] = encoded["pooled_output"].numpy()
    out["bert_encoder_outputs_count"] = np.array(len(encoded["encoder_outputs"]))
    served = keras.layers.TFSMLayer(serving_dir(export_dir, "bert"), call_endpoint="serving_default")
    result = served(tf.constant(texts))
    out["bert_served_pooled_output"] = result["pooled_output"].numpy()
    out["bert_served_input_mask"] = result["input_mask"].numpy()
    reusable = keras.layers.TFSMLayer(os.path.join(export_dir, "hub", "encoder"), call_endpoint="__call__")
    out["bert_tfsm_pooled_output"] = reusable(dict(inputs))["pooled_output"].numpy()


def gpt(export_dir, texts, out):
    module = hub.load(os.path.join(export_dir, "hub", "module"))
    ids = module.tokenize(tf.constant(texts))
    out["gpt_ids"] = ids.to_tensor().numpy()
    out["gpt_lengths"] = ids.row_lengths().numpy()
    out["gpt_logits"] = module({"input_word_ids": ids.to_tensor()}, training=False)["logits"].numpy()
    greedy = module.generate(tf.constant(texts), max_new_tokens=tf.constant(6), top_k=tf.constant(1),
                             temperature=tf.constant(1.0), seed=tf.constant(0, tf.int64))
    out["gpt_greedy_ids"], out["gpt_greedy_count"] = greedy["ids"].numpy(), greedy["num_tokens"].numpy()
    served = keras.layers.TFSMLayer(serving_dir(export_dir, "gpt"), call_endpoint="serving_default")
    out["gpt_served_next_token_logits"] = served(tf.constant(texts))["next_token_logits"].numpy()


def bilm(export_dir, texts, out):
    path = os.path.join(export_dir, "hub", "module")
    elmo = hub.KerasLayer(path, signature="default", signature_outputs_as_dict=True)
    result = elmo(tf.constant(texts))
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default", "sequence_len"):
        out[f"bilm_{key}"] = result[key].numpy()
    words = [t.split() for t in texts]
    width = max(len(w) for w in words)
    tokens = hub.load(path).signatures["tokens"](
        tokens=tf.constant([w + [""] * (width - len(w)) for w in words]),
        sequence_len=tf.constant([len(w) for w in words], tf.int32))
    out["bilm_tokens_elmo"] = tokens["elmo"].numpy()
    out["bilm_output_key_elmo"] = hub.KerasLayer(path, output_key="elmo")(tf.constant(texts)).numpy()
    out["bilm_tfsm_elmo"] = keras.layers.TFSMLayer(path, call_endpoint="default")(tf.constant(texts))["elmo"].numpy()


def main(argv):
    out_path, texts_path, *exports = argv
    with open(texts_path) as f:
        texts = json.load(f)
    out = {}
    for item in exports:
        kind, export_dir = item.split("=", 1)
        {"bert": bert, "gpt": gpt, "bilm": bilm}[kind](export_dir, texts, out)
    np.savez(out_path, **out)


if __name__ == "__main__":
    main(sys.argv[1:])
