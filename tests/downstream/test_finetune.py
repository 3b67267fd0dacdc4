"""Fine-tuning heads on the session's tiny exported modules (tests/fixtures/tiny_models.py): every
head learns tiny learnable data (loss falls, accuracy above the baseline), the inputs are the documented
transformations exactly, the text-in serving model agrees with the trained model, the CLI writes its files;
plus the readers and the entity F1."""

import json

import numpy as np
import pytest
import tensorflow as tf

from downstream.finetune import FinetuneConfig, FinetuneJob, finetune
from downstream.finetune import cli
from downstream.finetune import inputs as inputs_lib
from downstream.finetune import layers
from downstream.finetune import ner_scores
from downstream.finetune import task_data
from downstream.finetune import tasks
from downstream.finetune import training
from downstream.module import ExportedModule

RIVER = ["they sat on the river bank", "the grassy bank of the river", "a picnic on the river bank"]
MONEY = ["the bank raised its interest rates", "interest rates at the bank", "the bank raised rates again"]


@pytest.fixture(scope="module")
def exports(tiny_models):
    """kind -> export_dir of the session's tiny models, and "bert_run": the tiny BERT's model_dir (read-only)."""
    return {**{kind: m.export_dir for kind, m in tiny_models.items()}, "bert_run": tiny_models["bert"].model_dir}


def _config(**fields):
    base = {"epochs": 12, "batch_size": 8, "learning_rate": 3e-3, "max_seq_length": 16, "warmup": 0.0,
            "dropout": 0.0, "seed": 1}
    return FinetuneConfig(**{**base, **fields})


def _run(task, module, train, eval_path, output_dir, config, log=print) -> dict:
    """Fine-tunes through the Python API (`finetune(FinetuneJob(...))`); returns the metrics it wrote."""
    result = finetune(FinetuneJob(task=task, module=module, train=train, eval=eval_path, output_dir=output_dir,
                                  config=config), log=log)
    with open(result.metrics_file) as f:
        assert json.load(f) == result.metrics
    return result.metrics


def _write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    lines = [f"river\t{t}" for t in RIVER * 4] + [f"money\t{t}" for t in MONEY * 4] + ["money\tthe bank"]
    return _write(root / "train.tsv", lines), _write(root / "eval.tsv", lines)


@pytest.mark.parametrize("kind,fields", [("bert", {}), ("gpt", {}), ("bilm", {"train_module": True}),
                                         ("bilm", {"bilm_task_model": "bilstm", "classifier_units": 16, "learning_rate": 1e-2})])
def test_classifiers_learn_and_beat_the_majority_class(exports, sentiment, tmp_path, kind, fields):
    metrics = _run("classify", exports[kind], *sentiment, str(tmp_path), _config(**fields), log=print)
    assert metrics["losses"][-1] < 0.5 * metrics["losses"][0]
    assert metrics["accuracy"] == 1.0 and metrics["baseline"]["accuracy"] == pytest.approx(13 / 25)
    served = tf.saved_model.load(metrics["serving"]).signatures["serving_default"]
    labels = served(text=tf.constant([RIVER[0], MONEY[0]]))["label"].numpy().tolist()
    assert labels == [b"river", b"money"]


