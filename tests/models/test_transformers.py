"""BERT and GPT: shapes, exact parameter counts of the published sizes, the tied heads computed by hand,
padding invariance, causality, and the objectives' numbers against numpy."""

import numpy as np
import pytest
import tensorflow as tf

from models import bert, gpt


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _layer_norm(x, gamma, beta, eps):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.fixture(scope="module")
def tiny_bert():
    config = bert.BertConfig(**{**bert.PRESETS["bert_tiny"], "tie_output": True}, vocab_size=50, dropout=0.0)
    task = bert.BertTask(config, 12, 3)
    return task, task.build_model()


def _bert_inputs(rng, batch=2, seq=12, vocab=50):
    ids = rng.integers(5, vocab, (batch, seq))
    mask = np.ones((batch, seq), np.int64)
    mask[1, 8:] = 0
    types = (np.arange(seq) >= 6).astype(np.int64)[None].repeat(batch, 0)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
            "masked_lm_positions": np.array([[1, 4, 7], [2, 3, 0]])}


def test_bert_encoder_outputs(tiny_bert):
    task, model = tiny_bert
    encoder = bert.encoder_of(model)
    x = _bert_inputs(np.random.default_rng(0))
    out = encoder({k: x[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    assert out["sequence_output"].shape == (2, 12, 128) and out["pooled_output"].shape == (2, 128)
    assert len(out["encoder_outputs"]) == 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    pooler = encoder.get_layer("pooled_dense")
    expected = np.tanh(out["sequence_output"][:, 0].numpy() @ pooler.kernel.numpy() + pooler.bias.numpy())
    np.testing.assert_allclose(out["pooled_output"], expected, atol=1e-5)


def test_bert_mlm_head_is_tied_and_gathers_masked_positions(tiny_bert):
    task, model = tiny_bert
    x = _bert_inputs(np.random.default_rng(1))
    outputs = model(x)
    assert outputs["mlm"].shape == (2, 3, 50) and outputs["nsp"].shape == (2, 2)
    sequence = bert.encoder_of(model)({k: x[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})[
        "sequence_output"].numpy()
    head = model.get_layer("mlm_head")
    dense, norm = head._intermediate_dense, head._intermediate_layer_norm
    gathered = np.take_along_axis(sequence, x["masked_lm_positions"][..., None], 1)  # [B, P, H]
    hidden = _layer_norm(_gelu_tanh(gathered @ dense.kernel.numpy() + dense.bias.numpy()),
                         norm.gamma.numpy(), norm.beta.numpy(), 1e-12)
    embeddings = bert.encoder_of(model).get_layer("token_embedding").embeddings.numpy()  # [V, H]
    expected = hidden @ embeddings.T + head._bias.numpy()
    np.testing.assert_allclose(outputs["mlm"], expected, atol=1e-4)


def test_bert_padding_does_not_leak(tiny_bert):
    _, model = tiny_bert
    x = _bert_inputs(np.random.default_rng(2))
    changed = dict(x, input_word_ids=x["input_word_ids"].copy())
    changed["input_word_ids"][1, 8:] = 7  # only padded positions (input_mask 0) differ
    a, b = model(x)["mlm"].numpy(), model(changed)["mlm"].numpy()
    np.testing.assert_allclose(a[1], b[1], atol=1e-5)


def test_bert_loss_is_masked_mean_plus_nsp(tiny_bert):
    task, model = tiny_bert
    x = _bert_inputs(np.random.default_rng(3))
    y = {"mlm": np.array([[5, 6, 7], [8, 9, 0]]), "nsp": np.array([[0], [1]])}
    w = {"mlm": np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], np.float32), "nsp": np.ones((2, 1), np.float32)}
    loss, stats = task.loss_and_stats(model, x, y, w, training=False)
    outputs = model(x)

    def ce(logits, labels):
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, labels[..., None], -1)[..., 0]

    mlm = (ce(outputs["mlm"].numpy(), y["mlm"]) * w["mlm"]).sum() / 5
    nsp = ce(outputs["nsp"].numpy(), y["nsp"][:, 0]).mean()
    assert float(loss) == pytest.approx(mlm + nsp, rel=1e-5)
    assert float(stats["mlm_loss"][1]) == 5.0 and float(stats["nsp_correct"][1]) == 2.0
    metrics = task.metrics({k: (float(s), float(c)) for k, (s, c) in stats.items()})
    assert set(metrics) >= {"mlm_accuracy", "mlm_loss", "nsp_accuracy"}
    assert metrics["mlm_loss"] == pytest.approx(mlm, rel=1e-5)


def test_bert_without_next_sentence_is_a_masked_lm_only(tiny_bert):
    """`next_sentence=False`: no NSP head or output, the loss is the masked LM's alone, and every other weight
    is the NSP model's (same paths and shapes), so the same checkpoint layout serves both."""
    task, model = tiny_bert
    config = bert.BertConfig(**{**bert.PRESETS["bert_tiny"], "tie_output": True}, vocab_size=50, dropout=0.0,
                             next_sentence=False)
    mlm_task = bert.BertTask(config, 12, 3)
    mlm_model = mlm_task.build_model()
    assert {v.path: v.shape for v in mlm_model.weights} == {
        v.path: v.shape for v in model.weights if not v.path.startswith("nsp_head/")}
    mlm_model.set_weights([w for v, w in zip(model.weights, model.get_weights())
                           if not v.path.startswith("nsp_head/")])
    x = _bert_inputs(np.random.default_rng(3))
    y = {"mlm": np.array([[5, 6, 7], [8, 9, 0]]), "nsp": np.array([[0], [1]])}
    w = {"mlm": np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], np.float32), "nsp": np.ones((2, 1), np.float32)}
    assert set(mlm_model(x)) == {"mlm"}
    loss, stats = mlm_task.loss_and_stats(mlm_model, x, y, w, training=False)
    _, both = task.loss_and_stats(model, x, y, w, training=False)
    assert float(loss) == pytest.approx(float(both["mlm_loss"][0]) / 5, rel=1e-5)
    assert set(stats) == {"mlm_loss", "mlm_correct"}
    metrics = mlm_task.metrics({k: (float(s), float(c)) for k, (s, c) in stats.items()})
    assert set(metrics) == {"mlm_accuracy", "mlm_loss", "loss"} and metrics["loss"] == metrics["mlm_loss"]


