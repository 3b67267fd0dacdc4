"""Each downstream contract has one owner; these tests fail if a second copy drifts from it.

- training-time inputs (`downstream/finetune/inputs.py`, eager, chunked) equal the fine-tuned serving graph's
  inputs (`downstream/finetune/export.py`, traced) for pairs and BERT tagging, and SQuAD windows equal the
  served preprocessor's `bert_pack_inputs` of the same pieces, on real sentences;
- one loader (`downstream.module.ExportedModule`) for features and fine-tuning, family from the export;
- one ELMo layer list and one scalar-mix formula for the Keras 3 and tf_keras mixes;
- splits by the house's stable hash.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from demo import shared_data
from downstream.finetune import export as finetune_export
from downstream.finetune import inputs as inputs_lib
from downstream.finetune import squad
from downstream.finetune import task_data
from downstream.finetune import tasks
from downstream.module import ExportedModule, ModuleError
from preprocessing.stable_random import stable_fraction

REAL = [  # real sentences (SST-2 / UD English-EWT style), with punctuation, case, clitics and long words
    ("it 's a charming and often affecting journey .", "The Fed raised interest rates again, didn't it?"),
    ("unflinchingly bleak and desperate", "Al-Zaman : American forces killed Shaikh Abdullah al-Ani, the preacher."),
    ("the river bank flooded after three days of rain", "He cashed a check at the bank on Main St."),
]
TASKS = shared_data.path("tasks")


@pytest.fixture(scope="module")
def modules(tiny_models):
    """The session's tiny models (tests/fixtures/tiny_models.py; their vocabulary covers `REAL`)."""
    return {kind: ExportedModule.load(m.export_dir) for kind, m in tiny_models.items()}


class _Config:
    def __init__(self, max_seq_length, gpt_pair="entail"):
        self.max_seq_length, self.gpt_pair = max_seq_length, gpt_pair


def _served_inputs(module, task, config, *args):
    """The serving graph's inputs for `args`: its own input builder, traced as in the export."""
    root = finetune_export.TextTaskModel(tasks.get(task), module, None, ["a", "b"], config)
    if task == "tag":
        fn = tf.function(lambda w, n: inputs_lib.bert_first_pieces(module, tf.RaggedTensor.from_tensor(w, lengths=n),
                                                                   config.max_seq_length, width=tf.shape(w)[1]))
        return fn(*args)
    return tf.function(lambda a, b: root.inputs(root.pair(a, b)))(*args)


@pytest.mark.parametrize("kind,gpt_pair", [("bert", "entail"), ("gpt", "entail"), ("gpt", "similarity"),
                                           ("bilm", "entail")])
def test_pair_inputs_for_training_equal_the_served_graphs(modules, kind, gpt_pair):
    module = modules[kind]
    sequences = tasks.get("pair").sequences(module.kind, REAL, gpt_pair)
    trained = inputs_lib.text_inputs(module, sequences, 12)  # 12: some pairs are trimmed
    served = _served_inputs(module, "pair", _Config(12, gpt_pair), tf.constant([a for a, _ in REAL]),
                            tf.constant([b for _, b in REAL]))
    assert sorted(trained) == sorted(served)
    for name, value in trained.items():
        got = served[name].numpy()
        if name == "text":
            got = np.char.decode(got.astype(bytes), "utf-8")
        assert value.shape == got.shape and (value == got).all(), name
    if kind == "bilm":  # the served rule: each sentence as given, not cut to max_seq_length words
        assert trained["text"][1, 1] == REAL[1][1]


def test_bert_tagging_inputs_for_training_equal_the_served_graphs(modules):
    module = modules["bert"]
    sentences = [tuple(b.split()) for _, b in REAL] + [("grassy", "riverbank", "!")]
    for seq in (8, 12, 32):
        x, positions = inputs_lib.bert_tag_inputs(module, sentences, seq)
        width = max(map(len, sentences))
        words = tf.constant([list(s) + [""] * (width - len(s)) for s in sentences])
        packed, first, keep = _served_inputs(module, "tag", _Config(seq), words,
                                             tf.constant([len(s) for s in sentences], tf.int32))
        for name in x:
            assert (x[name] == packed[name].numpy()).all(), (seq, name)
        served_positions = tf.where(keep, first, -1).numpy()
        assert positions == [served_positions[n, :len(s)].tolist() for n, s in enumerate(sentences)]
    assert any(p < 0 for row in positions for p in row) is False  # at 32 every word fits
    _, cut = inputs_lib.bert_tag_inputs(module, sentences, 8)
    assert all(row[-1] == -1 for row in cut[:2])  # the long sentences lose their last words


def test_word_grouping_is_the_modules_and_an_emptied_word_is_unk(modules):
    module = modules["bert"]
    [[the, river, mark]] = module.word_pieces([("The", "river", "\u0301")])
    assert the == module.pieces(["The"])[0] and river == module.pieces(["river"])[0]
    assert mark == [module.token_id("[UNK]")]
    assert module.word_pieces([("\u0301",)], unk_for_empty=False) == [[[]]]


def _squad_examples(count=6):
    return task_data.read_squad(os.path.join(TASKS, "squad", "train.json"))[:count]


