"""The biLM: its layers against numpy transcriptions of bilm-tf's equations, causality and padding of both
directions, the XLA-friendly sampled softmax, presets and parameter counts, memorisation, and a real batch
from the Beam job under XLA."""

import dataclasses
import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from models import config as config_lib
from models.bilm import PRESETS, BiLM, BiLMConfig, BiLMTask, parameter_count
from models.bilm_layers import CharCNNEncoder, Highway, ProjectedLSTM
from models.bilm_softmax import LMSoftmax, draw_candidates, log_expected_count, sampled_logits

V = 50  # softmax vocabulary of the tiny models


def tiny(**overrides) -> BiLMConfig:
    micro = dict(char_embedding_dim=8, filters=((1, 8), (2, 8), (3, 16)), n_highway=1, projection_dim=32,
                 cell_size=64, lstm_projection_dim=32, softmax="full", cell_clip=3.0, proj_clip=3.0, dropout=0.1)
    return BiLMConfig(**{**micro, "vocab_size": V, **overrides})


def char_ids(rng, batch, steps, lengths=None):
    """Random token encodings [B, T, 50]: bow, 1-6 random bytes, eow, pad (shifted ids), zeros past `lengths`."""
    ids = np.full((batch, steps, 50), 261, np.int32)
    ids[:, :, 0] = 259
    for b in range(batch):
        for t in range(steps):
            n = rng.integers(1, 7)
            ids[b, t, 1:n + 1] = rng.integers(98, 123, n)
            ids[b, t, n + 1] = 260
    if lengths is not None:
        for b, n in enumerate(lengths):
            ids[b, n:] = 0
    return ids


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# --- layers against numpy ----------------------------------------------------------------------------

def numpy_lstm(x, mask, kernel, bias, projection, cell_clip, proj_clip):
    """TF1 LSTMCell(num_proj, cell_clip, proj_clip), gates (i, j, f, o), forget bias 1.0; masked steps keep state."""
    batch, steps, _ = x.shape
    units, proj = projection.shape
    c, h = np.zeros((batch, units)), np.zeros((batch, proj))
    out = np.zeros((batch, steps, proj))
    for t in range(steps):
        z = np.concatenate([x[:, t], h], axis=1) @ kernel + bias
        i, j, f, o = np.split(z, 4, axis=1)
        new_c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
        if cell_clip:
            new_c = np.clip(new_c, -cell_clip, cell_clip)
        new_h = (sigmoid(o) * np.tanh(new_c)) @ projection
        if proj_clip:
            new_h = np.clip(new_h, -proj_clip, proj_clip)
        real = mask[:, t:t + 1]
        c, h = np.where(real, new_c, c), np.where(real, new_h, h)
        out[:, t] = np.where(real, new_h, 0.0)
    return out


@pytest.mark.parametrize("cell_clip,proj_clip", [(None, None), (0.5, 0.3)])
def test_lstm_matches_bilm_tf_equations(cell_clip, proj_clip):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6, 4)).astype(np.float32)
    mask = np.arange(6)[None, :] < np.array([6, 4, 1])[:, None]  # right padding
    layer = ProjectedLSTM(5, 3, cell_clip, proj_clip)
    layer.build(x.shape)
    assert layer.kernel.shape == (4 + 3, 20) and layer.bias.shape == (20,) and layer.projection.shape == (5, 3)
    assert not layer.bias.numpy().any()  # the forget bias is added at run time, not stored
    weights = [rng.uniform(-1.5, 1.5, w.shape).astype(np.float32) for w in layer.weights]
    layer.set_weights(weights)
    expected = numpy_lstm(x, mask, *weights, cell_clip, proj_clip)
    np.testing.assert_allclose(layer(x, mask=mask).numpy(), expected, rtol=1e-5, atol=1e-5)
    if cell_clip:  # the clips were exercised
        assert np.isclose(np.abs(expected).max(), proj_clip)


