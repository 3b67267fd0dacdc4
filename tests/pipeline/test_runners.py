"""Both Beam jobs on engines past one process: Beam's Dask runner on a `distributed.LocalCluster` (worker
processes, and workers with several DoFn threads, as Dataflow runs them) and the portable path Dataflow
Runner v2 takes (job service + EXTERNAL worker pool). Each output must be byte-identical to the in-process
`FnApiRunner`'s for the same input and seed; the counters must reach metadata.json without a metrics API."""

import contextlib
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import time

import pytest

from apache_beam.internal import pickler
from pipeline import clean, pretraining_data, vocab
from tests.conftest import ROOT
from tests.fixtures.dask_cluster import dask_cluster

SENTENCES = ["The cat sat on the mat.", "It was a sunny day in the park.", "Birds sang loudly overhead!",
             "Then the rain came down hard.", "Everyone ran for cover under the trees.",
             "The river bank was flooded by noon.", "She went to the bank to deposit money.",
             "Interest rates rose again this year.", "Unaffable clerks counted the coins slowly."]
JOBS = {"bert": ["--max_seq_length", "32", "--max_predictions_per_seq", "5", "--dupe_factor", "2",
                 "--num_shards", "3"],
        "gpt": ["--max_seq_length", "16", "--num_shards", "2"],
        "bilm": ["--max_seq_length", "6", "--num_shards", "2"]}


def _corpus_files(base, files: int, documents: int, sentences: tuple[int, int], extra: dict | None = None) -> str:
    """`files` files in `base` of `documents` documents of SENTENCES drawn at random (`sentences`: the fewest
    and most per document), file f followed by the bytes `extra[f]`; -> their glob pattern."""
    rng = random.Random(0)
    for f in range(files):
        docs = ["\n".join(rng.choice(SENTENCES) for _ in range(rng.randint(*sentences))) for _ in range(documents)]
        (base / f"part{f}.txt").write_bytes("\n\n".join(docs).encode() + b"\n" + (extra or {}).get(f, b""))
    return str(base / "part*.txt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four small files (the Dask runner's parallelism is over files), one bad byte, one empty document."""
    return _corpus_files(tmp_path_factory.mktemp("corpus"), 4, 12, (1, 6),
                         extra={1: b"\n\n\n\nA line with \xff bad bytes.\n"})


def run_vocab(corpus, out_dir, runner_args):
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "vocab.txt")
    assert vocab.main(["--input", corpus, "--output", out, "--vocab_size", "90", *runner_args]) == 0
    return out


def run_data(model, corpus, vocab_path, out_dir, runner_args):
    assert pretraining_data.main(["--model", model, "--input", corpus, "--vocab", vocab_path,
                                  "--output_dir", str(out_dir), *JOBS[model], *runner_args]) == 0
    return out_dir


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """The outputs of the in-process runner: the vocabulary, then each model's data from it."""
    base = tmp_path_factory.mktemp("reference")
    vocab_path = run_vocab(corpus, base / "vocab", ["--runner", "FnApiRunner"])
    data = {m: run_data(m, corpus, vocab_path, base / m, ["--runner", "FnApiRunner"]) for m in ("bert", "gpt")}
    return vocab_path, data


def corpus_lines(corpus) -> int:
    return sum(len(open(p, "rb").read().splitlines()) for p in glob.glob(corpus))


def same_vocab(a, b, corpus):
    assert open(a, "rb").read() == open(b, "rb").read()
    meta_a, meta_b = (json.load(open(p + ".json")) for p in (a, b))
    assert meta_a["counters"] == meta_b["counters"] == {"lines": corpus_lines(corpus), "lines_over_max_bytes": 0,
                                                       "lines_with_invalid_utf8": 1}
    assert {k: v for k, v in meta_a.items() if k != "config"} == {k: v for k, v in meta_b.items() if k != "config"}


def same_data(a, b):
    names = sorted(n for n in os.listdir(a) if ".tfrecord" in n or n == "vocab.txt")
    assert names == sorted(n for n in os.listdir(b) if ".tfrecord" in n or n == "vocab.txt") and len(names) > 2
    for name in names:
        assert open(os.path.join(a, name), "rb").read() == open(os.path.join(b, name), "rb").read(), name
    meta_a, meta_b = (json.load(open(os.path.join(d, "metadata.json"))) for d in (a, b))
    assert meta_a["counters"]["lines_with_invalid_utf8"] == 1 and meta_a["counters"]["empty_documents"] == 3
    assert meta_a["counters"]["instances"] == meta_a["examples"] > 0
    assert {k: v for k, v in meta_a.items() if k != "config"} == {k: v for k, v in meta_b.items() if k != "config"}


