"""`make demo`'s job (`pipeline.demo`): its pieces, and (slow) the whole chain on a small real corpus, twice."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from models.training import curves
from demo import steps as demo
from tests.conftest import PRETRAIN, ROOT, SHARED_DATA

SENSES = os.path.join(SHARED_DATA, "eval", "wordnet_senses.jsonl.gz")
PAIRS = os.path.join(SHARED_DATA, "eval", "wordnet_wic_pairs.tsv.gz")

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
    assert all(demo._TF_NOISE.match(line) for line in NOISE)
    assert not any(demo._TF_NOISE.match(line) for line in NOT_NOISE)


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


def _small_inputs(tmp_path) -> tuple[str, str, str]:
    """The first 40 documents of the real corpus; the sense rows and pairs of a few lemmas, "bank" among them."""
    corpus = tmp_path / "corpus.txt"
    with gzip.open(PRETRAIN, "rt", encoding="utf-8") as f, open(corpus, "w", encoding="utf-8") as out:
        documents = 0
        for line in f:
            out.write(line)
            documents += not line.strip()
            if documents == 40:
                break
    lemmas = {"bank", "play", "plant", "run", "head"}
    senses = tmp_path / "senses.jsonl"
    with gzip.open(SENSES, "rt", encoding="utf-8") as f:
        senses.write_text("".join(line for line in f if json.loads(line)["lemma"] in lemmas))
    pairs = tmp_path / "pairs.tsv"
    with gzip.open(PAIRS, "rt", encoding="utf-8") as f:
        lines = f.readlines()
    pairs.write_text(lines[0] + "".join(lines[1:1500:5]))
    return str(corpus), str(senses), str(pairs)


def test_tokenize_step_writes_what_the_tokenize_command_writes(tmp_path, tiny_vocab, capsys):
    """The demo's step 3 runs `preprocessing.tokenize`'s loop: the same ids, line for line, over plain and
    gzipped files; coverage figures from it; a second run reuses the file."""
    vocab = str(tmp_path / "vocab.txt")
    tiny_vocab.write(vocab)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_bytes(b"Unaffable, the!\n\nhello unX world\n")
    with gzip.open(tmp_path / "corpus" / "b.txt.gz", "wb") as f:
        f.write(b"caf\xff\xfee hello\n")
    pattern = str(tmp_path / "corpus" / "*")
    stats = demo.tokenize_corpus(pattern, vocab, str(tmp_path / "tokens.txt"))
    command = subprocess.run([sys.executable, "-m", "preprocessing.tokenize", "--vocab", vocab],
                             input=b"Unaffable, the!\n\nhello unX world\ncaf\xff\xfee hello\n",
                             capture_output=True, cwd=ROOT, timeout=300)
    assert command.returncode == 0, command.stderr.decode()
    assert (tmp_path / "tokens.txt").read_text() == command.stdout.decode()
    assert {k: stats[k] for k in ("lines", "words", "pieces", "unk")} == \
        {"lines": 4, "words": 9, "pieces": 11, "unk": 1}
    assert demo.tokenize_corpus(pattern, vocab, str(tmp_path / "tokens.txt")) == stats
    assert "reusing" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.shared_data("corpus/pretrain.txt.gz", "eval/wordnet_senses.jsonl.gz",
                         "eval/wordnet_wic_pairs.tsv.gz")
def test_demo_end_to_end_then_a_rerun_reuses_every_step(tmp_path):
    corpus, senses, pairs = _small_inputs(tmp_path)
    out = tmp_path / "demo"
    cmd = [sys.executable, "-m", "demo", "--demo_dir", str(out), "--corpus", corpus, "--vocab_size", "1500",
           "--demo_steps", "6", "--senses", senses, "--pairs", pairs]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "cuInit" not in first.stderr and "oneDNN custom operations" not in first.stderr

    summary = json.loads((out / "summary.json").read_text())
    assert summary["bert_examples"] > 0 and summary["gpt_examples"] > 0 and summary["bilm_examples"] > 0
    for model in ("bert", "gpt", "bilm"):
        assert (out / "runs" / model / "training_curves.png").exists()
        assert (out / "polysemy" / f"{model}_bank.png").exists()
        assert (out / "export" / model / "hub").is_dir()
        assert 0.0 <= summary["polysemy"][model]["accuracy"] <= 1.0
    assert summary["gpt_continuation"].startswith(demo.GPT_PROMPT)
    assert "bank (" in first.stdout and "play (" in first.stdout  # the neighbours are printed
    table = first.stdout[first.stdout.index("== summary"):]
    assert "9 bilm polysemy" in table and "7 gpt export" in table

    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    for reused in ("reusing " + str(out / "vocab.txt"), "reusing " + str(out / "tokens.txt"),
                   "reusing " + str(out / "data" / "bilm"),
                   "from step 6 to 6", "is up to date", "bert: reusing"):
        assert reused in second.stdout + second.stderr
    assert json.loads((out / "summary.json").read_text())["polysemy"] == summary["polysemy"]