def test_highway_equation():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 6)).astype(np.float32)
    layer = Highway()
    layer.build(x.shape)
    assert np.all(layer.carry_bias.numpy() == -2.0) and not layer.transform_bias.numpy().any()
    wc, bc, wt, bt = [rng.normal(size=w.shape).astype(np.float32) for w in layer.weights]
    layer.set_weights([wc, bc, wt, bt])
    gate = sigmoid(x @ wc + bc)
    expected = gate * np.maximum(x @ wt + bt, 0.0) + (1.0 - gate) * x
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_char_cnn_is_embed_conv_maxpool_relu_highway_projection():
    rng = np.random.default_rng(2)
    ids = char_ids(rng, 2, 3, lengths=[3, 2])
    encoder = CharCNNEncoder(((1, 4), (3, 5)), n_highway=1, projection_dim=6, char_embedding_dim=3)
    out = encoder(ids).numpy()
    assert out.shape == (2, 3, 6) and not out[1, 2].any()  # the padding token is zeros
    assert encoder.compute_mask(ids).numpy().tolist() == [[True] * 3, [True, True, False]]
    table = encoder.char_embed.embeddings.numpy()
    emb = table[ids]  # [B, T, 50, 3]
    pooled = []
    for (width, _), conv in zip(encoder.filters, encoder.convolutions):
        kernel, bias = conv.kernel.numpy(), conv.bias.numpy()  # [w, 3, C]
        windows = np.stack([emb[:, :, p:p + width] for p in range(50 - width + 1)], axis=2)  # [B, T, P, w, 3]
        conv_out = np.einsum("btpwe,wec->btpc", windows, kernel) + bias
        pooled.append(np.maximum(conv_out.max(axis=2), 0.0))  # max-pool over positions, THEN relu
    h = np.concatenate(pooled, axis=-1)
    wc, bc, wt, bt = [w.numpy() for w in encoder.highways[0].weights]
    gate = sigmoid(h @ wc + bc)
    h = gate * np.maximum(h @ wt + bt, 0.0) + (1.0 - gate) * h
    expected = h @ encoder.projection.kernel.numpy() + encoder.projection.bias.numpy()
    np.testing.assert_allclose(out[0], expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[1, :2], expected[1, :2], rtol=1e-4, atol=1e-5)


# --- the model ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model():
    return BiLMTask(tiny()).build_model()


def run(model, ids):
    out = model({"char_ids": tf.constant(ids)}, training=False)
    out["forward_logits"] = model.softmax(out["forward"])
    out["backward_logits"] = model.softmax(out["backward"])
    return {k: v.numpy() for k, v in out.items()}


def test_causality_of_both_directions(model):
    rng = np.random.default_rng(3)
    ids = char_ids(rng, 2, 8)
    changed = ids.copy()
    changed[:, 5] = char_ids(rng, 2, 1)[:, 0]
    a, b = run(model, ids), run(model, changed)
    L = 32
    forward = {k: (a[k][..., :L], b[k][..., :L]) for k in ("lstm_outputs1", "lstm_outputs2")}
    forward["logits"] = (a["forward_logits"], b["forward_logits"])
    backward = {k: (a[k][..., L:], b[k][..., L:]) for k in ("lstm_outputs1", "lstm_outputs2")}
    backward["logits"] = (a["backward_logits"], b["backward_logits"])
    for name, (x, y) in forward.items():  # positions <= 4 never saw token 5
        np.testing.assert_array_equal(x[:, :5], y[:, :5], err_msg=f"forward {name}")
        assert not np.allclose(x[:, 5:], y[:, 5:]), name
    for name, (x, y) in backward.items():  # positions >= 6 never saw token 5
        np.testing.assert_array_equal(x[:, 6:], y[:, 6:], err_msg=f"backward {name}")
        assert not np.allclose(x[:, :6], y[:, :6]), name