@pytest.mark.slow
def test_dask_worker_processes_give_the_same_bytes(corpus, reference, tmp_path):
    vocab_path, data = reference
    with dask_cluster(workers=2, threads=1) as dask:
        same_vocab(run_vocab(corpus, tmp_path / "vocab", dask), vocab_path, corpus)
        same_data(run_data("bert", corpus, vocab_path, tmp_path / "bert", dask), data["bert"])


@pytest.mark.slow
def test_dask_workers_with_several_threads_give_the_same_bytes(corpus, reference, tmp_path):
    """Several DoFn instances run at once in one process (TF functions, tokenizers), as on Dataflow."""
    vocab_path, data = reference
    with dask_cluster(workers=1, threads=3) as dask:
        same_data(run_data("bert", corpus, vocab_path, tmp_path / "bert", dask), data["bert"])


@pytest.mark.slow
def test_dask_threads_gpt_and_bilm(corpus, reference, tmp_path):
    vocab_path, data = reference
    with dask_cluster(workers=1, threads=3) as dask:
        same_data(run_data("gpt", corpus, vocab_path, tmp_path / "gpt", dask), data["gpt"])
        bilm = run_data("bilm", corpus, vocab_path, tmp_path / "bilm", dask)
    reference_bilm = run_data("bilm", corpus, vocab_path, tmp_path / "bilm-ref", ["--runner", "FnApiRunner"])
    same_data(bilm, reference_bilm)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory):
    """16 files of three documents: four times the partitions of `corpus`, and documents for several buckets."""
    return _corpus_files(tmp_path_factory.mktemp("many_files"), 16, 3, (2, 6))


# No --num_shards: the bucket count comes from the document count (48 documents / 10 = 5 buckets).
DERIVED_BUCKETS = ["--max_seq_length", "32", "--max_predictions_per_seq", "5", "--dupe_factor", "1",
                   "--docs_per_bucket", "10"]


def run_derived(corpus, vocab_path, out_dir, runner_args):
    assert pretraining_data.main(["--model", "bert", "--input", corpus, "--vocab", vocab_path,
                                  "--output_dir", str(out_dir), *DERIVED_BUCKETS, *runner_args]) == 0
    return json.load(open(os.path.join(out_dir, "metadata.json")))


@pytest.fixture(scope="module")
def derived_reference(many_files, reference, tmp_path_factory):
    """`many_files`' BERT data on the in-process runner, bucket count from the documents: (its folder, metadata)."""
    out = tmp_path_factory.mktemp("derived") / "ref"
    return out, run_derived(many_files, reference[0], out, ["--runner", "FnApiRunner"])


def same_shards(a, b):
    names = sorted(n for n in os.listdir(a) if ".tfrecord" in n)
    assert names == sorted(n for n in os.listdir(b) if ".tfrecord" in n)
    for name in names:
        assert open(os.path.join(a, name), "rb").read() == open(os.path.join(b, name), "rb").read(), name


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_dask_bucket_count_from_the_documents_is_the_same_for_any_worker_count(many_files, reference,
                                                                               derived_reference, tmp_path, workers):
    """Regression: the bucket count was a side input computed from the documents, which Beam 2.77's Dask runner
    re-evaluated inside each task, with another value (a 400-document corpus gave different instance counts on
    1 and 4 workers). 16 files in 16 partitions, no --num_shards."""
    vocab_path = reference[0]
    ref_dir, expected = derived_reference
    assert expected["config"]["num_shards"] == 5 and expected["counters"]["documents_with_tokens"] == 48
    with dask_cluster(workers=workers, threads=1, partitions=16) as dask:
        got = run_derived(many_files, vocab_path, tmp_path / "dask", dask)
    same_shards(ref_dir, tmp_path / "dask")
    assert {k: v for k, v in got.items() if k != "config"} == {k: v for k, v in expected.items() if k != "config"}
    assert got["config"]["num_shards"] == 5 and got["examples"] == got["counters"]["instances"] > 0


