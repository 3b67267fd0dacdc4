"""Scaling of the BERT data job on a Dask cluster of worker processes: figures that measure the design, not the box.

    .venv/bin/python -m benchmarks.data.scaling [--corpus PATH] [--vocab PATH] [--base_documents 400]
        [--dupe_factor 1] [--multiples 1,4,16] [--workers 1,2,4] [--files_per_copy 4] [--skip_reference]
        [--tf_threads 1]
        [--project_words 2.5e9] [--project_dupe_factor 10] [--project_workers 1,16,64,256]

The job: `python -m pipeline.pretraining_data --model bert --max_seq_length 128 --max_predictions_per_seq 20
--dupe_factor D --runner apache_beam.runners.dask.dask_runner.DaskRunner --dask_client_address ADDRESS
--dask_npartitions P` with P = the number of input files.
Corpora: the base is the corpus's first --base_documents documents (all of them with 0), cut into
--files_per_copy plain-text files of consecutive documents; the Mx corpus is M copies of those files, each copy
under new file names, so every copy's documents are distinct documents with new ids (a document's id is its
file's index in the sorted file list and its index in the file) and get their own next-sentence pairs and
masks. Copies are hard links (no extra disk). The partitions grow with the corpus (P = M x files_per_copy), so
a partition holds the same data at every size.
Cluster: a fresh one per run, started here as separate processes: `python -m dask scheduler` and W x
`python -m dask worker --nthreads 1 --no-nanny --memory-limit 0 --preload pipeline.pretraining_data` (the
preload imports TensorFlow, tf-text and Beam while the worker starts), each process with TF's thread
pools sized by --tf_threads (default 1: a worker owns one core). A run starts measuring when every
worker has registered, i.e. after the imports.
Measured per run (psutil, user + sys, each process with its waited-for children):
  - worker CPU-s: the sum over the workers of their CPU time from registration to the end of the job
    (their start-up, TF import included, is reported apart as "worker start-up");
  - driver CPU-s: the `python -m pipeline.pretraining_data` process tree (benchmarks/lib/proc.py run_tree:
    getrusage of a child-subreaper wrapper), everything included (its own TF import, graph building);
  - scheduler CPU-s: the scheduler process from registration to the end of the job;
  - peak memory per worker: the kernel's VmHWM of each worker process at the end of the job (the workers
    are fresh, so it is the peak since start, imports included), and its VmRSS at registration;
  - an empty-job baseline per worker count: the same job on --files_per_copy files of one short document
    each, on its own fresh cluster; "net" worker CPU per instance subtracts it (what every job pays
    whatever its size: first use of TF in each worker, traces, task overheads of that many partitions).
Reference (unless --skip_reference): `benchmarks.peers.reference_create_pretraining_data` (a faithful pure-Python
create_pretraining_data.py) on the base (one file) and on 4 copies of it concatenated: CPU-s per instance
and peak RSS (it holds every instance in memory and runs on one process).
Projection: instances per word per dupe from the runs, times --project_words x --project_dupe_factor;
worker core-hours = instances x the net worker CPU-s per instance of the largest run (plus each worker's
start-up); the reference's = instances x its CPU-s per instance, on one process, with its memory
extrapolated from the 1x -> 4x slope.
Prints the tables and a final line holding a JSON object of all figures.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from commands.tf_startup import quiet_command
from benchmarks.lib.dask_worker import DASK_RUNNER as DASK
from benchmarks.lib.pretraining_runs import COMMON, count_records, read_documents, run_reference, write_corpus
from benchmarks.lib.proc import ROOT, child_env, log_tail, run_tree, status_kb
from benchmarks.lib.stats import rounded as _r
from demo import shared_data

FLAT = 0.10  # the largest spread called flat
EMPTY_DOCUMENT = ["A short document.", "It has two sentences."]


# ---------------------------------------------------------------------------------------------------------
# Pure parts: corpus layout, figures, projection


def split_documents(documents: list, parts: int) -> list[list]:
    """`documents` cut into `parts` runs of consecutive documents, as even in count as possible (none empty
    unless there are fewer documents than parts)."""
    size, extra = divmod(len(documents), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(documents[start:end])
        start = end
    return out


def copy_names(multiple: int, files_per_copy: int) -> list[str]:
    """File names of the Mx corpus: copy-major, so that sorted order puts each copy's files together and every
    (copy, part) has its own file index, hence new document ids."""
    return [f"copy{c:04d}-part{p:03d}.txt" for c in range(multiple) for p in range(files_per_copy)]


def spread(values: list[float]) -> float:
    """(max - min) / min: 0 for identical values; the largest relative difference between any two."""
    low = min(values)
    return (max(values) - low) / low if low > 0 else float("inf")


def share(part: float, *others: float) -> float:
    whole = part + sum(others)
    return part / whole if whole else 0.0


def project(instances_per_word: float, words: float, cpu_s_per_instance: float, workers: int,
            startup_cpu_s_per_worker: float = 0.0) -> dict:
    """Projected instances, worker core-hours and ideal wall hours on `workers` workers for a corpus of
    `words` words (at the dupe factor `instances_per_word` was measured for)."""
    instances = instances_per_word * words
    core_hours = (instances * cpu_s_per_instance + workers * startup_cpu_s_per_worker) / 3600
    return {"workers": workers, "instances": instances, "core_hours": core_hours, "wall_hours": core_hours / workers}


def linear_fit(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y on x."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx if sxx else 0.0
    return my - slope * mx, slope


# ---------------------------------------------------------------------------------------------------------
# Processes


# TF's own thread pools per process (TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS): 1 by default, as
# for a worker that owns one core (`--nthreads 1`); 0 leaves TF's default, pools as wide as the machine,
# which on W workers > cores oversubscribes the cores (measured in docs/scaling.md).
TF_THREADS = 1


def _env() -> dict:
    env = child_env(OMP_NUM_THREADS="1")
    if TF_THREADS:
        env.update(TF_NUM_INTRAOP_THREADS=str(TF_THREADS), TF_NUM_INTEROP_THREADS=str(TF_THREADS))
    return env


def cpu_s(pid: int) -> float:
    """User + sys of a live process and its waited-for children."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system + t.children_user + t.children_system