@pytest.mark.slow
@pytest.mark.shared_data("tasks/squad/train.json")
def test_squad_windows_equal_the_served_packing_of_the_served_pieces(modules):
    module = modules["bert"]
    examples = _squad_examples()
    unit_texts = [[e.context[a:b] for a, b in squad.split_units(e.context)] for e in examples]
    unit_pieces = module.word_pieces(unit_texts, unk_for_empty=False)
    served_context = module.pieces([e.context for e in examples])
    assert [[p for unit in units for p in unit] for units in unit_pieces] == served_context
    questions = module.pieces([e.question for e in examples])
    seq, stride, query = 32, 8, 8
    windows = squad.make_features(examples, unit_pieces, questions, module.token_id("[CLS]"),
                                  module.token_id("[SEP]"), seq, stride, query, training=True)
    assert len(windows) > len(examples)
    for window in windows:
        q = questions[window.example_index][:query]
        context = [window.input_word_ids[p] for p in sorted(window.token_to_unit)]
        packed = module.preprocessor.bert_pack_inputs(
            [tf.ragged.constant([q], tf.int32), tf.ragged.constant([context], tf.int32)], seq_length=tf.constant(seq))
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            assert packed[name].numpy()[0].tolist() == getattr(window, name), name


@pytest.mark.slow
@pytest.mark.shared_data("tasks/sst2/dev.tsv", "tasks/ud_pos/dev.conll")
def test_pairs_and_tagging_on_shared_task_data(modules):
    sst = os.path.join(TASKS, "sst2", "dev.tsv")
    pos = os.path.join(TASKS, "ud_pos", "dev.conll")
    texts = [e.texts[0] for e in task_data.read_classification(sst, 1)[:16]]
    pairs = list(zip(texts[::2], texts[1::2]))
    module = modules["bert"]
    trained = inputs_lib.text_inputs(module, tasks.get("pair").sequences(module.kind, pairs, "entail"), 24)
    served = _served_inputs(module, "pair", _Config(24), tf.constant([a for a, _ in pairs]),
                            tf.constant([b for _, b in pairs]))
    assert all((trained[k] == served[k].numpy()).all() for k in trained)
    sentences = [s.words for s in task_data.read_conll(pos)[:16]]
    x, positions = inputs_lib.bert_tag_inputs(module, sentences, 24)
    width = max(map(len, sentences))
    packed, first, keep = _served_inputs(module, "tag", _Config(24),
                                         tf.constant([list(s) + [""] * (width - len(s)) for s in sentences]),
                                         tf.constant([len(s) for s in sentences], tf.int32))
    assert all((x[k] == packed[k].numpy()).all() for k in x)
    served_positions = tf.where(keep, first, -1).numpy()
    assert positions == [served_positions[n, :len(s)].tolist() for n, s in enumerate(sentences)]


def test_one_loader_tells_the_family_from_the_export_not_the_folder(modules, tmp_path):
    import shutil

    from downstream.features import ModuleEncoder

    for kind, module in modules.items():
        encoder = ModuleEncoder(os.path.dirname(os.path.dirname(module.path)))
        assert encoder.kind == kind == module.kind and encoder.layer_names == module.layer_names
    renamed = tmp_path / "renamed" / "module"  # a BERT encoder in a folder named like GPT's and the biLM's
    shutil.copytree(modules["bert"].path, renamed)
    with pytest.raises(ModuleError, match="no preprocessor"):
        ExportedModule.load(str(renamed))  # told by `mlm`, not by the name: so it wants its preprocessor
    with pytest.raises(ModuleError, match="no exported module"):
        ExportedModule.load(str(tmp_path))
    assert modules["bilm"].layer_names == ["word_emb", "lstm_outputs1", "lstm_outputs2"]


def test_elmo_layer_list_and_mix_formula_have_one_owner(modules):
    import keras

    from downstream.finetune.layers import ElmoLayers, TfKerasScalarMix
    from models.scalar_mix import ScalarMix, elmo_layers

    out = modules["bilm"].bilm_outputs([["the", "river", "bank"], ["a"]])
    layers = elmo_layers(out)
    assert [int(x.shape[-1]) for x in layers] == [int(out["lstm_outputs1"].shape[-1])] * 3
    np.testing.assert_array_equal(np.asarray(layers[0]), np.concatenate([out["word_emb"]] * 2, -1))
    mix = ScalarMix(3)
    mix(layers)
    module_mix = [v for v in modules["bilm"].module.variables if "scalar" in v.name or "gamma" in v.name]
    assert len(module_mix) == 2
    for v in mix.weights:  # the export's own mix weights, into a fresh Keras 3 mix
        v.assign(next(m for m in module_mix if ("gamma" in m.name) == ("gamma" in v.path)).numpy())
    mask = tf.sequence_mask(out["sequence_len"], tf.shape(out["elmo"])[1], tf.float32)[..., None]
    np.testing.assert_allclose(np.asarray(mix(layers)) * mask, out["elmo"].numpy(), atol=1e-5)
    tf_keras_mix = TfKerasScalarMix()
    tf_keras_mix(ElmoLayers()(out))
    tf_keras_mix.scalars.assign(keras.ops.convert_to_numpy(mix.scalar_weights))
    tf_keras_mix.gamma.assign(float(keras.ops.convert_to_numpy(mix.gamma)))
    np.testing.assert_allclose(tf_keras_mix(ElmoLayers()(out)).numpy(), np.asarray(mix(layers)), atol=1e-6)


def test_splits_use_the_houses_stable_hash():
    items = [f"sentence {i}" for i in range(300)]
    train, heldout = task_data.split_items(items, 0.25, seed=3)
    assert heldout == [x for i, x in enumerate(items) if stable_fraction(3, str(i)) < 0.25]
    assert 50 < len(heldout) < 100 and len(train) + len(heldout) == 300
    from downstream import evaluate_senses as ev

    tune, _ = ev.wic_split([{"lemma": f"w{i}"} for i in range(50)])
    assert tune.tolist() == [stable_fraction("wic", f"w{i}") < 0.5 for i in range(50)]
    assert json.dumps(stable_fraction(0, "x")) == json.dumps(stable_fraction(0, "x"))
