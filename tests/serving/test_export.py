"""`serving.export` on tiny trained models of all three families: the exports reload in a fresh process with
the Keras models' outputs, fine-tune through `hub.KerasLayer`, run under `saved_model_cli`, carry parseable
warm-up records and a model_config_list, use only servable ops; bad input fails cleanly and leaves nothing
half-written; an export never lands in a model_dir, and a folder that is no model_dir is named by what it
holds."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from models import bert, families
from models.training import train
from preprocessing.elmo_chars import char_ids
from preprocessing.packing import pack_inputs
from preprocessing.vocabulary import Vocabulary
from preprocessing.wordpiece import WordPieceTokenizer
from serving.export import cli as export
from serving.export import op_check
from serving.server import warmup
from serving.server.model_config import read_model_config_list
from tests.conftest import ROOT
from tests.fixtures.training import write_dataset

# Lower-case, space-separated words without punctuation (the biLM's `tokens` signature sees the same words), all
# in the tiny models' vocabulary.
TEXTS = ["the bank raised its interest rates", "they sat on the river bank", "a play"]
ATOL = 1e-5


@pytest.fixture(scope="module")
def runs(tiny_models):
    """kind -> (model_dir, export_dir) of the session's tiny models (tests/fixtures/tiny_models.py: trained for two
    steps, exported by `serving.export`); read-only."""
    return {kind: (m.model_dir, m.export_dir) for kind, m in tiny_models.items()}


@pytest.fixture(scope="module")
def consumed(runs, tmp_path_factory):
    """What a fresh process computes with the exports (tests/fixtures/export_consumer.py)."""
    root = tmp_path_factory.mktemp("consumer")
    texts, result = root / "texts.json", root / "out.npz"
    texts.write_text(json.dumps(TEXTS))
    args = [f"{kind}={export_dir}" for kind, (_, export_dir) in runs.items()]
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "fixtures", "export_consumer.py"), str(result), str(texts), *args],
                   check=True, timeout=300)
    return dict(np.load(result))


def _tokenizer(model_dir):
    return WordPieceTokenizer(Vocabulary.from_file(os.path.join(model_dir, "vocab.txt")), lower_case=True)


def test_bert_exports_give_the_keras_encoders_outputs(runs, consumed):
    model_dir, _ = runs["bert"]
    task, pretrainer, saved = families.load_model(model_dir)
    tokenizer = _tokenizer(model_dir)
    ids = tokenizer.special_ids
    packed = pack_inputs([tokenizer.tokenize(tf.constant(TEXTS))], saved["data"]["max_seq_length"],
                         ids["[CLS]"], ids["[SEP]"])
    np.testing.assert_array_equal(consumed["bert_input_word_ids"], packed["input_word_ids"])
    want = bert.encoder_of(pretrainer)(packed, training=False)
    np.testing.assert_allclose(consumed["bert_sequence_output"], want["sequence_output"], atol=ATOL)
    np.testing.assert_allclose(consumed["bert_pooled_output"], want["pooled_output"], atol=ATOL)
    assert consumed["bert_encoder_outputs_count"] == task.config.num_layers
    # The TF Serving model pads to the longest input only; [CLS]'s pooled vector is the same.
    np.testing.assert_allclose(consumed["bert_served_pooled_output"], want["pooled_output"], atol=ATOL)
    np.testing.assert_allclose(consumed["bert_tfsm_pooled_output"], want["pooled_output"], atol=ATOL)
    longest = max(len(t.split()) for t in TEXTS) + 2
    assert consumed["bert_served_input_mask"].shape == (len(TEXTS), longest)


def test_gpt_exports_give_the_decoders_logits_and_greedy_text(runs, consumed):
    model_dir, _ = runs["gpt"]
    _, decoder, _ = families.load_model(model_dir)
    tokenizer = _tokenizer(model_dir)
    ids = tokenizer.tokenize(tf.constant(TEXTS))
    np.testing.assert_array_equal(consumed["gpt_ids"], ids.to_tensor())
    want = decoder({"input_word_ids": tf.cast(ids.to_tensor(), tf.int32)}, training=False)["logits"]
    np.testing.assert_allclose(consumed["gpt_logits"], want, atol=ATOL)
    last = ids.row_lengths().numpy() - 1
    np.testing.assert_allclose(consumed["gpt_served_next_token_logits"], want.numpy()[np.arange(len(TEXTS)), last],
                               atol=ATOL)
    special = tokenizer.special_ids
    banned = [special[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[MASK]")]
    for row, prompt in enumerate(ids.to_list()):  # greedy decoding, one token at a time in Python
        sequence, new = [special["[SEP]"], *prompt], []
        for _ in range(6):
            logits = decoder({"input_word_ids": tf.constant([sequence], tf.int32)}, training=False)["logits"][0, -1]
            logits = logits.numpy()
            logits[banned] = -np.inf
            token = int(np.argmax(logits))
            if token == special["[SEP]"]:
                break
            sequence.append(token)
            new.append(token)
        assert consumed["gpt_greedy_count"][row] == len(new)
        assert consumed["gpt_greedy_ids"][row, :len(new)].tolist() == new


def test_bilm_export_is_elmo_shaped_and_gives_the_bilms_outputs(runs, consumed):
    model_dir, _ = runs["bilm"]
    _, bilm, _ = families.load_model(model_dir)
    words = [t.split() for t in TEXTS]
    width = max(len(w) for w in words) + 2
    rows = [["<S>", *w, "</S>"] + [""] * (width - len(w) - 2) for w in words]
    lengths = tf.constant([len(w) + 2 for w in words])
    out = bilm.embed(char_ids(tf.constant(rows), lengths))
    mask = np.array([[1.0] * len(w) + [0.0] * (width - 2 - len(w)) for w in words])[..., None]  # [B, T, 1]
    layers = {k: out[k].numpy()[:, 1:-1] * mask for k in ("word_emb", "lstm_outputs1", "lstm_outputs2")}
    for key, value in layers.items():
        np.testing.assert_allclose(consumed[f"bilm_{key}"], value, atol=ATOL, err_msg=key)
    # The untrained mix is an average of (word_emb twice, layer 1, layer 2), scaled by gamma = 1.
    elmo = (np.concatenate([layers["word_emb"]] * 2, -1) + layers["lstm_outputs1"] + layers["lstm_outputs2"]) / 3
    np.testing.assert_allclose(consumed["bilm_elmo"], elmo, atol=ATOL)
    np.testing.assert_allclose(consumed["bilm_default"], elmo.sum(1) / mask.sum(1), atol=ATOL)
    assert consumed["bilm_sequence_len"].tolist() == [len(w) for w in words]
    np.testing.assert_allclose(consumed["bilm_tokens_elmo"], elmo, atol=ATOL)
    np.testing.assert_allclose(consumed["bilm_output_key_elmo"], elmo, atol=ATOL)
    np.testing.assert_allclose(consumed["bilm_tfsm_elmo"], elmo, atol=ATOL)


@pytest.mark.parametrize("kind", ["bert", "gpt", "bilm"])
def test_hub_keras_layer_fine_tunes_each_module(runs, kind):
    import tensorflow_hub as hub
    import tf_keras

    _, export_dir = runs[kind]
    path = os.path.join(export_dir, "hub", "encoder" if kind == "bert" else "module")
    rng = np.random.default_rng(0)
    if kind == "bilm":
        layer = hub.KerasLayer(path, trainable=True, output_key="default")
        inputs = tf_keras.Input([], dtype=tf.string)
        features = layer(inputs)
        x = np.array([" ".join(rng.choice(TEXTS[0].split(), 4)) for _ in range(16)])
    else:
        layer = hub.KerasLayer(path, trainable=True)
        names = ("input_word_ids", "input_mask", "input_type_ids") if kind == "bert" else ("input_word_ids",)
        inputs = {name: tf_keras.Input([8], dtype=tf.int32, name=name) for name in names}
        out = layer(inputs)
        features = out["pooled_output"] if kind == "bert" else out["hidden_states"][:, -1]
        x = {name: (rng.integers(5, 30, (16, 8)) if name == "input_word_ids" else
                    np.ones((16, 8)) if name == "input_mask" else np.zeros((16, 8))).astype(np.int32)
             for name in names}
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(features))
    model.compile(tf_keras.optimizers.Adam(3e-3), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    y = np.arange(16) % 2
    before = [v.numpy().copy() for v in layer.trainable_variables]
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0).history["loss"]
    assert history[-1] < history[0]
    changed = sum(not np.allclose(a, v.numpy()) for a, v in zip(before, layer.trainable_variables))
    assert changed >= len(before) // 2, f"{changed} of {len(before)} module variables changed"
    sample = x[:4] if kind == "bilm" else {k: v[:4] for k, v in x.items()}
    inference = [model(sample, training=False).numpy() for _ in range(2)]
    np.testing.assert_array_equal(inference[0], inference[1])  # no dropout at inference
    training = [model(sample, training=True).numpy() for _ in range(2)]
    assert np.abs(training[0] - training[1]).max() > 1e-7  # dropout live when training


def test_keras3_tfsmlayer_loads_the_reusable_call(runs):
    import keras

    _, export_dir = runs["gpt"]
    layer = keras.layers.TFSMLayer(os.path.join(export_dir, "hub", "module"), call_endpoint="__call__")
    out = layer({"input_word_ids": tf.constant([[5, 6, 7]], tf.int32)})
    assert out["logits"].shape[:2] == (1, 3)


def test_serving_layout_warmup_records_and_model_config(runs):
    for kind, (_, export_dir) in runs.items():
        version_dir = os.path.join(export_dir, "serving", kind, "1")
        requests = warmup.read_warmup_requests(os.path.join(version_dir, warmup.WARMUP_FILE))
        loaded = tf.saved_model.load(version_dir)
        assert {r.model_spec.signature_name for r in requests} <= set(loaded.signatures)
        assert len(requests) == 2 and all(r.model_spec.name == kind for r in requests)
        entries = read_model_config_list(os.path.join(export_dir, "serving", export.MODEL_CONFIG_FILE))
        assert [(e.name, e.base_path) for e in entries] == [(kind, os.path.join(export_dir, "serving", kind))]
        container = read_model_config_list(os.path.join(export_dir, "serving", export.CONTAINER_CONFIG_FILE))
        assert [(e.name, e.base_path) for e in container] == [(kind, f"/models/{kind}")]
        card = open(os.path.join(export_dir, "hub", "encoder" if kind == "bert" else "module", "README.md")).read()
        assert card.startswith(f"# Module {kind}/") and "<!-- format: saved_model_2 -->" in card
        assert os.path.exists(os.path.join(export_dir, "hub", "preprocessor" if kind == "bert" else "module",
                                           "assets", "vocab.txt"))
    assert os.path.exists(os.path.join(runs["bilm"][1], "hub", "module", "assets", "options.json"))


def test_saved_model_cli_runs_the_serving_signature(runs):
    _, export_dir = runs["bert"]
    wrapper = ("import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli; "
               "sys.exit(saved_model_cli.main())")
    result = subprocess.run(
        [sys.executable, "-c", wrapper, "run", "--dir", os.path.join(export_dir, "serving", "bert", "1"), "--tag_set",
         "serve", "--signature_def", "serving_default", "--input_exprs", 'text=["the river bank"]'],
        capture_output=True, text=True, timeout=600)  # a fresh TensorFlow process: bounds a hang only
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Result for output key pooled_output" in result.stdout


def test_the_op_check_names_unsupported_ops(runs):
    _, export_dir = runs["bert"]
    version_dir = os.path.join(export_dir, "serving", "bert", "1")
    ops = op_check.check_serving_ops(version_dir)
    assert "FastWordpieceTokenizeWithOffsets" in ops and "MatMul" in ops or "BatchMatMulV2" in ops
    with pytest.raises(op_check.UnsupportedOpsError, match="FastWordpieceTokenizeWithOffsets"):
        op_check.check_serving_ops(version_dir, allowed=op_check.core_ops())


def test_an_unservable_model_fails_the_export_and_leaves_nothing(runs, tmp_path, monkeypatch, capsys):
    model_dir, _ = runs["gpt"]
    monkeypatch.setattr(op_check, "tf_text_ops", lambda: frozenset())  # as if TF Serving lacked TF-Text
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "e")]) == 3
    assert "FastWordpieceTokenizeWithOffsets" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()  # no module, no version, no staging folder: the folder it made is gone too


def test_versions_count_up_and_are_never_replaced(runs, tmp_path, capsys):
    model_dir, _ = runs["gpt"]
    out = str(tmp_path / "e")
    assert export.main(["--model_dir", model_dir, "--export_dir", out, "--version", "3"]) == 0
    assert export.main(["--model_dir", model_dir, "--export_dir", out, "--model_name", "story", "--overwrite"]) == 0
    assert export.main(["--model_dir", model_dir, "--export_dir", out, "--overwrite"]) == 0
    assert sorted(os.listdir(os.path.join(out, "serving", "gpt"))) == ["3", "4"]
    assert [e.name for e in read_model_config_list(os.path.join(out, "serving", "models.config"))] == ["gpt", "story"]
    assert export.main(["--model_dir", model_dir, "--export_dir", out, "--version", "4", "--overwrite"]) == 2
    assert "immutable" in capsys.readouterr().err
    assert json.load(open(os.path.join(out, "export.json"))) == {"family": "gpt", "hub": ["module"],
                                                                 "models": ["gpt", "story"]}


def _tree(root) -> dict:
    """path -> (size, mtime) of every file under root: what a refused export must leave as it was."""
    return {os.path.join(d, f): (os.stat(os.path.join(d, f)).st_size, os.stat(os.path.join(d, f)).st_mtime_ns)
            for d, _, files in os.walk(root) for f in files}


def test_an_export_never_replaces_what_it_did_not_create(runs, tmp_path, capsys):
    """An existing hub/ needs --overwrite; another family's folder is refused, naming the family there,
    also for an older export without export.json; a refused export changes nothing."""
    gpt_dir, bert_dir = runs["gpt"][0], runs["bert"][0]
    out = str(tmp_path / "e")
    assert export.main(["--model_dir", gpt_dir, "--export_dir", out]) == 0
    before = _tree(out)
    assert export.main(["--model_dir", gpt_dir, "--export_dir", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {os.path.join(out, 'hub')} holds the TF-Hub modules of an earlier gpt export: pass " \
                  f"--overwrite to replace them, or use another --export_dir"
    for manifest in (True, False):
        if not manifest:
            os.remove(os.path.join(out, "export.json"))  # as written before export.json existed
            before = _tree(out)
        assert export.main(["--model_dir", bert_dir, "--export_dir", out, "--overwrite"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {out} holds a gpt export; a bert export there would mix the two"), err
        assert _tree(out) == before and sorted(os.listdir(os.path.join(out, "serving", "gpt"))) == ["1"]


def test_an_export_into_a_model_dir_is_refused_naming_it(tmp_path, capsys):
    """Issue 46: `--export_dir` equal to a training model_dir wrote the export among its checkpoints."""
    from tests.models.test_convert import random_model_dir

    model_dir = random_model_dir(tmp_path / "md", "gpt", num_layers=1, hidden_size=8, num_heads=2, intermediate_size=32)
    before = _tree(model_dir)
    for more in ([], ["--overwrite"]):
        assert export.main(["--model_dir", model_dir, "--export_dir", model_dir, *more]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: --export_dir {model_dir} holds a training model_dir of models.training.train "
                              f"(config.json, checkpoint), not a serving.export run: give another --export_dir"), err
        assert len(err.splitlines()) == 1
    assert _tree(model_dir) == before


def test_a_model_dir_whose_config_is_not_ours_is_named_by_what_it_holds(tmp_path, capsys):
    """Issue 46: a model_dir whose config.json `models.convert --to hf_bert` had replaced gave `error: 'model'`."""
    from tests.models.test_convert import random_model_dir

    model_dir = random_model_dir(tmp_path / "md", "bert", num_layers=1, hidden_size=8, num_heads=2,
                                 intermediate_size=16)
    (tmp_path / "md" / "config.json").write_text(json.dumps({"architectures": ["BertForPreTraining"],
                                                             "model_type": "bert", "vocab_size": 40}))
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: --model_dir {model_dir} holds a HuggingFace BERT checkpoint in the hf_bert format "
                   f"(config.json, vocab.txt), not a model_dir of models.training.train or models.convert --from: "
                   f"give a model_dir (models.convert --from FORMAT makes one of a checkpoint)"), err
    (tmp_path / "md" / "config.json").write_text(json.dumps({"name": "something else"}))
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --model_dir {model_dir} has a config.json that names no model family, not a "
                          f"model_dir"), err
    assert not (tmp_path / "e").exists()


def test_export_flags_are_checked_before_the_model_loads(runs, tmp_path, capsys):
    model_dir = runs["gpt"][0]
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    cases = [(["--model_dir", str(a_file), "--export_dir", str(tmp_path / "e")], "--model_dir", "is a file"),
             (["--model_dir", model_dir, "--export_dir", str(a_file)], "--export_dir", "is a file, not a folder"),
             (["--model_dir", model_dir, "--export_dir", str(a_file / "sub")], "--export_dir", "is a file"),
             (["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"), "--version", "0"], "--version", ">= 1"),
             (["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"), "--model_name", "../up"],
              "--model_name", "plain folder name"),
             (["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"), "--warmup_text", str(tmp_path)],
              "--warmup_text", "is a folder"),
             (["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"), "--version", "x"], "--version",
              "invalid int value")]
    for argv, flag, problem in cases:
        try:
            code = export.main(argv)
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err.strip()
        assert code == 2 and flag in err and problem in err and len(err.splitlines()) == 1, (argv, err)
    assert not (tmp_path / "e").exists() and not (tmp_path / "up").exists()


def test_bad_input_is_refused_with_a_clear_message(runs, tmp_path, capsys):
    model_dir, _ = runs["gpt"]
    assert export.main(["--model_dir", str(tmp_path / "nothing"), "--export_dir", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert "--model_dir" in err and "no such folder" in err
    (tmp_path / "empty").mkdir()
    assert export.main(["--model_dir", str(tmp_path / "empty"), "--export_dir", str(tmp_path / "e")]) == 2
    assert "config.json" in capsys.readouterr().err
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"),
                        "--warmup_text", str(tmp_path / "missing.txt")]) == 2
    assert "--warmup_text file not found" in capsys.readouterr().err
    wrong = tmp_path / "wrong_vocab"
    os.makedirs(wrong)
    for name in os.listdir(model_dir):
        if os.path.isfile(os.path.join(model_dir, name)):
            data = open(os.path.join(model_dir, name), "rb").read()
            (wrong / name).write_bytes(data + b"extra\n" if name == "vocab.txt" else data)
    assert export.main(["--model_dir", str(wrong), "--export_dir", str(tmp_path / "e")]) == 2
    assert "not the vocabulary the model was trained with" in capsys.readouterr().err
    assert not (tmp_path / "e" / "serving").exists()


def test_an_earlier_checkpoint_exports_with_its_own_weights_and_step(runs, tmp_path, capsys):
    """`--checkpoint ckpt-N` exports that checkpoint (the moonshot scores every kept one); a name model_dir does not
    keep is refused, naming the ones it does."""
    model_dir = str(tmp_path / "gpt")
    shutil.copytree(runs["gpt"][0], model_dir)
    pattern = families.read_config(model_dir)["data"]["train_data"]
    assert train.main(["--train_data", pattern, "--model_dir", model_dir, "--set", "train_steps=3"]) == 0
    _, earlier, _ = families.load_model(model_dir, "ckpt-2")
    _, latest, _ = families.load_model(model_dir)
    assert any(not np.array_equal(a, b) for a, b in zip(earlier.get_weights(), latest.get_weights()))
    capsys.readouterr()
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"), "--checkpoint", "ckpt-9"]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint ckpt-9" in err and "ckpt-2" in err and "ckpt-3" in err
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "e"), "--checkpoint", "ckpt-2"]) == 0
    card = open(tmp_path / "e" / "hub" / "module" / "README.md").read()
    assert "Pretrained for 2 steps" in card
    exported = [v.numpy() for v in tf.saved_model.load(str(tmp_path / "e" / "hub" / "module")).variables]
    i = next(i for i, (a, b) in enumerate(zip(earlier.get_weights(), latest.get_weights()))
             if a.size > 1000 and not np.array_equal(a, b))
    assert any(np.array_equal(v, earlier.get_weights()[i]) for v in exported)
    assert not any(np.array_equal(v, latest.get_weights()[i]) for v in exported)


def test_the_local_server_answers_with_the_exports(runs):
    """The exports served as TF Serving would serve them: row and columnar requests, GPT's generation."""
    from serving.client import RestClient, ServerError
    from serving.server.http import ModelServer, ServerOptions

    entries = [e for _, export_dir in runs.values()
               for e in read_model_config_list(os.path.join(export_dir, "serving", export.MODEL_CONFIG_FILE))]
    with ModelServer(entries, ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=60)) as server:
        client = RestClient(server.url)
        assert client.status("bert")["model_version_status"][0]["state"] == "AVAILABLE"
        rows = client.predict("bert", instances=TEXTS[:2])["predictions"]
        local = tf.saved_model.load(os.path.join(runs["bert"][1], "serving", "bert", "1"))
        want = local.signatures["serving_default"](text=tf.constant(TEXTS[:2]))["pooled_output"].numpy()
        np.testing.assert_allclose([r["pooled_output"] for r in rows], want, atol=ATOL)
        pair = client.predict("bert", inputs={"text_a": TEXTS[:1], "text_b": TEXTS[1:2]}, signature_name="pair")
        assert np.array(pair["outputs"]["input_mask"]).shape[0] == 1
        generated = client.predict("gpt", signature_name="generate", inputs={
            "prompt": TEXTS, "max_new_tokens": 3, "top_k": 1, "temperature": 1.0, "seed": 0})["outputs"]
        assert len(generated["text"]) == len(TEXTS) and all(0 <= n <= 3 for n in generated["num_tokens"])
        bad = {"max_new_tokens": -5, "top_k": -1, "temperature": -0.5}
        for name, value in bad.items():
            request = {"prompt": TEXTS[:1], "max_new_tokens": 3, "top_k": 1, "temperature": 1.0, "seed": 0,
                       name: value}
            with pytest.raises(ServerError) as error:  # refused by the server before the model runs
                client.predict("gpt", signature_name="generate", inputs=request)
            assert error.value.status == 400 and f"{name} {value} is out of range" in error.value.message
            graph = tf.saved_model.load(os.path.join(runs["gpt"][1], "serving", "gpt", "1")).signatures["generate"]
            arguments = {k: tf.constant(v, dtype) for (k, v), dtype in zip(request.items(), (
                tf.string, tf.int32, tf.int32, tf.float32, tf.int64))}
            with pytest.raises(tf.errors.InvalidArgumentError, match=f"{name} must be"):  # and by the graph
                graph(**arguments)
        empty = client.predict("gpt", instances=[""])["predictions"]  # a batch of empty texts is no error
        vocab_size = len(Vocabulary.from_file(os.path.join(runs["gpt"][0], "vocab.txt")))
        assert len(empty) == 1 and len(empty[0]["next_token_logits"]) == vocab_size
        elmo = client.predict("bilm", instances=TEXTS)["predictions"]
        assert [len(r["default"]) for r in elmo] == [256] * len(TEXTS)
        assert [r["sequence_len"] for r in elmo] == [len(t.split()) for t in TEXTS]