def test_padding_does_not_change_real_positions(model):
    rng = np.random.default_rng(4)
    ids = char_ids(rng, 2, 8, lengths=[8, 5])
    padded = run(model, ids)
    alone = run(model, ids[1:, :5])  # row 1 without its padding
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2", "forward_logits", "backward_logits"):
        np.testing.assert_allclose(padded[key][1, :5], alone[key][0], rtol=1e-5, atol=1e-6, err_msg=key)
    for key in ("word_emb", "lstm_outputs1", "lstm_outputs2"):
        assert not padded[key][1, 5:].any(), key
    assert padded["mask"].tolist() == [[True] * 8, [True] * 5 + [False] * 3]
    longer = run(model, np.concatenate([ids, np.zeros_like(ids[:, :3])], axis=1))  # more padding
    np.testing.assert_allclose(longer["lstm_outputs2"][:, :8], padded["lstm_outputs2"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("residual", [True, False])
def test_residual_connection_around_the_second_layer(residual):
    model = BiLMTask(tiny(residual=residual)).build_model()
    for name in ("forward_lstm_1", "backward_lstm_1"):  # layer 2 outputs zeros
        layer = model.get_layer(name)
        layer.set_weights([np.zeros(w.shape, np.float32) for w in layer.weights])
    out = run(model, char_ids(np.random.default_rng(5), 2, 4))
    assert np.abs(out["lstm_outputs1"]).max() > 0
    expected = out["lstm_outputs1"] if residual else np.zeros_like(out["lstm_outputs1"])
    np.testing.assert_array_equal(out["lstm_outputs2"], expected)


def test_export_outputs_and_config_round_trip(model):
    ids = char_ids(np.random.default_rng(6), 2, 4, lengths=[4, 3])
    out = model.embed(tf.constant(ids))
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "word_emb": (2, 4, 32), "lstm_outputs1": (2, 4, 64), "lstm_outputs2": (2, 4, 64), "mask": (2, 4)}
    again = BiLM.from_config(model.get_config())
    assert again.model_config == model.model_config
    again.build(None)
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(again.embed(tf.constant(ids))["lstm_outputs2"], out["lstm_outputs2"], rtol=1e-6)
    assert [w.path for w in again.weights] == [w.path for w in model.weights]
    restored = config_lib.from_json(BiLMConfig, json.loads(json.dumps(config_lib.to_json(model.model_config))))
    assert restored == model.model_config
    changed, _ = config_lib.apply_overrides(restored, config_lib.TrainConfig(),
                                            ["filters=[[1, 4], [2, 8]]", "model.dropout=0.2"])
    assert changed.filters == ((1, 4), (2, 8)) and changed.dropout == 0.2


# --- softmax -----------------------------------------------------------------------------------------

def test_sampled_logits_correct_and_remove_accidental_hits():
    rng = np.random.default_rng(7)
    kernel, bias = rng.normal(size=(6, 3)).astype(np.float32), rng.normal(size=6).astype(np.float32)
    hidden = rng.normal(size=(4, 3)).astype(np.float32)
    labels = np.array([0, 2, 5, 2])
    candidates = np.array([2, 3, 2, 0], np.int32)
    count = (4, 6, "log_uniform")
    log_q = lambda ids: log_expected_count(tf.constant(ids), *count).numpy()  # noqa: E731
    out = sampled_logits(hidden, labels, kernel, bias, candidates, log_q(labels), log_q(candidates)).numpy()
    full = hidden @ kernel.T + bias
    np.testing.assert_allclose(out[:, 0], full[np.arange(4), labels] - log_q(labels), rtol=1e-5)
    expected = full[:, candidates] - log_q(candidates)
    hits = labels[:, None] == candidates[None, :]
    np.testing.assert_allclose(out[:, 1:][~hits], expected[~hits], rtol=1e-5)
    assert hits.sum() == 5 and (out[:, 1:][hits] <= -1e8).all()


def test_sampled_loss_equals_tf_sampled_softmax_loss_given_the_same_candidates():
    rng = np.random.default_rng(12)
    kernel, bias = rng.normal(size=(40, 5)).astype(np.float32), rng.normal(size=40).astype(np.float32)
    hidden, labels = rng.normal(size=(16, 5)).astype(np.float32), rng.integers(0, 40, 16)
    candidates = draw_candidates(tf.constant(rng.uniform(size=12), tf.float32), 40, "log_uniform")
    log_q = [log_expected_count(tf.constant(ids), 12, 40, "log_uniform") for ids in (labels, candidates)]
    ours = tf.nn.sparse_softmax_cross_entropy_with_logits(
        np.zeros(16, np.int32), sampled_logits(hidden, labels, kernel, bias, candidates, *log_q))
    reference = tf.nn.sampled_softmax_loss(
        kernel, bias, labels[:, None], hidden, num_sampled=12, num_classes=40, remove_accidental_hits=True,
        sampled_values=(tf.cast(candidates, tf.int64), tf.exp(log_q[0])[:, None], tf.exp(log_q[1])))
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sampler", ["log_uniform", "uniform"])
def test_inverse_cdf_sampler_follows_its_distribution(sampler):
    vocab, n = 20, 200_000
    ids = draw_candidates(tf.constant((np.arange(n) + 0.5) / n, tf.float32), vocab, sampler).numpy()
    frequencies = np.bincount(ids, minlength=vocab) / n
    k = np.arange(vocab)
    p = np.log((k + 2) / (k + 1)) / np.log(vocab + 1) if sampler == "log_uniform" else np.full(vocab, 1 / vocab)
    np.testing.assert_allclose(frequencies, p, atol=1e-4)
    np.testing.assert_allclose(log_expected_count(tf.constant(k), 7, vocab, sampler).numpy(), np.log(7 * p),
                               rtol=1e-5)


def test_sampled_loss_approaches_the_full_loss():
    rng = np.random.default_rng(8)
    hidden = tf.constant(rng.normal(size=(64, 8)), tf.float32)
    labels = tf.constant(rng.integers(0, 30, 64))
    # uniform proposal with num_sampled = V: every expected count is 1, the estimate of Z is unbiased
    head = LMSoftmax(30, num_sampled=30, sampler="uniform", seed=1)
    full = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, head(hidden))  # [64]
    sampled = [tf.nn.sparse_softmax_cross_entropy_with_logits(tf.zeros_like(labels), head(hidden, labels))
               for _ in range(50)]
    np.testing.assert_allclose(np.mean(sampled), np.mean(full), rtol=0.03)
    # log-uniform proposal: the loss is biased, but its average gradient points the same way
    zipf = LMSoftmax(30, num_sampled=64, seed=2)
    zipf.build(hidden.shape)
    zipf.set_weights(head.get_weights())

    def gradient(sampled_mode):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            logits = zipf(hidden, labels) if sampled_mode else zipf(hidden)
            targets = tf.zeros_like(labels) if sampled_mode else labels
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits))
        return tape.gradient(loss, hidden).numpy().ravel()

    mean_sampled = np.mean([gradient(True) for _ in range(20)], axis=0)
    exact = gradient(False)
    cosine = mean_sampled @ exact / np.linalg.norm(mean_sampled) / np.linalg.norm(exact)
    assert cosine > 0.9, cosine