class Cluster:
    """A scheduler and `workers` single-threaded worker processes, each its own process started here."""

    def __init__(self, workers: int, tmp: str):
        self.workers, self.tmp = workers, tmp
        os.makedirs(tmp, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        self.logs: list[str] = []

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = os.path.join(self.tmp, f"{name}.log")
        self.logs.append(log)
        with open(log, "wb") as f:
            proc = subprocess.Popen([sys.executable, "-m", "dask", *cmd], cwd=ROOT, env=_env(), stdout=f,
                                    stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def __enter__(self):
        started = time.perf_counter()
        scheduler_file = os.path.join(self.tmp, "scheduler.json")
        with contextlib.suppress(FileNotFoundError):
            os.remove(scheduler_file)
        self.scheduler = self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                                   "--no-dashboard", "--scheduler-file", scheduler_file])
        while not os.path.exists(scheduler_file):
            self._check()
            time.sleep(0.2)
        time.sleep(0.2)
        with open(scheduler_file) as f:
            self.address = json.load(f)["address"]
        self.worker_procs = [
            self._start(f"worker{i}", ["worker", self.address, "--nthreads", "1", "--no-nanny", "--memory-limit", "0",
                                       "--name", f"w{i}", "--preload", "pipeline.pretraining_data",
                                       "--local-directory", os.path.join(self.tmp, f"w{i}")])
            for i in range(self.workers)]
        self._wait_for_workers()
        self.start_wall_s = time.perf_counter() - started
        self.worker_start_cpu = [cpu_s(p.pid) for p in self.worker_procs]
        self.worker_start_rss_kb = [status_kb(p.pid)[0] for p in self.worker_procs]
        self.scheduler_start_cpu = cpu_s(self.scheduler.pid)
        return self

    def _check(self):
        for proc, log in zip(self.procs, self.logs):
            if proc.poll() is not None:
                raise RuntimeError(f"a dask process exited ({proc.returncode}):\n{log_tail(log)}")

    def _wait_for_workers(self, timeout_s: float = 600):
        from distributed import Client

        with Client(self.address, timeout=60) as client:
            deadline = time.time() + timeout_s
            while len(client.scheduler_info(n_workers=-1)["workers"]) < self.workers:
                self._check()
                if time.time() > deadline:
                    raise TimeoutError(f"{self.workers} workers did not register in {timeout_s} s")
                time.sleep(0.3)

    def measure(self) -> dict:
        """CPU since registration and memory of the workers and the scheduler, now."""
        self._check()
        return {"worker_cpu_s": [cpu_s(p.pid) - c for p, c in zip(self.worker_procs, self.worker_start_cpu)],
                "worker_startup_cpu_s": list(self.worker_start_cpu),
                "worker_peak_mb": [status_kb(p.pid)[1] / 1024 for p in self.worker_procs],
                "worker_ready_mb": [kb / 1024 for kb in self.worker_start_rss_kb],
                "scheduler_cpu_s": cpu_s(self.scheduler.pid) - self.scheduler_start_cpu,
                "scheduler_peak_mb": status_kb(self.scheduler.pid)[1] / 1024}

    def __exit__(self, *exc):
        for proc in reversed(self.procs):  # workers first
            proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------------------------------------------------