def test_the_bert_preprocessor_packs_like_tf_hubs(runs):
    model_dir, export_dir = runs["bert"]
    preprocessor = tf.saved_model.load(os.path.join(export_dir, "hub", "preprocessor"))
    encoder = tf.saved_model.load(os.path.join(export_dir, "hub", "encoder"))
    a = preprocessor.tokenize(tf.constant(["the bank raised its interest rates", "a"]))  # [B, (words), (pieces)]
    b = preprocessor.tokenize(tf.constant(["the river", "play"]))
    assert a.shape.rank == 3 and a.dtype == tf.int32
    packed = preprocessor.bert_pack_inputs([a, b], seq_length=8)
    cls, sep = 2, 3
    first = packed["input_word_ids"][0].numpy().tolist()
    a0, b0 = a[0].merge_dims(0, 1).numpy().tolist(), b[0].merge_dims(0, 1).numpy().tolist()
    assert first == [cls, *a0[:3], sep, *b0[:2], sep]  # round robin: 5 pieces shared 3 + 2
    assert packed["input_type_ids"][0].numpy().tolist() == [0] * 5 + [1] * 3
    assert packed["input_mask"][1].numpy().tolist() == [1] * 5 + [0] * 3
    one = preprocessor.bert_pack_inputs([a.merge_dims(1, 2)], seq_length=tf.constant(6))
    assert one["input_word_ids"].shape == (2, 6)
    default = preprocessor(tf.constant(["x"]))
    assert default["input_word_ids"].shape == (1, families.read_config(model_dir)["data"]["max_seq_length"])
    inputs = {**dict(packed), "masked_lm_positions": tf.constant([[1, 2], [1, 2]], tf.int32)}
    mlm = encoder.mlm(inputs)
    assert mlm["mlm_logits"].shape == (2, 2, len(open(os.path.join(export_dir, "hub", "encoder", "assets",
                                                                    "vocab.txt")).read().split()))
    np.testing.assert_allclose(mlm["pooled_output"], encoder(dict(packed))["pooled_output"], atol=ATOL)