@pytest.mark.slow
def test_bert_step_compiles_with_xla(tiny_bert):
    task, model = tiny_bert
    x = _bert_inputs(np.random.default_rng(4))
    y = {"mlm": np.array([[5, 6, 7], [8, 9, 0]]), "nsp": np.array([[0], [1]])}
    w = {"mlm": np.ones((2, 3), np.float32), "nsp": np.ones((2, 1), np.float32)}

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            loss, _ = task.loss_and_stats(model, x, y, w, training=True)
        return loss, tape.gradient(loss, model.trainable_variables)

    loss, grads = step()
    assert np.isfinite(float(loss)) and all(g is not None for g in grads)


@pytest.mark.slow
def test_published_sizes_have_the_published_parameter_counts():
    # HuggingFace bert-base-uncased BertModel: 109,482,240 (embeddings, 12 blocks, pooler).
    encoder = bert.build_encoder(bert.BertConfig(**bert.PRESETS["bert_base"], vocab_size=30522))
    assert encoder.count_params() == 109_482_240
    # HuggingFace openai-gpt (GPT-1, 40,478 BPE tokens, 512 positions, tied output): 116,534,784.
    decoder = gpt.build_decoder(gpt.GptConfig(**gpt.PRESETS["gpt_gpt1"], vocab_size=40478))
    assert decoder.count_params() == 116_534_784


@pytest.fixture(scope="module")
def tiny_gpt():
    fields = {**gpt.PRESETS["gpt_tiny"], "tie_output": True, "output_bias": False}  # GPT-1's output layer
    task = gpt.GptTask(gpt.GptConfig(**fields, vocab_size=40, dropout=0.0), 10)
    return task, task.build_model()


