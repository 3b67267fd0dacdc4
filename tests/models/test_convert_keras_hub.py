"""`models.convert --to keras_hub` / `--from keras_hub`: keras-hub presets both ways, checked with keras-hub's own
`from_preset` and our TF-Hub export.

The session's trained bert_tiny is written as a preset; keras-hub's `BertBackbone.from_preset` gives our
exported encoder's outputs, `BertTextClassifier.from_preset` loads it, tokenizes as our preprocessor does and
fine-tunes for a step. `BertMaskedLM` is refused (its head is another computation: measured here). A preset
read back is a model_dir that `--init_checkpoint` continues. Nothing is downloaded.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from models import bert, families
from models.convert import cli as convert
from models.convert.common import read_weights
from models.training import train
from tests.fixtures.tiny_models import VOCAB_TEXTS
from tests.fixtures.training import tiny_vocabulary, write_dataset
from tests.models.test_convert import one_error_line, random_model_dir

ACCENTED = ["Naïve café owners", "THE RIVER BANK"]  # accents stripped and lower-cased, as our uncased tokenizer


@pytest.fixture(scope="module")
def preset(tiny_models, tmp_path_factory):
    """The trained bert_tiny as a keras-hub preset folder (reading the shared model_dir only)."""
    out = str(tmp_path_factory.mktemp("keras_hub") / "bert_tiny")
    assert convert.main(["--to", "keras_hub", "--model_dir", tiny_models["bert"].model_dir, "--output", out]) == 0
    return out


def test_keras_hub_loads_our_bert_with_from_preset_and_computes_our_outputs(tiny_models, preset):
    import keras_hub

    assert sorted(os.listdir(preset)) == ["assets", "config.json", "metadata.json", "model.weights.h5",
                                          "preprocessor.json", "tokenizer.json"]
    with open(os.path.join(preset, "metadata.json")) as f:
        metadata = json.load(f)
    assert metadata["keras_hub_version"] == keras_hub.__version__ and "TextClassifier" in metadata["tasks"]

    export = os.path.join(tiny_models["bert"].export_dir, "hub")
    preprocessor = tf.saved_model.load(os.path.join(export, "preprocessor"))
    encoder = tf.saved_model.load(os.path.join(export, "encoder"))
    texts = list(VOCAB_TEXTS) + ACCENTED
    packed = preprocessor(tf.constant(texts))
    ours = encoder(packed)
    backbone = keras_hub.models.BertBackbone.from_preset(preset)
    theirs = backbone({"token_ids": packed["input_word_ids"], "padding_mask": packed["input_mask"],
                       "segment_ids": packed["input_type_ids"]})
    real = packed["input_mask"].numpy().astype(bool)
    seq = np.abs(np.asarray(theirs["sequence_output"]) - ours["sequence_output"].numpy())[real].max()
    pooled = np.abs(np.asarray(theirs["pooled_output"]) - ours["pooled_output"].numpy()).max()
    print(f"keras-hub BertBackbone.from_preset vs our export, {len(texts)} sentences: sequence {seq:.1e}, "
          f"pooled {pooled:.1e}")
    assert seq <= 1e-4 and pooled <= 1e-4

    classifier = keras_hub.models.BertTextClassifier.from_preset(preset, num_classes=2)
    token_ids = classifier.preprocessor(tf.constant(texts))["token_ids"]  # keras-hub's own tokenizer
    np.testing.assert_array_equal(np.asarray(token_ids), packed["input_word_ids"].numpy())
    for path, value in read_weights(backbone).items():
        np.testing.assert_array_equal(read_weights(classifier.backbone)[path], value, err_msg=path)
    classifier.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = classifier.fit(x=tf.constant(texts[:8]), y=np.array([0, 1] * 4), batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])  # fine-tunes as a keras-hub user would


def test_bert_masked_lm_is_refused_because_its_head_computes_something_else(tmp_path, capsys):
    """keras-hub's BertMaskedLM head: exact GELU and epsilon 1e-5 beside a tanh-GELU backbone. With our tied
    head's weights in it, its logits differ from ours by more than the 1e-4 an export must keep (8.4e-4 on
    these random weights): not written, and the command says why."""
    import keras_hub

    source = random_model_dir(tmp_path / "md", "bert", num_layers=1, hidden_size=8, num_heads=2, intermediate_size=16)
    out = str(tmp_path / "preset")
    assert convert.main(["--to", "keras_hub", "--model_dir", source, "--output", out]) == 0
    assert "not written: mlm (keras-hub's BertMaskedLM head" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(out, "task.json"))
    model = families.load_model(source)[1]
    masked_lm = keras_hub.models.BertMaskedLM(keras_hub.models.BertBackbone.from_preset(out))
    ours = read_weights(model)
    for v in masked_lm.get_layer("mlm_head").weights:
        v.assign(ours[v.path])
    ids = np.array([[2, 7, 4, 9, 3]], np.int32)
    positions = np.array([[1, 2, 3]], np.int32)
    theirs = masked_lm({"token_ids": ids, "padding_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
                        "mask_positions": positions})
    mine = model({"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids),
                  "masked_lm_positions": positions}, training=False)["mlm"]
    difference = np.abs(np.asarray(theirs) - mine.numpy()).max()
    print(f"keras-hub BertMaskedLM with our head's weights: max |theirs - ours| = {difference:.1e}")
    assert difference > 1e-4


@pytest.mark.slow
def test_a_keras_hub_preset_imports_and_continues_pretraining(tmp_path, capsys):
    source = random_model_dir(tmp_path / "md", "bert", seed=2, num_layers=2, hidden_size=8, num_heads=2,
                              intermediate_size=16, max_position_embeddings=32)
    assert convert.main(["--to", "keras_hub", "--model_dir", source, "--output", str(tmp_path / "preset")]) == 0
    imported = str(tmp_path / "imported")
    assert convert.main(["--from", "keras_hub", "--checkpoint", str(tmp_path / "preset"),
                         "--model_dir", imported]) == 0
    assert "freshly initialised: mlm, nsp" in capsys.readouterr().err
    saved = families.read_config(imported)
    assert saved["model_config"] == families.read_config(source)["model_config"]
    assert saved["data"]["max_seq_length"] == 16 and saved["data"]["lower_case"] is True  # from the preset
    before, after = (read_weights(bert.encoder_of(families.load_model(d)[1])) for d in (source, imported))
    for path in before:
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)

    pattern = write_dataset(str(tmp_path / "data"), "bert", vocab=tiny_vocabulary(40))
    continued = str(tmp_path / "continued")
    assert train.main(["--init_checkpoint", imported, "--train_data", pattern, "--model_dir", continued,
                       "--set", "train_steps=1", "--set", "batch_size=8", "--set", "jit_compile=false",
                       "--set", "steps_per_execution=1"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 1


def test_keras_hub_import_refuses_what_is_not_a_bert_backbone_preset(tmp_path, capsys):
    from tests.models.test_convert import TINY, hf_bert_tensors, write_hf

    hf = write_hf(tmp_path / "hf", hf_bert_tensors(TINY), TINY, tiny_vocabulary(40))
    assert convert.main(["--from", "keras_hub", "--checkpoint", hf, "--model_dir", str(tmp_path / "a")]) == 2
    assert "HuggingFace folder, not a keras-hub preset: use --from hf_bert" in one_error_line(capsys)
    other = tmp_path / "gpt2"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"class_name": "GPT2Backbone", "config": {},
                                                   "registered_name": "keras_hub>GPT2Backbone"}))
    assert convert.main(["--from", "keras_hub", "--checkpoint", str(other), "--model_dir", str(tmp_path / "b")]) == 2
    assert "holds a GPT2Backbone preset; --from keras_hub reads BertBackbone only" in one_error_line(capsys)

    source = random_model_dir(tmp_path / "md", "bert", num_layers=1, hidden_size=8, num_heads=2, intermediate_size=16)
    cut = str(tmp_path / "cut")
    assert convert.main(["--to", "keras_hub", "--model_dir", source, "--output", cut]) == 0
    weights = os.path.join(cut, "model.weights.h5")
    raw = open(weights, "rb").read()
    with open(weights, "wb") as f:
        f.write(raw[:len(raw) // 2])
    capsys.readouterr()
    assert convert.main(["--from", "keras_hub", "--checkpoint", cut, "--model_dir", str(tmp_path / "c")]) == 2
    assert f"cannot read the checkpoint file {weights}" in one_error_line(capsys)
    for name in "abc":
        assert not os.path.exists(tmp_path / name)