@pytest.mark.slow
@pytest.mark.shared_data("corpus/heldout.txt.gz")
def test_served_tokenization_equals_the_beam_jobs_on_real_text(tmp_path, bert_vocab_path):
    """A GPT export over the real BERT vocabulary tokenizes a real document exactly as the Beam job did
    when it made the training windows."""
    from pipeline import pretraining_data
    from tests.conftest import HELDOUT, read_corpus_lines

    lines = read_corpus_lines(HELDOUT)[:400]
    corpus = tmp_path / "doc.txt"
    corpus.write_text("\n".join(lines) + "\n")  # one document
    seq = 64
    assert pretraining_data.main(["--input", str(corpus), "--vocab", bert_vocab_path, "--output_dir",
                                  str(tmp_path / "gpt"), "--model", "gpt", "--max_seq_length", str(seq),
                                  "--runner", "FnApiRunner"]) == 0
    files = sorted(str(p) for p in (tmp_path / "gpt").glob("gpt-*.tfrecord"))
    spec = {"input_ids": tf.io.FixedLenFeature([seq + 1], tf.int64)}
    beam = {tuple(tf.io.parse_single_example(r, spec)["input_ids"].numpy()) for r in tf.data.TFRecordDataset(files)}

    vocab = Vocabulary.from_file(bert_vocab_path)
    pattern = write_dataset(str(tmp_path / "data"), "gpt", vocab=vocab, seq=seq, examples=16)
    model_dir = str(tmp_path / "run")
    assert train.main(["--model", "gpt", "--preset", "gpt_tiny", "--train_data", pattern, "--model_dir", model_dir,
                       "--set", "train_steps=1", "--set", "batch_size=8", "--set", "jit_compile=false"]) == 0
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "export")]) == 0
    module = tf.saved_model.load(str(tmp_path / "export" / "hub" / "module"))
    served = module.tokenize(tf.constant(lines)).flat_values.numpy().tolist() + [vocab.id_of("[SEP]")]
    windows = {tuple(served[i:i + seq + 1]) for i in range(0, len(served) - seq, seq)}
    assert len(beam) == len(windows) > 50
    assert beam == windows