def test_gpt_never_attends_to_the_future(tiny_gpt):
    _, model = tiny_gpt
    ids = np.random.default_rng(5).integers(5, 40, (1, 10))
    base = model({"input_word_ids": ids})["logits"].numpy()
    for t in (3, 7):
        changed = ids.copy()
        changed[0, t] = (changed[0, t] + 1 - 5) % 35 + 5
        out = model({"input_word_ids": changed})["logits"].numpy()
        np.testing.assert_allclose(out[0, :t], base[0, :t], atol=1e-5)
        assert np.abs(out[0, t:] - base[0, t:]).max() > 1e-4


def test_gpt_output_is_tied_to_the_token_embedding(tiny_gpt):
    task, model = tiny_gpt
    ids = np.random.default_rng(6).integers(5, 40, (2, 10))
    out = model({"input_word_ids": ids})
    embeddings = model.get_layer("token_embedding").embeddings.numpy()
    np.testing.assert_allclose(out["logits"], out["hidden_states"].numpy() @ embeddings.T, atol=1e-4)
    loss, stats = task.loss_and_stats(model, {"input_word_ids": ids}, ids, np.ones((2, 10), np.float32), False)
    metrics = task.metrics({k: (float(s), float(c)) for k, (s, c) in stats.items()})
    assert metrics["perplexity"] == pytest.approx(np.exp(float(loss)), rel=1e-4)


def test_gpt_untied_output_with_bias_and_pre_ln():
    fields = {**gpt.PRESETS["gpt_tiny"], "tie_output": False, "output_bias": True, "normalize_first": True}
    model = gpt.build_decoder(gpt.GptConfig(**fields, vocab_size=40, dropout=0.0))
    bias = model.get_layer("output_bias").bias
    bias.assign(np.linspace(-1, 1, 40).astype(np.float32))
    ids = np.random.default_rng(8).integers(5, 40, (2, 10))
    out = model({"input_word_ids": ids})
    embedding = model.get_layer("token_embedding")
    hidden = out["hidden_states"].numpy()  # after the final layer norm: unit variance per position
    np.testing.assert_allclose(hidden.std(-1), 1.0, atol=1e-2)
    expected = hidden @ embedding.reverse_embeddings.numpy() + bias.numpy()  # [B, T, V]: its own matrix
    np.testing.assert_allclose(out["logits"], expected, atol=1e-4)
    assert not np.allclose(embedding.reverse_embeddings.numpy(), embedding.embeddings.numpy().T)
    # the untied matrix and the bias are trained weights (the bias free of weight decay: named `bias`)
    names = {v.path for v in model.trainable_variables}
    assert "output_bias/bias" in names and any(n.endswith("reverse_embeddings") for n in names)


def test_the_tiny_presets_untie_their_outputs():
    assert gpt.PRESETS["gpt_tiny"]["tie_output"] is False and bert.PRESETS["bert_tiny"]["tie_output"] is False
    model = bert.build_pretrainer(bert.BertConfig(**bert.PRESETS["bert_tiny"], vocab_size=50))
    head = model.get_layer("mlm_head")
    assert head.token_embedding is None and tuple(head._kernel.shape) == (128, 50)


def test_sequence_longer_than_positions_is_refused():
    with pytest.raises(ValueError, match="max_position_embeddings"):
        gpt.GptTask(gpt.GptConfig(**{**gpt.PRESETS["gpt_tiny"], "max_position_embeddings": 64}), max_seq_length=128)


def test_weighted_cross_entropy_counts_argmax_hits_and_weights():
    from models.objective import weighted_cross_entropy
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(3, 4, 9)).astype(np.float32)
    labels = rng.integers(0, 9, (3, 4))
    labels[0, :2] = logits[0, :2].argmax(-1)  # some sure hits
    weights = rng.integers(0, 2, (3, 4)).astype(np.float32)
    weights[0, :2] = 1.0
    loss, correct, count = weighted_cross_entropy(labels, logits, weights)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    assert float(loss) == pytest.approx(-(np.take_along_axis(logp, labels[..., None], -1)[..., 0] * weights).sum(),
                                        rel=1e-5)
    assert float(correct) == ((logits.argmax(-1) == labels) * weights).sum() >= 2
    assert float(count) == weights.sum()
