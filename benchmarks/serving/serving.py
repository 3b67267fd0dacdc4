"""Load test of the local TF Serving-compatible server against calling the same signature in-process.

    .venv/bin/python -m benchmarks.serving.serving [--clients 16] [--requests 3000] [--instances 1] \\
        [--model_base_path DIR --model_name NAME --text_file FILE]

Model: the latest version under `--model_base_path` (a real export with a text-in `serving_default`), or by
default the small TF-Text model of `tests/fixtures/serving.py` (whitespace tokenizer -> [B, 4] embedding,
lengths, strings) written to a temporary folder. Texts: the non-empty lines of `--text_file`, or built-in
sentences; request i sends `--instances` texts starting at line i.
Three runs of `--requests` requests from `--clients` threads on loopback, each after a short untimed warm-up:
  server           `python -m serving.server` in its own process (REST on 127.0.0.1), one keep-alive HTTP
                   connection per client thread, the JSON body RestClient sends (`{"instances": [...]}`), the
                   response parsed;
  server+batching  the same with `--enable_batching` (concurrent calls merged);
  in-process       the same threads calling the loaded signature function directly (`tf.constant` in, numpy out).
Latency is per request (send to parsed answer), p50/p99 over all requests; throughput = requests / wall time
of the run (client and server share the machine's cores); errors are non-200 answers and exceptions (must be
0). Prints a table and a final line holding a JSON object (`server_rps`, `inprocess_rps`, `rps_ratio`,
`server_p50_ms`, ...; ratio = server / in-process).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from commands.tf_startup import quiet_command  # noqa: E402
from benchmarks.lib.proc import ROOT  # noqa: E402
from serving.server.model_config import ModelEntry  # noqa: E402
from serving.server.manager import version_folders  # noqa: E402
from tests.fixtures.serving import save_text_model  # noqa: E402

SENTENCES = ["the quick brown fox jumps over the lazy dog", "a man a plan a canal panama",
             "to be or not to be that is the question", "serving models over rest is easy",
             "all happy families are alike each unhappy family is unhappy in its own way"]


def load_run(clients: int, requests: int, send) -> dict:
    """Runs `send(client, i)` for i in range(requests) over `clients` threads -> latencies, errors, rps."""
    latencies, errors, lock = [], [], threading.Lock()
    counter = iter(range(requests))

    def worker(client):
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            start = time.perf_counter()
            try:
                send(client, i)
            except Exception as e:  # noqa: BLE001  (counted: the benchmark reports errors, which must be 0)
                with lock:
                    errors.append(repr(e))
                continue
            with lock:
                latencies.append(time.perf_counter() - start)
    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ms = np.array(latencies) * 1000 if latencies else np.array([float("nan")])
    return {"requests": requests, "errors": len(errors), "first_error": errors[0] if errors else "",
            "rps": len(latencies) / wall, "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "wall_s": wall}


def batch_of(texts: list[str], i: int, instances: int) -> list[str]:
    return [texts[(i + k) % len(texts)] for k in range(instances)]


def start_server(entry: ModelEntry, batching: bool, log_path: str) -> tuple[subprocess.Popen, int]:
    """`python -m serving.server` in its own process (its own GIL, as deployed) -> (process, REST port)."""
    command = [sys.executable, "-m", "serving.server", "--model_name", entry.name, "--model_base_path",
               entry.base_path, "--rest_api_port", "0", "--port", "0", "--file_system_poll_wait_seconds", "0"]
    log = open(log_path, "w")
    process = subprocess.Popen(command + (["--enable_batching"] if batching else []), stdout=subprocess.PIPE,
                               stderr=log, text=True, cwd=ROOT)
    line = process.stdout.readline()  # the start-up line, once the model is loaded
    if not line.startswith("Serving "):
        process.kill()
        raise SystemExit(f"the server did not start; see {log_path}")
    return process, int(line.split("REST ")[1].split()[0].rsplit(":", 1)[1])


def server_run(entry: ModelEntry, texts, args, batching: bool, log_path: str) -> dict:
    process, port = start_server(entry, batching, log_path)
    try:
        connections = [http.client.HTTPConnection("127.0.0.1", port, timeout=60) for _ in range(args.clients)]
        path = f"/v1/models/{entry.name}:predict"

        def send(client, i):
            body = json.dumps({"instances": batch_of(texts, i, args.instances)}).encode()  # one send()
            connection = connections[client]
            connection.request("POST", path, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            if response.status != 200:
                raise RuntimeError(f"{response.status}: {answer}")
        load_run(args.clients, args.clients * 5, send)
        result = load_run(args.clients, args.requests, send)
        for connection in connections:
            connection.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    return result


def inprocess_run(path: str, texts, args) -> dict:
    function = tf.saved_model.load(path).signatures["serving_default"]
    name = next(iter(function.structured_input_signature[1]))

    def send(client, i):
        outputs = function(**{name: tf.constant(batch_of(texts, i, args.instances))})
        {k: v.numpy() for k, v in outputs.items()}
    load_run(args.clients, args.clients * 5, send)
    return load_run(args.clients, args.requests, send)


@quiet_command
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--instances", type=int, default=1, help="texts per request")
    parser.add_argument("--model_base_path", help="a real export's base path (default: a small test model)")
    parser.add_argument("--model_name", default="default")
    parser.add_argument("--text_file", help="texts, one per line (default: built-in sentences)")
    args = parser.parse_args(argv)
    texts = SENTENCES
    if args.text_file:
        with open(args.text_file, encoding="utf-8") as f:
            texts = [line.strip() for line in f if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        base = args.model_base_path or os.path.join(tmp, "text")
        if not args.model_base_path:
            save_text_model(os.path.join(base, "1"))
        versions = version_folders(os.path.abspath(base))
        if not versions:
            raise SystemExit(f"no version folder with a saved_model.pb under {base}")
        entry = ModelEntry(args.model_name, os.path.abspath(base))
        log_path = os.path.join(tmp, "server.log")
        runs = {"server": server_run(entry, texts, args, False, log_path),
                "server+batching": server_run(entry, texts, args, True, log_path),
                "in-process": inprocess_run(versions[max(versions)], texts, args)}
    print(f"{args.clients} clients, {args.requests} requests of {args.instances} text(s), model {base}")
    print(f"{'engine':<16} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6} {'ratio':>6}")
    inprocess = runs["in-process"]
    for engine, run in runs.items():
        print(f"{engine:<16} {run['rps']:>9.0f} {run['p50_ms']:>8.2f} {run['p99_ms']:>8.2f} {run['errors']:>6} "
              f"{run['rps'] / inprocess['rps']:>6.2f}")
        if run["errors"]:
            print(f"  first error: {run['first_error']}")
    summary = {"clients": args.clients, "requests": args.requests, "instances": args.instances}
    for engine, key in (("server", "server"), ("server+batching", "batching"), ("in-process", "inprocess")):
        summary.update({f"{key}_{k}": round(runs[engine][k], 3) for k in ("rps", "p50_ms", "p99_ms", "errors")})
    summary["rps_ratio"] = round(runs["server"]["rps"] / inprocess["rps"], 3)
    summary["batching_rps_ratio"] = round(runs["server+batching"]["rps"] / inprocess["rps"], 3)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