def test_gpt_inputs_are_radfords_transformations_and_the_aux_lm_loss_is_added(exports, tmp_path):
    backbone = ExportedModule.load(exports["gpt"])
    start, delim, extract = (backbone.token_id(t) for t in ("[SEP]", "[CLS]", "[MASK]"))
    a, b = backbone.pieces(["the river", "a bank"])
    x = inputs_lib.text_inputs(backbone, tasks.get("pair").sequences("gpt", [("the river", "a bank")], "similarity"),
                               10)
    assert x["input_word_ids"].shape == (1, 2, 10)
    assert x["input_word_ids"][0, 0].tolist() == [start, *a, delim, *b, extract] + [0] * (7 - len(a + b))
    assert x["input_word_ids"][0, 1].tolist()[:len(a + b) + 3] == [start, *b, delim, *a, extract]
    assert x["extract_index"].tolist() == [[len(a + b) + 2] * 2]
    assert x["lm_weights"][0, 0].tolist()[:len(a + b) + 3] == [1.0] * len(a) + [0.0] + [1.0] * len(b) + [0.0, 0.0]
    ids, index, _ = inputs_lib.gpt_sequence([[7] * 9, [8] * 2], 8, 1, 2, 3)  # round-robin trim to 5 pieces
    assert ids.tolist() == [1, 7, 7, 7, 2, 8, 8, 3] and index == 7
    pairs = [f"{int(x == y)}\t{x}\t{y}" for x in RIVER + MONEY for y in RIVER + MONEY]
    path = _write(tmp_path / "pairs.tsv", pairs)
    metrics = _run("pair", exports["gpt"], path, path, str(tmp_path / "out"),
                           _config(epochs=2, gpt_pair="similarity"))
    assert metrics["losses"][-1] < metrics["losses"][0]
    no_lm = _run("pair", exports["gpt"], path, path, str(tmp_path / "out2"),
                         _config(epochs=1, gpt_pair="similarity", lm_coef=0.0))
    # the auxiliary loss (about ln V for a barely trained model, times 0.5) is part of the training loss
    assert metrics["losses"][0] > no_lm["losses"][0] + 0.5


def test_bert_pairs_use_both_segments(exports, tmp_path):
    backbone = ExportedModule.load(exports["bert"])
    x = inputs_lib.text_inputs(backbone, tasks.get("pair").sequences("bert", [("the river", "a bank")], "entail"),
                               12)
    a, b = backbone.pieces(["the river", "a bank"])
    assert x["input_word_ids"][0, 0].tolist()[:len(a + b) + 3] == [2, *a, 3, *b, 3]
    assert x["input_type_ids"][0, 0].tolist()[:len(a + b) + 3] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    lines = [f"{'same' if (x in RIVER) == (y in RIVER) else 'different'}\t{x}\t{y}"
             for x in RIVER + MONEY for y in RIVER + MONEY]
    path = _write(tmp_path / "pairs.tsv", lines)
    # 1e-3: with the one warm-up formula a warm-up of 0 starts at the peak (it used to spend step 0 at rate 0),
    # and 3e-3 from the first step left this small pair model at chance.
    metrics = _run("pair", exports["bert"], path, path, str(tmp_path / "out"),
                           _config(epochs=15, learning_rate=1e-3))
    assert metrics["accuracy"] > metrics["baseline"]["accuracy"] + 0.2


@pytest.mark.parametrize("kind", ["bert", "gpt"])
def test_multiple_choice_scores_each_choice(exports, tmp_path, kind):
    rows = [{"context": c, "choices": ["river", "money"] if i % 2 else ["money", "river"],
             "label": (0 if c in RIVER else 1) if i % 2 else (1 if c in RIVER else 0)}
            for i, c in enumerate((RIVER + MONEY) * 3)]
    path = _write(tmp_path / "choice.jsonl", [json.dumps(r) for r in rows])
    metrics = _run("choice", exports[kind], path, path, str(tmp_path / "out"), _config(epochs=15))
    assert metrics["losses"][-1] < metrics["losses"][0]
    assert metrics["accuracy"] > 0.8 > metrics["baseline"]["accuracy"]


def _tag_file(path):
    # The tag of "bank" depends on its sentence (river or money): a most-frequent-tag baseline cannot get it.
    blocks = []
    for text in (RIVER + MONEY) * 3:
        sense = "B-RIV" if text in RIVER else "B-FIN"
        blocks.append("\n".join(f"{w}\t{sense if w == 'bank' else 'O'}" for w in text.split()))
    return _write(path, ["\n\n".join(blocks)])


