"""keras-hub's own models at this project's shapes, the peers that `benchmarks.lib.parity_runs` trains with `fit`,
and the move of a trained peer's weights into this project's model_dir, so that its vectors are exported and
scored by the same code as ours (`serving.export`, `downstream.evaluate_senses`).

- BERT: `keras_hub.models.BertBackbone` + `keras_hub.layers.MaskedLMHead` + a next-sentence `Dense`. The
  head is `tied` (output = the token embedding; exact GELU and epsilon 1e-5, keras-hub's `BertMaskedLM`
  head) or `untied` (an output matrix of its own, with this project's `hidden_act` and epsilon: the
  `bert_tiny` preset's head).
- GPT: `tied` is `keras_hub.models.GPT2CausalLM` (pre-LN, final layer norm, output = the token embedding, no
  bias); `untied` is `keras_hub.models.GPT2Backbone` with a `Dense` output layer with a bias, the
  `gpt_tiny` preset's output on GPT-2's pre-LN blocks (this project's `normalize_first=true`).

The backbones' weight paths are this project's (both build on keras-hub's layers with the same names), but
for GPT-2's final `layer_norm` and the untied GPT head; `our_arrays` maps them, and `write_model_dir` checks
that our model with the peer's weights computes the peer's outputs before it writes anything.
"""

import dataclasses
import os

import keras
import numpy as np


def bert_pretrainer(c, head: str):
    """Inputs `token_ids`, `segment_ids`, `padding_mask`, `mask_positions` -> {"mlm": [B, P, V], "nsp": [B, 2]}."""
    import keras_hub

    from models import common

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=c.vocab_size, num_layers=c.num_layers, num_heads=c.num_heads, hidden_dim=c.hidden_size,
        intermediate_dim=c.intermediate_size, dropout=c.dropout, max_sequence_length=c.max_position_embeddings)
    inputs = {**backbone.input, "mask_positions": keras.Input((None,), dtype="int32", name="mask_positions")}
    encoded = backbone({k: inputs[k] for k in backbone.input})
    init = keras.initializers.TruncatedNormal(stddev=c.initializer_range)
    if head == "tied":
        mlm = keras_hub.layers.MaskedLMHead(token_embedding=backbone.token_embedding, intermediate_activation="gelu",
                                            kernel_initializer=init, name="mlm_head")
    else:
        mlm = keras_hub.layers.MaskedLMHead(vocabulary_size=c.vocab_size,
                                            intermediate_activation=common.activation(c.hidden_act),
                                            layer_norm_epsilon=c.layer_norm_epsilon, kernel_initializer=init,
                                            name="mlm_head")
    logits = mlm(encoded["sequence_output"], mask_positions=inputs["mask_positions"])  # [B, P, V]
    nsp = keras.layers.Dense(2, kernel_initializer=init, name="nsp_head")(encoded["pooled_output"])  # [B, 2]
    return keras.Model(inputs, {"mlm": logits, "nsp": nsp})


def gpt_lm(c, head: str):
    """Inputs `token_ids`, `padding_mask` -> next-token logits [B, T, V]."""
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=c.vocab_size, num_layers=c.num_layers, num_heads=c.num_heads, hidden_dim=c.hidden_size,
        intermediate_dim=c.intermediate_size, dropout=c.dropout, max_sequence_length=c.max_position_embeddings)
    if head == "tied":
        return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    hidden = backbone(backbone.input)  # [B, T, H]
    logits = keras.layers.Dense(c.vocab_size, kernel_initializer=keras.initializers.TruncatedNormal(
        stddev=c.initializer_range), name="lm_head")(hidden)  # [B, T, V]
    return keras.Model(backbone.input, logits)


def peer_model(kind: str, c, head: str):
    return gpt_lm(c, head) if kind == "gpt" else bert_pretrainer(c, head)


def our_config(kind: str, c, head: str):
    """Our config that computes what the peer of config `c` computes."""
    if kind == "bert":
        return dataclasses.replace(c, tie_output=head == "tied")
    return dataclasses.replace(c, normalize_first=True, tie_output=head == "tied", output_bias=head != "tied",
                               hidden_act="gelu_approximate", layer_norm_epsilon=1e-5)


# GPT: the peer's path prefix -> ours
_GPT_RENAMES = {"layer_norm/": "final_layer_norm/", "lm_head/kernel": "token_embedding/reverse_embeddings",
                "lm_head/bias": "output_bias/bias"}


def our_arrays(kind: str, peer) -> dict:
    """{our weight path: array} of the trained peer."""
    out = {}
    for v in peer.weights:
        path = v.path
        if kind == "gpt":
            path = next((ours + path[len(theirs):] for theirs, ours in _GPT_RENAMES.items()
                         if path.startswith(theirs)), path)
        out[path] = np.asarray(v.numpy())
    return out


def write_model_dir(kind: str, peer, config, data: dict, vocab_path: str, model_dir: str, sample: dict) -> float:
    """Writes the trained `peer` as this project's model_dir (config.json, vocab.txt, a checkpoint), after
    checking on `sample` (the peer's inputs of one batch) that our model with its weights gives its outputs;
    returns the largest difference of the outputs."""
    import shutil

    import tensorflow as tf

    from models import families
    from models.config import TrainConfig
    from models.convert.common import assign

    ours = families.make_task(kind, config, data).build_model()
    arrays = our_arrays(kind, peer)
    missing = sorted({v.path for v in ours.weights} - set(arrays))
    if missing:
        raise ValueError(f"the peer has no weights for {missing[:5]}")
    assign(ours, arrays)
    difference = _largest_difference(kind, peer, ours, sample)
    if difference > 1e-3:
        raise ValueError(f"our model with the peer's weights differs from the peer by {difference:.2e}")
    families.write_config(model_dir, kind, "peer", config, TrainConfig(), data)
    shutil.copy(vocab_path, os.path.join(model_dir, families.VOCAB_FILE))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=ours, step=step), model_dir, 1).save(checkpoint_number=0)
    return difference


def _largest_difference(kind: str, peer, ours, sample: dict) -> float:
    if kind == "gpt":
        theirs = peer(sample, training=False)  # [B, T, V]
        mine = ours({"input_word_ids": sample["token_ids"]}, training=False)["logits"]
        return float(np.max(np.abs(np.asarray(theirs) - np.asarray(mine))))
    theirs = peer(sample, training=False)
    mine = ours({"input_word_ids": sample["token_ids"], "input_mask": sample["padding_mask"],
                 "input_type_ids": sample["segment_ids"], "masked_lm_positions": sample["mask_positions"]},
                training=False)
    return max(float(np.max(np.abs(np.asarray(theirs[k]) - np.asarray(mine[k])))) for k in ("mlm", "nsp"))