def batch(rng, batch_size=4, steps=6, lengths=None):
    ids = char_ids(rng, batch_size, steps, lengths)
    real = ids.any(-1)
    y = {d: tf.constant(rng.integers(1, V, (batch_size, steps)) * real) for d in ("forward", "backward")}
    w = {d: tf.constant(real.astype(np.float32)) for d in ("forward", "backward")}
    return {"char_ids": tf.constant(ids)}, y, w


@pytest.mark.slow
def test_sampled_softmax_trains_under_xla_and_evaluation_is_full():
    task = BiLMTask(tiny(softmax="sampled", num_sampled=16), max_seq_length=6)
    model = task.build_model()
    x, y, w = batch(np.random.default_rng(9), lengths=[6, 6, 3, 1])

    @tf.function(jit_compile=True)
    def step(x, y, w):
        with tf.GradientTape() as tape:
            loss, stats = task.loss_and_stats(model, x, y, w, training=True)
        return loss, stats, tape.gradient(loss, model.trainable_variables)

    loss, stats, grads = step(x, y, w)
    assert set(stats) == {"forward_loss", "backward_loss"} and float(stats["forward_loss"][1]) == 16.0
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
    assert float(step(x, y, w)[0]) != float(loss)  # new candidates each call
    eval_loss, eval_stats = tf.function(lambda: task.loss_and_stats(model, x, y, w, False), jit_compile=True)()
    out = model(x, training=False)
    expected = []
    for d in ("forward", "backward"):
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(y[d], tf.int32), model.softmax(out[d]))
        expected.append(float(tf.reduce_sum(ce * w[d]) / tf.reduce_sum(w[d])))
        np.testing.assert_allclose(float(eval_stats[f"{d}_loss"][0]), float(tf.reduce_sum(ce * w[d])), rtol=1e-5)
    np.testing.assert_allclose(float(eval_loss), np.mean(expected), rtol=1e-5)
    assert "forward_accuracy" in eval_stats