def test_bert_tagger_maps_first_pieces_to_words_and_serves_the_same_tags(exports, tmp_path):
    backbone = ExportedModule.load(exports["bert"])
    sentence = ("grass", "bank", "of")
    assert [len(p) for p in backbone.word_pieces([sentence])[0]] == [5, 1, 1]  # g ##r ##a ##s ##s
    x, positions = inputs_lib.bert_tag_inputs(backbone, [sentence], 10)
    assert positions == [[1, 6, 7]] and x["input_word_ids"][0, 8] == backbone.token_id("[SEP]")
    _, cut = inputs_lib.bert_tag_inputs(backbone, [sentence], 8)
    assert cut == [[1, 6, -1]]  # "of" no longer fits before [SEP]
    path = _tag_file(tmp_path / "tags.conll")
    metrics = _run("tag", exports["bert"], path, path, str(tmp_path / "out"), _config(epochs=25))
    assert metrics["f1"] == 1.0 > metrics["baseline"]["f1"]
    assert metrics["accuracy"] > metrics["baseline"]["accuracy"]
    served = tf.saved_model.load(metrics["serving"]).signatures["serving_default"]
    words = [t.split() for t in (RIVER[0], MONEY[0])]
    width = max(map(len, words))
    out = served(words=tf.constant([w + [""] * (width - len(w)) for w in words]),
                 lengths=tf.constant([len(w) for w in words], tf.int32))["tags"].numpy()
    assert out[0].tolist() == [b"B-RIV" if w == "bank" else b"O" for w in words[0]] + [b""] * (width - len(words[0]))
    assert out[1].tolist()[:len(words[1])] == [b"B-FIN" if w == "bank" else b"O" for w in words[1]]


def test_elmo_tagger_learns_its_own_mix_over_the_frozen_module(exports, tmp_path):
    backbone = ExportedModule.load(exports["bilm"])
    x, positions = inputs_lib.bilm_tag_inputs(backbone, [("they", "don't", "bank", "!")], 10)
    assert positions == [[0, 1, 4, 5]]  # "don't" is don ' t for the module's splitter
    assert x["text"].tolist() == ["they don't bank !"]
    path = _tag_file(tmp_path / "tags.conll")
    metrics = _run("tag", exports["bilm"], path, path, str(tmp_path / "out"),
                           _config(epochs=25, learning_rate=1e-2))
    assert metrics["train_module"] is False
    assert metrics["losses"][-1] < metrics["losses"][0]
    assert metrics["accuracy"] >= metrics["majority_baseline"]["accuracy"]


def test_elmo_tagger_adds_the_tasks_own_word_vectors_aligned_with_the_modules_words(exports):
    words = layers.task_vocabulary([("They", "don't", "bank", "!"), ("bank",)], min_count=1)
    assert words == ("bank", "They", "don", "'", "t", "!")  # case kept, split as the module splits
    assert layers.task_vocabulary([("They", "don't", "bank", "!"), ("bank",)], min_count=2) == ("bank",)
    split = layers.TaskWordSplit(6)
    ids = layers.TaskWords(words)(split(tf.constant(["They don't bank !", "bank river"]))).numpy()
    assert ids.tolist() == [[3, 4, 5, 6, 2, 7], [2, 1, 0, 0, 0, 0]]  # 0 padding, 1 not in the vocabulary
    casing = layers.WordCasing()(split(tf.constant(["They don't USE iPads 42", ""]))).numpy()
    assert casing.tolist() == [[2, 1, 1, 1, 3, 4], [0] * 6]  # They don ' t USE iPads (42 cut at 6)
    backbone = ExportedModule.load(exports["bilm"])
    for dim in (8, 0):
        model = tasks.get("tag").build_model(backbone, 3, _config(task_word_dim=dim).resolved("bilm"), 1, words)
        names = {layer.name for layer in model.layers}
        assert ("task_word_embedding" in names) == ("casing_embedding" in names) == bool(dim)
        assert "module" in names
        logits = model({"text": tf.constant(["They don't bank !"])})["logits"]
        assert logits.shape == (1, 16, 3)
    control = tasks.get("tag").build_model(backbone, 3, _config(task_word_dim=8, elmo=False).resolved("bilm"), 1,
                                           words)
    assert "module" not in {layer.name for layer in control.layers}  # the tagger on its own word vectors only
    assert control({"text": tf.constant(["They don't bank !"])})["logits"].shape == (1, 16, 3)
    with pytest.raises(ValueError, match="need ELMo"):
        tasks.get("tag").build_model(backbone, 3, _config(task_word_dim=0, elmo=False).resolved("bilm"), 1, words)
    for elmo in (True, False):  # the sentence task model (a max-pooled BiLSTM), and its no-biLM baseline
        config = _config(task_word_dim=8, elmo=elmo, bilm_task_model="bilstm").resolved("bilm")
        model = tasks.get("classify").build_model(backbone, 2, config, 1, words)
        assert ("module" in {layer.name for layer in model.layers}) == elmo
        logits = model({"text": tf.constant([["They don't bank !"], [""]])})["logits"]
        assert logits.shape == (2, 2) and np.isfinite(logits.numpy()).all()  # an empty sentence pools to 0


