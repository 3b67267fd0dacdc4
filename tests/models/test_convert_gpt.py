"""`models.convert --to hf_gpt` / `--from hf_gpt`: GPT to and from HuggingFace's `openai-gpt`, checked with
`OpenAIGPTLMHeadModel` itself (logits, greedy generation) and its `AutoTokenizer`.

Shapes: GPT-1's (gpt_gpt1 / gpt_base: post-LN, tied, no output bias) at a tiny size with random weights, an
untied output without a bias, and ReLU; the demo's gpt_tiny (an output bias) is refused naming the field.
Nothing is downloaded.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from models import families, gpt
from models.convert import cli as convert
from models.convert.common import read_weights
from serving.export.cli import SAMPLE_TEXTS
from tests.fixtures.tiny_models import VOCAB_TEXTS
from tests.fixtures.training import text_vocabulary, tiny_vocabulary
from tests.models.test_convert import one_error_line, random_model_dir

SIZE = {"num_layers": 2, "hidden_size": 16, "num_heads": 4, "intermediate_size": 64, "max_position_embeddings": 48}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.mark.slow
@pytest.mark.parametrize("fields", [{}, {"tie_output": False}, {"hidden_act": "relu"}],
                         ids=["gpt1_tied", "untied_no_bias", "relu"])
def test_openai_gpt_computes_our_logits_and_converts_back(fields, tmp_path):
    import torch
    import transformers

    assert gpt.PRESETS["gpt_gpt1"].get("output_bias", False) is False  # GPT-1's shape: the config's defaults
    vocab = text_vocabulary(list(SAMPLE_TEXTS) + list(VOCAB_TEXTS))
    source = random_model_dir(tmp_path / "md", "gpt", seed=7, vocab=vocab, **SIZE, **fields)
    out = str(tmp_path / "hf")
    assert convert.main(["--to", "hf_gpt", "--model_dir", source, "--output", out]) == 0
    hf, info = transformers.OpenAIGPTLMHeadModel.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert hf.config.tie_word_embeddings is (fields.get("tie_output", True))
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    ids = tokenizer(list(SAMPLE_TEXTS[:2]), add_special_tokens=False)["input_ids"]
    length = min(len(i) for i in ids)
    batch = np.array([i[:length] for i in ids], np.int64)  # [B, T], no padding
    model = families.load_model(source)[1]
    ours = model({"input_word_ids": batch.astype(np.int32)}, training=False)["logits"].numpy()
    with torch.no_grad():
        theirs = hf.eval()(input_ids=torch.tensor(batch)).logits.numpy()
    difference = np.abs(theirs - ours).max()
    print(f"openai-gpt {fields or 'GPT-1 tied'}: max |HF - ours| = {difference:.1e}")
    assert difference <= 1e-4

    prompt = batch[:1, :4]  # greedy decoding through HuggingFace's generate, against argmax here
    with torch.no_grad():
        generated = hf.generate(torch.tensor(prompt), max_new_tokens=4, do_sample=False, pad_token_id=0).numpy()
    mine = prompt.astype(np.int32)
    for _ in range(4):
        logits = model({"input_word_ids": mine}, training=False)["logits"].numpy()
        mine = np.concatenate([mine, logits[:, -1].argmax(-1)[:, None].astype(np.int32)], axis=1)
    np.testing.assert_array_equal(generated, mine)

    back = str(tmp_path / "back")
    assert convert.main(["--from", "hf_gpt", "--checkpoint", out, "--model_dir", back]) == 0
    assert families.read_config(back)["model_config"] == families.read_config(source)["model_config"]
    before, after = (read_weights(families.load_model(d)[1]) for d in (source, back))
    assert sorted(before) == sorted(after)
    for path in before:
        np.testing.assert_array_equal(after[path], before[path], err_msg=path)


def test_the_written_tokenizer_tokenizes_as_our_export(tiny_models, tmp_path):
    """HuggingFace's AutoTokenizer on the folder gives the ids our GPT export's `tokenize` gives (the shared
    vocabulary; the trained gpt_tiny itself cannot go to openai-gpt: its output bias)."""
    import transformers

    vocab_file = os.path.join(tiny_models["gpt"].model_dir, "vocab.txt")
    from preprocessing.vocabulary import Vocabulary

    source = random_model_dir(tmp_path / "md", "gpt", vocab=Vocabulary.from_file(vocab_file), **SIZE)
    assert convert.main(["--to", "hf_gpt", "--model_dir", source, "--output", str(tmp_path / "hf")]) == 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    module = tf.saved_model.load(tiny_models["gpt"].hub_dir)
    texts = list(VOCAB_TEXTS)
    ours = module.tokenize(tf.constant(texts)).to_list()
    assert tokenizer(texts, add_special_tokens=False)["input_ids"] == ours


def test_shapes_openai_gpt_cannot_hold_are_refused_and_bad_sources_named(tmp_path, capsys):
    demo_gpt = random_model_dir(tmp_path / "gpt_tiny", "gpt", **gpt.PRESETS["gpt_tiny"])  # the demo's shape
    out = tmp_path / "out"
    assert convert.main(["--to", "hf_gpt", "--model_dir", demo_gpt, "--output", str(out)]) == 2
    line = one_error_line(capsys)
    assert "output_bias=True" in line and "lm_head has no bias" in line, line
    assert not out.exists()

    source = random_model_dir(tmp_path / "md", "gpt", num_layers=1, hidden_size=8, num_heads=2, intermediate_size=32)
    folder = tmp_path / "hf"
    assert convert.main(["--to", "hf_gpt", "--model_dir", source, "--output", str(folder)]) == 0
    capsys.readouterr()
    # a real openai-gpt folder has a BPE vocabulary: our WordPiece tokenizer cannot use it
    os.remove(folder / "vocab.txt")
    (folder / "vocab.json").write_text("{}")
    (folder / "merges.txt").write_text("#version: 0.2\n")
    assert convert.main(["--from", "hf_gpt", "--checkpoint", str(folder), "--model_dir", str(tmp_path / "a")]) == 2
    line = one_error_line(capsys)
    assert "BPE vocabulary" in line and "--vocab" in line and "40 entries" in line, line
    tiny_vocabulary(40).write(str(tmp_path / "vocab.txt"))
    assert convert.main(["--from", "hf_gpt", "--checkpoint", str(folder), "--vocab", str(tmp_path / "vocab.txt"),
                         "--model_dir", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    (folder / "config.json").write_text((folder / "config.json").read_text().replace('"n_layer": 1', '"n_layer": 2'))
    assert convert.main(["--from", "hf_gpt", "--checkpoint", str(folder), "--vocab", str(tmp_path / "vocab.txt"),
                         "--model_dir", str(tmp_path / "c")]) == 2
    assert "lacks transformer.h.1.attn.c_attn.weight" in one_error_line(capsys)
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()