# --- task --------------------------------------------------------------------------------------------

def test_metrics_counts_and_flops():
    task = BiLMTask(tiny(), max_seq_length=20)
    totals = {"forward_loss": (20.0, 10.0), "backward_loss": (30.0, 10.0), "forward_accuracy": (4.0, 10.0)}
    m = task.metrics(totals)
    assert m["forward_perplexity"] == pytest.approx(math.exp(2.0))
    assert m["backward_perplexity"] == pytest.approx(math.exp(3.0))
    assert m["loss"] == pytest.approx(2.5) and m["perplexity"] == pytest.approx(math.exp(2.5))
    assert m["forward_accuracy"] == pytest.approx(0.4)
    assert task.tokens_per_example() == 20 and task.data_expectations() == {"model": "bilm", "max_seq_length": 20}
    assert BiLMTask(tiny(), max_seq_length=40).flops_per_example() == pytest.approx(2 * task.flops_per_example())
    original = BiLMTask(BiLMConfig(**PRESETS["bilm_original"]), max_seq_length=20)
    cnn = sum(2 * w * 16 * c * (51 - w) for w, c in PRESETS["bilm_original"]["filters"])  # 17.6M
    highway_and_projection = 2 * 2 * (2 * 2048 * 2048) + 2 * 2048 * 512
    lstms = 2 * 2 * (2 * 1024 * 16384 + 2 * 4096 * 512)  # 2 directions x 2 layers
    softmax = 2 * 2 * 512 * 8193  # 2 directions, 8192 samples + the target
    per_token = cnn + highway_and_projection + lstms + softmax
    assert original.flops_per_example() == pytest.approx(3 * 20 * per_token) and 220e6 < per_token < 222e6
    with pytest.raises(ValueError, match="max_seq_length"):
        BiLMTask(tiny()).tokens_per_example()
    x, y, w = BiLMTask(tiny()).prepare_batch({"tokens": tf.constant([["a"]]), "char_ids": 1}, 2, 3)
    assert x == {"char_ids": 1} and (y, w) == (2, 3)


def test_presets_are_valid_and_parameter_counts_match_elmo():
    for name, preset in PRESETS.items():
        config = BiLMConfig(**preset)
        assert config == dataclasses.replace(config), name
    counts = {name: parameter_count(BiLMConfig(**PRESETS[name]), include_softmax=False)
              for name in ("bilm_small", "bilm_medium", "bilm_original")}
    assert counts == {"bilm_small": 13_593_312, "bilm_medium": 28_027_744, "bilm_original": 93_600_864}
    original = BiLMTask(BiLMConfig(**PRESETS["bilm_original"])).build_model()  # about 1 s
    assert original.count_params() == parameter_count(original.model_config) == 93_600_864 + 30522 * 513
    encoder = original.get_layer("char_cnn").count_params()
    assert encoder == 18_037_856  # char embedding + CNN 0.2M, two 2048-wide highways 16.8M, projection 1.0M
    for bad in (dict(filters=((60, 4),)), dict(softmax="hierarchical"), dict(dropout=1.0), dict(cell_size=0),
                dict(sampler="zipf")):
        with pytest.raises(ValueError):
            tiny(**bad)