def test_elmo_module_is_frozen_by_default_and_trains_with_train_module(exports, sentiment, tmp_path):
    backbone = ExportedModule.load(exports["bilm"])
    classify = tasks.get("classify")
    for train_module in (False, True):
        config = _config(epochs=2, train_module=train_module)
        encoded = classify.encode(backbone, task_data.read_classification(sentiment[0]),
                                  ["money", "river"], config, training=True)
        model = tasks.get("classify").build_model(backbone, 2, config, 1)
        module = model.get_layer("module")
        before = [v.numpy().copy() for v in module.variables]
        mix = [w for w in model.weights if "task_scalar_mix" in w.name]
        training.compile_model(model, classify, config, 10)
        training.train(model, encoded, config, log=lambda *_: None)
        changed = sum(not np.allclose(a, v.numpy()) for a, v in zip(before, module.variables))
        if train_module:
            assert changed > len(before) // 2 and not mix
        else:
            assert changed == 0 and len(mix) == 2
            assert not np.allclose(mix[0].numpy(), 0.0)  # the softmax weights moved


def test_squad_head_learns_a_span_and_beats_the_first_sentence(exports, tmp_path):
    paragraphs = []
    for i, (a, b) in enumerate(zip(RIVER, MONEY)):
        context = f"{a} . {b} ."
        start = context.index("interest") if "interest" in b else context.index(b.split()[-1])
        answer = "interest" if "interest" in b else b.split()[-1]
        paragraphs.append({"context": context, "qas": [{"id": f"q{i}", "question": "what about the bank ?",
                                                        "answers": [{"text": answer, "answer_start": start}]}]})
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs * 4}]}))
    metrics = _run("squad", exports["bert"], str(path), str(path), str(tmp_path / "out"),
                           _config(epochs=30, max_seq_length=24, doc_stride=8, max_query_length=8))
    assert metrics["losses"][-1] < 0.5 * metrics["losses"][0]
    assert metrics["exact_match"] > 50.0 > metrics["baseline"]["exact_match"]
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert set(predictions) == {"q0", "q1", "q2"}


