"""`models.convert --to hf_bert` through HuggingFace's own code: `BertForPreTraining` gives our MLM and NSP
logits, and `pipeline("fill-mask")` our export's top-5, on real sentences.

Shapes: the session's trained bert_tiny (untied MLM output, as the demo's), and random-weight model_dirs for
the others (tied as bert_base is, each HuggingFace activation). Pre-LN BERT has no HuggingFace form: its
refusal is in `test_convert_formats.py`. Nothing is downloaded: every HuggingFace object is built from the
folder `--to hf_bert` wrote.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from models import bert, families
from models.convert import cli as convert
from models.convert.common import read_weights
from serving.export.cli import SAMPLE_TEXTS
from tests.fixtures.tiny_models import VOCAB_TEXTS
from tests.models.test_convert import random_model_dir

# real sentences the shared vocabulary covers, and the word of each that fill-mask hides
MASKED = [("the river bank flooded after three days of rain", "bank"),
          ("she went to the bank", "went"),
          ("they sat on the river bank", "river"),
          ("the bank raised its interest rates", "interest"),
          ("children play football", "play"),
          ("He cashed a check at the bank on Main St.", "check")]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a local folder or nothing


def _torch_inputs(batch: dict):
    import torch

    return {k: torch.tensor(np.asarray(v), dtype=torch.long) for k, v in batch.items()}


def _ours(model, batch: dict) -> dict:
    """Our pretrainer's MLM logits at every position [B, T, V] and NSP logits [B, 2]."""
    ids = np.asarray(batch["input_ids"], np.int32)
    positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), (ids.shape[0], 1))
    out = model({"input_word_ids": ids, "input_mask": np.asarray(batch["attention_mask"], np.int32),
                 "input_type_ids": np.asarray(batch["token_type_ids"], np.int32), "masked_lm_positions": positions},
                training=False)
    return {"mlm": out["mlm"].numpy(), "nsp": out["nsp"].numpy()}


def _compare_with_hf(model_dir: str, hf_dir: str, texts: list, pairs: list) -> float:
    """HuggingFace's BertForPreTraining on the folder against our model, on `texts` and sentence `pairs`:
    returns the largest difference of MLM (real positions) and NSP logits."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    hf, info = transformers.BertForPreTraining.from_pretrained(hf_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    model = families.load_model(model_dir)[1]
    worst = 0.0
    for batch in (tokenizer(texts, padding=True, return_tensors="np"),
                  tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="np")):
        with torch.no_grad():
            theirs = hf.eval()(**_torch_inputs(batch))
        ours = _ours(model, batch)
        real = batch["attention_mask"].astype(bool)
        worst = max(worst, float(np.abs(theirs.prediction_logits.numpy()[real] - ours["mlm"][real]).max()),
                    float(np.abs(theirs.seq_relationship_logits.numpy() - ours["nsp"]).max()))
    return worst


def test_the_trained_untied_bert_predicts_in_huggingface_what_it_predicts_here(tiny_models, tmp_path):
    import transformers

    source = tiny_models["bert"].model_dir
    assert families.read_config(source)["model_config"].tie_output is False  # the demo's kind of BERT
    out = str(tmp_path / "hf")
    assert convert.main(["--to", "hf_bert", "--model_dir", source, "--output", out]) == 0
    pairs = [("the river bank flooded", "a picnic on the river bank"), ("interest rates rose", "a deep voice")]
    worst = _compare_with_hf(source, out, list(VOCAB_TEXTS), pairs)
    print(f"bert_tiny (untied), {len(VOCAB_TEXTS)} sentences + {len(pairs)} pairs: max |HF - ours| = {worst:.2e}")
    assert worst <= 1e-4

    # fill-mask, as a HuggingFace user runs it, against our export's `mlm`, as a TF-Hub user runs it
    fill = transformers.pipeline("fill-mask", model=out, top_k=5)
    tokenizer = fill.tokenizer
    preprocessor = tf.saved_model.load(os.path.join(tiny_models["bert"].export_dir, "hub", "preprocessor"))
    encoder = tf.saved_model.load(os.path.join(tiny_models["bert"].export_dir, "hub", "encoder"))
    mask_id = int(preprocessor.tokenize.get_special_tokens_dict()["mask_id"])
    for text, word in MASKED:
        hidden = text.replace(f" {word} ", " [MASK] ", 1) if f" {word} " in text else text.replace(word, "[MASK]", 1)
        theirs = [r["token"] for r in fill(hidden)]
        packed = {k: v.numpy() for k, v in preprocessor(tf.constant([text])).items()}
        real = packed["input_mask"][0].astype(bool)
        assert packed["input_word_ids"][0][real].tolist() == tokenizer(text)["input_ids"]  # same tokenization
        position = tokenizer(hidden)["input_ids"].index(tokenizer.mask_token_id)
        assert packed["input_word_ids"][0][position] == tokenizer.convert_tokens_to_ids(word)  # one piece
        packed["input_word_ids"][0][position] = mask_id
        logits = encoder.mlm({**{k: tf.constant(v, tf.int32) for k, v in packed.items()},
                              "masked_lm_positions": tf.constant([[position]], tf.int32)})["mlm_logits"]
        ours = np.argsort(-logits.numpy()[0, 0], kind="stable")[:5].tolist()
        assert theirs == ours, (text, tokenizer.convert_ids_to_tokens(theirs), tokenizer.convert_ids_to_tokens(ours))


@pytest.mark.parametrize("hidden_act", ["gelu_approximate", "gelu", "relu"])
def test_a_tied_bert_round_trips_through_huggingface(hidden_act, tmp_path):
    """bert_base's kind (tied output, the tanh GELU), at a tiny size, and HuggingFace's other activations."""
    from tests.fixtures.training import text_vocabulary

    vocab = text_vocabulary(list(SAMPLE_TEXTS) + list(VOCAB_TEXTS))
    assert set(bert.PRESETS["bert_base"]) == {"num_layers", "hidden_size", "num_heads", "intermediate_size"}
    source = random_model_dir(tmp_path / "md", "bert", seed=5, vocab=vocab, num_layers=2, hidden_size=16,
                              num_heads=4, intermediate_size=64, max_position_embeddings=64, hidden_act=hidden_act)
    assert families.read_config(source)["model_config"].tie_output is True
    out = str(tmp_path / "hf")
    assert convert.main(["--to", "hf_bert", "--model_dir", source, "--output", out]) == 0
    worst = _compare_with_hf(source, out, list(SAMPLE_TEXTS), [(SAMPLE_TEXTS[0], SAMPLE_TEXTS[1])])
    assert worst <= 1e-4, worst
    back = str(tmp_path / "back")  # and back: every weight bit for bit, the same config
    assert convert.main(["--from", "hf_bert", "--checkpoint", out, "--model_dir", back]) == 0
    before, after = (read_weights(families.load_model(d)[1]) for d in (source, back))
    assert sorted(before) == sorted(after)
    for path in before:
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)
    assert families.read_config(back)["model_config"] == families.read_config(source)["model_config"]