# Runs


def make_corpora(documents: list, multiples: list[int], files_per_copy: int, tmp: str) -> dict[int, str]:
    """The base files once, then a folder per multiple of hard links to them; returns multiple -> pattern."""
    base_dir = os.path.join(tmp, "base")
    os.makedirs(base_dir)
    base = []
    for p, part in enumerate(split_documents(documents, files_per_copy)):
        path = os.path.join(base_dir, f"part{p:03d}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join("\n".join(doc) + "\n\n" for doc in part))
        base.append(path)
    patterns = {}
    for m in multiples:
        folder = os.path.join(tmp, f"corpus_{m}x")
        os.makedirs(folder)
        for i, name in enumerate(copy_names(m, files_per_copy)):
            os.link(base[i % files_per_copy], os.path.join(folder, name))
        patterns[m] = os.path.join(folder, "*.txt")
    return patterns


def make_empty_corpus(files: int, tmp: str) -> str:
    folder = os.path.join(tmp, "corpus_empty")
    os.makedirs(folder)
    for name in copy_names(1, files):
        with open(os.path.join(folder, name), "w") as f:
            f.write("\n".join(EMPTY_DOCUMENT) + "\n")
    return os.path.join(folder, "*.txt")


def run_job(pattern: str, files: int, workers: int, args, tmp: str, tag: str) -> dict:
    output_dir = os.path.join(tmp, f"out_{tag}")
    log = os.path.join(tmp, f"job_{tag}.log")
    print(f"  {tag}: {workers} worker(s), {files} files ...", end="", flush=True)
    with Cluster(workers, os.path.join(tmp, f"cluster_{tag}")) as cluster:
        cmd = [sys.executable, "-m", "pipeline.pretraining_data", "--model", "bert", "--input", pattern,
               "--vocab", args.vocab, "--output_dir", output_dir, *COMMON, "--dupe_factor", str(args.dupe_factor),
               "--runner", DASK, "--dask_client_address", cluster.address, "--dask_npartitions", str(files)]
        driver = run_tree(cmd, log, cwd=ROOT, env=_env())
        measured = cluster.measure()
        start_wall = cluster.start_wall_s
    if driver["rc"] != 0:
        sys.exit(f"{tag} failed (exit {driver['rc']}): {' '.join(cmd)}\n{log_tail(log)}")
    with open(os.path.join(output_dir, "metadata.json")) as f:
        metadata = json.load(f)
    records = sum(count_records(os.path.join(output_dir, n)) for n in metadata["files"])
    if records != metadata["examples"]:
        sys.exit(f"{tag}: metadata says {metadata['examples']} examples, the shards hold {records}")
    shutil.rmtree(output_dir)
    run = {"tag": tag, "workers": workers, "files": files, "instances": metadata["examples"],
           "documents": metadata["counters"]["documents"], "shards": len(metadata["files"]),
           "driver_cpu_s": driver["cpu_s"], "driver_wall_s": driver["wall_s"],
           "driver_peak_mb": max((p["peak_kb"] for p in driver["processes"] if p["depth"] == 1), default=0) / 1024,
           "cluster_start_wall_s": start_wall, **measured}
    run["workers_cpu_s"] = sum(run["worker_cpu_s"])
    print(f" {run['instances']:,} instances, {driver['wall_s']:.0f} s wall; CPU-s driver {run['driver_cpu_s']:.1f}, "
          f"workers {run['workers_cpu_s']:.1f}, scheduler {run['scheduler_cpu_s']:.1f}; worker peaks (MB) "
          f"{[round(x) for x in run['worker_peak_mb']]}", flush=True)
    return run


# ---------------------------------------------------------------------------------------------------------
# Report


def report(runs: dict, empties: dict, ref: dict, args, base_words: int) -> dict:
    figures = {"runs": [{k: (_r(v, 3) if isinstance(v, float) else
                             [_r(x, 3) for x in v] if isinstance(v, list) else v) for k, v in r.items()}
                        for r in list(runs.values()) + list(empties.values())]}
    multiples, workers = args.multiples, args.workers
    print(f"\nWorker CPU-s per instance (x 1e-6): raw (all worker CPU after registration / instances) and net "
          f"(the empty-job baseline of that worker count subtracted)")
    header = f"{'workers':>7} {'empty job s':>12}" + "".join(f" {f'{m}x raw':>9} {f'{m}x net':>9}" for m in multiples)
    print(header)
    net = {}
    for w in workers:
        cells = ""
        for m in multiples:
            r = runs[(w, m)]
            raw = r["workers_cpu_s"] / r["instances"]
            n = (r["workers_cpu_s"] - empties[w]["workers_cpu_s"]) / r["instances"]
            net[(w, m)] = n
            cells += f" {raw * 1e6:>9.1f} {n * 1e6:>9.1f}"
        print(f"{w:>7} {empties[w]['workers_cpu_s']:>12.1f}{cells}")
    spreads = {m: spread([net[(w, m)] for w in workers]) for m in multiples}
    raw_spreads = {m: spread([runs[(w, m)]["workers_cpu_s"] / runs[(w, m)]["instances"] for w in workers])
                   for m in multiples}
    print("spread over worker counts (max-min)/min, net: " +
          ", ".join(f"{m}x {spreads[m]:.1%}" for m in multiples) + "; raw: " +
          ", ".join(f"{m}x {raw_spreads[m]:.1%}" for m in multiples) + f" (flat: <= {FLAT:.0%})")

    print(f"\nDriver and scheduler CPU as a share of the job's CPU (driver + scheduler + workers after registration)")
    print(f"{'workers':>7}" + "".join(f" {f'{m}x driver':>11} {f'{m}x sched':>10}" for m in multiples))
    for w in workers:
        cells = ""
        for m in multiples:
            r = runs[(w, m)]
            cells += (f" {share(r['driver_cpu_s'], r['scheduler_cpu_s'], r['workers_cpu_s']):>11.1%}"
                      f" {share(r['scheduler_cpu_s'], r['driver_cpu_s'], r['workers_cpu_s']):>10.1%}")
        print(f"{w:>7}{cells}")
    print(f"{'driver CPU-s':>7}" + "".join(
        f" {sum(runs[(w, m)]['driver_cpu_s'] for w in workers) / len(workers):>11.1f} {'':>10}" for m in multiples))

    print(f"\nPeak memory per worker (MB, VmHWM; largest worker / at registration)")
    print(f"{'workers':>7}" + "".join(f" {f'{m}x peak':>9}" for m in multiples) + f" {'ready':>7} {'last/first':>10}")
    mem_ratio = {}
    for w in workers:
        peaks = [max(runs[(w, m)]["worker_peak_mb"]) for m in multiples]
        mem_ratio[w] = peaks[-1] / peaks[0]
        ready = max(runs[(w, multiples[0])]["worker_ready_mb"])
        print(f"{w:>7}" + "".join(f" {p:>9.0f}" for p in peaks) + f" {ready:>7.0f} {mem_ratio[w]:>10.2f}")
    driver_peaks = [max(runs[(w, m)]["driver_peak_mb"] for w in workers) for m in multiples]
    print(f"driver peak (MB): " + ", ".join(f"{m}x {p:.0f}" for m, p in zip(multiples, driver_peaks)))

    big = (max(workers), max(multiples))
    per_word = runs[big]["instances"] / (base_words * max(multiples)) / args.dupe_factor  # instances / word / dupe
    startup = sum(sum(runs[k]["worker_startup_cpu_s"]) / len(runs[k]["worker_startup_cpu_s"]) for k in runs) / len(runs)
    words = args.project_words
    print(f"\nProjection: {words:.3g} words, dupe_factor {args.project_dupe_factor}: "
          f"{per_word * words * args.project_dupe_factor:.3g} instances ({per_word:.4f} instances per word per dupe, "
          f"from the {big[1]}x run); net worker CPU {net[big] * 1e6:.1f} us per instance ({big[0]} workers, "
          f"{big[1]}x); worker start-up {startup:.1f} CPU-s each")
    proj = [project(per_word * args.project_dupe_factor, words, net[big], n, startup) for n in args.project_workers]
    print(f"{'engine':<22} {'workers':>8} {'core-hours':>11} {'wall hours (ideal)':>19}")
    for p in proj:
        print(f"{'ours (Dask)':<22} {p['workers']:>8} {p['core_hours']:>11.1f} {p['wall_hours']:>19.2f}")
    figures.update({"net_worker_cpu_us_per_instance": {f"{w}w_{m}x": _r(v * 1e6, 2) for (w, m), v in net.items()},
                    "net_spread_over_workers": {f"{m}x": _r(v, 4) for m, v in spreads.items()},
                    "raw_spread_over_workers": {f"{m}x": _r(v, 4) for m, v in raw_spreads.items()},
                    "worker_peak_ratio_last_first": {f"{w}w": _r(v, 3) for w, v in mem_ratio.items()},
                    "instances_per_word_per_dupe": _r(per_word, 6), "worker_startup_cpu_s": _r(startup, 2),
                    "projection": [{k: _r(v, 2) for k, v in p.items()} for p in proj]})
    if ref:
        r1 = ref[1]
        ref_per_instance = r1["cpu_s"] / r1["instances"]
        ref_proj = project(per_word * args.project_dupe_factor, words, ref_per_instance, 1)
        fit = linear_fit([ref[m]["instances"] for m in sorted(ref)], [ref[m]["peak_rss_mb"] for m in sorted(ref)])
        mem_gb = (fit[0] + fit[1] * ref_proj["instances"]) / 1024
        print(f"{'reference (original)':<22} {1:>8} {ref_proj['core_hours']:>11.1f} {ref_proj['wall_hours']:>19.2f}"
              f"   (one process only; {ref_per_instance * 1e6:.1f} us per instance, whole process)")
        print(f"reference peak RSS: " + ", ".join(f"{m}x {ref[m]['peak_rss_mb']:.0f} MB ({ref[m]['instances']:,} "
                                                   f"instances)" for m in sorted(ref))
              + f"; {fit[1] * 1024:.2f} kB per instance -> about {mem_gb:,.0f} GB for the projected corpus")
        figures.update({"reference": {str(m): {"instances": r["instances"], "cpu_s": _r(r["cpu_s"], 2),
                                               "wall_s": _r(r["wall_s"], 2), "peak_rss_mb": _r(r["peak_rss_mb"])}
                                      for m, r in ref.items()},
                        "reference_cpu_us_per_instance": _r(ref_per_instance * 1e6, 2),
                        "reference_projection": {k: _r(v, 2) for k, v in ref_proj.items()},
                        "reference_kb_per_instance": _r(fit[1] * 1024, 3),
                        "reference_projected_memory_gb": _r(mem_gb)})
    return figures


# ---------------------------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=shared_data.path("corpus", "pretrain.txt.gz"))
    parser.add_argument("--vocab", default=shared_data.path("vocab", "bert_uncased_vocab.txt"))
    parser.add_argument("--base_documents", type=int, default=400, help="the base: the first N documents (0: all)")
    parser.add_argument("--dupe_factor", type=int, default=1)
    parser.add_argument("--multiples", type=_ints, default=[1, 4, 16])
    parser.add_argument("--workers", type=_ints, default=[1, 2, 4])
    parser.add_argument("--files_per_copy", type=int, default=4, help="files per copy of the base (partitions)")
    parser.add_argument("--skip_reference", action="store_true")
    parser.add_argument("--tf_threads", type=int, default=1,
                        help="TF's intra- and inter-op threads per process (0: TF's default, one per core)")
    parser.add_argument("--project_words", type=float, default=2.5e9)
    parser.add_argument("--project_dupe_factor", type=int, default=10)
    parser.add_argument("--project_workers", type=_ints, default=[1, 16, 64, 256])
    args = parser.parse_args(argv)
    global TF_THREADS
    TF_THREADS = args.tf_threads
    args.multiples, args.workers = sorted(args.multiples), sorted(args.workers)
    started = time.perf_counter()
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)

    with tempfile.TemporaryDirectory(prefix="scaling_bench_") as tmp:
        documents = read_documents(args.corpus, args.base_documents or None)
        words = sum(len(line.split()) for d in documents for line in d)
        sentences = sum(len(d) for d in documents)
        print(f"base: the first {len(documents):,} documents of {args.corpus} ({sentences:,} sentences, "
              f"{words:,} words) in {args.files_per_copy} files; dupe_factor {args.dupe_factor}; multiples "
              f"{args.multiples}; workers {args.workers}; TF threads per process {args.tf_threads or 'default'}; "
              f"CPU {cpu}, {os.cpu_count()} cores", flush=True)
        patterns = make_corpora(documents, args.multiples, args.files_per_copy, tmp)
        empty = make_empty_corpus(args.files_per_copy, tmp)
        runs, empties = {}, {}
        for w in args.workers:
            empties[w] = run_job(empty, args.files_per_copy, w, args, tmp, f"empty_{w}w")
            for m in args.multiples:
                runs[(w, m)] = run_job(patterns[m], m * args.files_per_copy, w, args, tmp, f"{m}x_{w}w")
        ref = {}
        if not args.skip_reference:
            for m in (1, 4):
                path = os.path.join(tmp, f"reference_{m}x.txt.gz")
                write_corpus(path, documents, copies=m)
                ref[m] = run_reference(path, args.vocab, args.dupe_factor, tmp, f"{m}x")
        figures = report(runs, empties, ref, args, words)
    figures.update({"cpu": cpu, "cores": os.cpu_count(), "tf_threads": args.tf_threads,
                    "base_documents": len(documents), "base_words": words,
                    "base_sentences": sentences, "dupe_factor": args.dupe_factor, "files_per_copy": args.files_per_copy,
                    "benchmark_wall_s": _r(time.perf_counter() - started)})
    print(f"\nbenchmark wall time {figures['benchmark_wall_s']:.0f} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