def test_cli_from_a_model_dir_writes_model_metrics_and_serving(exports, sentiment, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["--task", "classify", "--model_dir", exports["bert_run"], "--train", sentiment[0],
                     "--eval", sentiment[1], "--output_dir", str(out), "--set", "epochs=1",
                          "--set", "max_seq_length=16", "--set", "batch_size=8"])
    assert code == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["task"] == "classify" and "accuracy" in last and "baseline" in last
    assert json.loads((out / "metrics.json").read_text())["accuracy"] == last["accuracy"]
    assert (out / "model" / "saved_model.pb").exists() and (out / "serving" / "1" / "saved_model.pb").exists()
    assert json.loads((out / "labels.json").read_text()) == ["money", "river"]
    assert cli.main(["--task", "classify", "--module", exports["bert"], "--train", sentiment[0], "--eval",
                     sentiment[1], "--output_dir", str(out), "--set", "nope=1"]) == 2
    assert "unknown key" in capsys.readouterr().err
    assert cli.main(["--task", "classify", "--module", exports["bert"], "--train", sentiment[0], "--eval",
                     sentiment[1], "--output_dir", str(out)]) == 2
    assert "holds an earlier fine-tuning" in capsys.readouterr().err  # --overwrite replaces it
    assert cli.main(["--task", "squad", "--module", exports["gpt"], "--train", sentiment[0], "--eval",
                     sentiment[1], "--output_dir", str(tmp_path / "squad")]) == 2
    assert "not SQuAD v1.1 JSON" in capsys.readouterr().err  # the data's errors come first
    squad_file = tmp_path / "squad.json"
    squad_file.write_text(json.dumps({"data": [{"paragraphs": [{"context": "the river bank", "qas": [
        {"id": "q", "question": "where ?", "answers": [{"text": "bank", "answer_start": 10}]}]}]}]}))
    assert cli.main(["--task", "squad", "--module", exports["gpt"], "--train", str(squad_file), "--eval",
                     str(squad_file), "--output_dir", str(tmp_path / "squad")]) == 2
    assert capsys.readouterr().err.strip() == "error: SQuAD fine-tuning needs a BERT module"


def test_entities_are_read_as_conlleval_does():
    assert ner_scores.entities(["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "I-ORG"]) == {
        (0, 2, "PER"), (3, 5, "LOC"), (5, 6, "LOC"), (6, 7, "ORG")}
    scores = ner_scores.tag_scores([("B-PER", "I-PER", "O", "B-LOC")], [["B-PER", "O", "O", "B-LOC"]])
    assert scores["accuracy"] == 0.75 and scores["precision"] == 0.5 and scores["recall"] == 0.5
    assert "f1" not in ner_scores.tag_scores([("NOUN", "VERB")], [["NOUN", "NOUN"]])


def test_readers_splits_and_baselines(tmp_path):
    pairs = _write(tmp_path / "p.tsv", ["1\ta\tb", "0\tc\td"])
    assert task_data.read_classification(pairs, 2)[1] == task_data.TextExample(("c", "d"), "0")
    with pytest.raises(task_data.TaskDataError, match="p.tsv:1"):
        task_data.read_classification(pairs, 1)
    bad = _write(tmp_path / "c.jsonl", [json.dumps({"context": "x", "choices": ["a"], "label": 3})])
    with pytest.raises(task_data.TaskDataError, match="out of range"):
        task_data.read_choices(bad)
    conll = _write(tmp_path / "t.conll", ["# c", "the\tDET", "bank\tNOUN", "", "bank\tVERB", "bank\tNOUN"])
    sentences = task_data.read_conll(conll)
    assert [s.tags for s in sentences] == [("DET", "NOUN"), ("VERB", "NOUN")]
    assert task_data.tag_baseline(sentences, sentences) == [["DET", "NOUN"], ["NOUN", "NOUN"]]
    items = list(range(200))
    first, second = task_data.split_items(items, 0.2), task_data.split_items(items, 0.2)
    assert first == second and 20 < len(first[1]) < 60 and sorted(first[0] + first[1]) == items


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_bert_sentence_heads_can_pool_without_the_nsp_pooler(exports, pooling):
    backbone = ExportedModule.load(exports["bert"])
    config = _config(bert_pooling=pooling).resolved("bert")
    model = tasks.get("classify").build_model(backbone, 2, config, 1)
    names = {layer.name for layer in model.layers}
    assert ("fresh_pooler" in names) == (pooling == "cls") and ("mean_pool" in names) == (pooling == "mean")
    x = inputs_lib.text_inputs(backbone, [[("the river bank",), ("interest rates at the bank again",)]], 16)
    padded = {k: v.copy() for k, v in x.items()}
    padded["input_word_ids"][:, :, 12:] = 7  # ids under input_mask 0 must not move a pooled vector
    assert np.allclose(model(x)["logits"].numpy(), model(padded)["logits"].numpy(), atol=1e-5)