def test_dofns_pickle_again_after_setup(reference):
    """The Dask runner pickles a DoFn it has already set up (a side input evaluated inside a task)."""
    from pipeline.example_makers import ExampleConfig, TokenizeDocuments
    from preprocessing.vocabulary import Vocabulary

    config = ExampleConfig(model="bert", vocab_tokens=Vocabulary.from_file(reference[0]).tokens,
                           lower_case=True, max_seq_length=32)
    fn = TokenizeDocuments(config)
    fn.setup()
    batch = [((0, i), SENTENCES[i:i + 2]) for i in range(3)]
    first = list(fn.process(batch))
    again = pickler.loads(pickler.dumps(fn))
    assert not hasattr(again, "_encode")
    again.setup()
    second = list(again.process(batch))
    assert [(d, doc.ids.tolist(), doc.bounds) for d, doc in first] == \
        [(d, doc.ids.tolist(), doc.bounds) for d, doc in second]


# The worker pool as `worker_pool_main` runs it, on a port it picks itself and prints when it listens.
POOL = ("import time\n"
        "from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer\n"
        "address, _ = BeamFnExternalWorkerPoolServicer.start(use_process=True)\n"
        "print(address, flush=True)\n"
        "while True:\n    time.sleep(3600)\n")
SERVICE_START_S = 300  # bounds a hang only


def wait_for_file(path: str, process) -> str:
    """The contents of `path` once it exists (written atomically by `process`), failing if `process` ends."""
    deadline = time.monotonic() + SERVICE_START_S
    while not os.path.exists(path):
        assert process.poll() is None, f"the service exited with {process.returncode} before writing {path}"
        assert time.monotonic() < deadline, f"no {path} after {SERVICE_START_S} s"
        time.sleep(0.1)
    with open(path) as f:
        return f.read().strip()


@contextlib.contextmanager
def portable_services(folder):
    """Beam's Python job service and an EXTERNAL worker pool (what Dataflow Runner v2 and the Flink / Spark
    job servers talk to), each bounded by `timeout -k` and always stopped. Each binds a port of its choosing
    and says which once it listens (the job service in a port file, the pool on stdout): no port is picked
    here and then lost to another process before the service binds it."""
    # The pool starts each SDK worker as a bare `python -c ...`: this interpreter must come first on PATH.
    env = {**os.environ, "PYTHONPATH": ROOT,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    port_file = os.path.join(folder, "job_service.port")

    def start(command, stdout):
        return subprocess.Popen(["timeout", "-k", "10", "1800", *command], cwd=ROOT, env=env, text=True,
                                stdout=stdout, stderr=subprocess.DEVNULL)
    processes = [start([sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main", "--port", "0",
                        "--port_file", port_file], subprocess.DEVNULL),
                 start([sys.executable, "-c", POOL], subprocess.PIPE)]
    try:
        job_port = wait_for_file(port_file, processes[0])
        pool_address = processes[1].stdout.readline().strip()  # "" if the pool ended before listening
        assert pool_address.startswith("localhost:"), f"the worker pool ended ({processes[1].wait()})"
        yield ["--runner", "PortableRunner", "--job_endpoint", f"localhost:{job_port}",
               "--environment_type", "EXTERNAL", "--environment_config", pool_address]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.mark.slow
def test_portable_runner_with_an_external_worker_pool_gives_the_same_bytes(corpus, reference, tmp_path):
    vocab_path, data = reference
    with portable_services(str(tmp_path)) as portable:
        same_vocab(run_vocab(corpus, tmp_path / "vocab", portable), vocab_path, corpus)
        same_data(run_data("bert", corpus, vocab_path, tmp_path / "bert", portable), data["bert"])
        held = shutil.copy(corpus.replace("*", "0"), tmp_path / "heldout.txt")  # an --input file is refused there
        clean_args = ["--input", corpus, "--dedup", "all,key_ranges=3", "--decontaminate", str(held)]
        assert clean.main([*clean_args, "--output_dir", str(tmp_path / "clean"), *portable]) == 0
    assert clean.main([*clean_args, "--output_dir", str(tmp_path / "clean_ref"), "--runner", "FnApiRunner"]) == 0
    same_cleaned(tmp_path / "clean", tmp_path / "clean_ref")


def same_cleaned(a, b):
    """Two `pipeline.clean` outputs: the same files, bytes and report (but the output folder it names)."""
    names = sorted(os.listdir(b))
    assert sorted(os.listdir(a)) == names and len(names) > 2
    for name in names:
        got, want = ((d / name).read_bytes() for d in (a, b))
        if name == "clean_report.json":
            got, want = ({**json.loads(x), "config": None} for x in (got, want))
            assert want["counters"]["dedup_span_sentences"] > 0 and want["counters"]["heldout_documents"] > 0
        assert got == want, name