@pytest.mark.slow
def test_tiny_model_memorises_a_batch_with_adam():
    keras.utils.set_random_seed(0)
    task = BiLMTask(tiny(dropout=0.0), max_seq_length=6)
    model = task.build_model()
    optimizer = keras.optimizers.Adam(0.01)
    x, y, w = batch(np.random.default_rng(10), lengths=[6, 6, 5, 4])

    @tf.function  # (XLA training is tested above; compiling costs seconds here)
    def step():
        with tf.GradientTape() as tape:
            loss, _ = task.loss_and_stats(model, x, y, w, training=True)
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    losses = [float(step()) for _ in range(100)]
    assert losses[0] > 3.5 and losses[-1] < 0.3 * losses[0], losses[::10]


@pytest.mark.slow
def test_mixed_bfloat16_computes_in_bf16_with_float32_loss():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        task = BiLMTask(tiny(softmax="sampled", num_sampled=8))
        model = task.build_model()
        x, y, w = batch(np.random.default_rng(11), lengths=[6, 3, 6, 2])
        out = model(x, training=False)
        assert out["lstm_outputs2"].dtype == tf.bfloat16 and out["word_emb"].dtype == tf.bfloat16
        assert all(v.dtype == "float32" for v in model.trainable_variables)
        loss, stats = tf.function(lambda: task.loss_and_stats(model, x, y, w, True), jit_compile=True)()
        assert loss.dtype == tf.float32 and np.isfinite(loss.numpy()) and stats["backward_loss"][0].dtype == tf.float32
        eval_loss, _ = task.loss_and_stats(model, x, y, w, False)
        assert abs(float(eval_loss) - math.log(V)) < 1.0
    finally:
        keras.mixed_precision.set_global_policy("float32")


# --- real data from the Beam job ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def bilm_data(tmp_path_factory, bert_vocab_path):
    from pipeline import pretraining_data
    from tests.pipeline.test_pretraining_data_job import write_corpus

    base = tmp_path_factory.mktemp("bilm")
    corpus = write_corpus(base / "corpus.txt")
    assert pretraining_data.main(["--input", corpus, "--vocab", bert_vocab_path, "--output_dir", str(base / "out"),
                                  "--runner", "FnApiRunner", "--model", "bilm", "--max_seq_length", "8"]) == 0
    return base / "out"


@pytest.mark.slow
def test_loss_and_stats_on_a_real_batch_under_xla(bilm_data):
    from preprocessing import readers

    metadata = json.loads((bilm_data / "metadata.json").read_text())
    task = BiLMTask(tiny(vocab_size=metadata["vocab"]["size"], softmax="sampled", num_sampled=64),
                    max_seq_length=metadata["config"]["max_seq_length"])
    dataset = readers.make_dataset(str(bilm_data / "bilm-*.tfrecord"), 4, shuffle=False,
                                   **task.data_expectations()).map(task.prepare_batch)
    x, y, w = next(iter(dataset))
    assert set(x) == {"char_ids"} and x["char_ids"].shape == (4, 8, 50)
    model = task.build_model()
    compiled = {training: tf.function(lambda x, y, w, t=training: task.loss_and_stats(model, x, y, w, t),
                                      jit_compile=True) for training in (True, False)}
    loss, stats = compiled[False](x, y, w)
    assert float(stats["forward_loss"][1]) == float(stats["backward_loss"][1]) == 32.0
    assert abs(float(loss) - math.log(30522)) < 0.5  # an untrained model is near uniform
    train_loss, train_stats = compiled[True](x, y, w)
    assert np.isfinite(float(train_loss)) and set(train_stats) == {"forward_loss", "backward_loss"}
    assert 0 < task.metrics({k: (float(s), float(c)) for k, (s, c) in stats.items()})["perplexity"] < 1e5
