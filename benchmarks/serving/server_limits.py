"""The local server under hostile and heavy load on loopback: its answers, errors and peak memory.

    .venv/bin/python -m benchmarks.serving.server_limits [--clients 64] [--requests 20] [--big_instances 10000] \\
        [--seconds 120] [--stalled 2] [--idle 200] [--malformed 0] [--string_mb 0 --string_requests 3]

Starts `python -m serving.server` (127.0.0.1 only, default flags) on the small TF-Text model of
tests/fixtures/serving.py, then:
  1. one request of `--big_instances` short sentences (over --max_instances_per_request: a 400 is intended)
     and one of exactly the cap (1024: a 200), with their sizes;
  2. `--stalled` connections that send half a request line and stop, and `--idle` more held open during
     step 3: a third send nothing, a third send their headers and never a body, a third half a body;
     `--malformed` more that each send one of issue 46's heads (a space or tab before the colon of
     `Transfer-Encoding`, a header line with no colon before it; each with a Content-Length) and keep their
     side open: each must get one 400 and be closed; the answers they got and how many were closed;
  3. `--clients` threads on their own keep-alive connections, `--requests` requests each: every 5th a
     `--big_instances` request (400 intended), every 7th a malformed body (400 intended), the rest 8
     sentences (200 expected). The run stops after `--seconds` whatever is left.
  4. with `--string_mb M`: `--string_requests` concurrent requests of one M MB string each (the `length`
     signature), their answers and the rise of the server's peak RSS (VmHWM) over its RSS before them.
Latency of the normal (small) requests: p50, the slowest, and how many took over 1 s. The server's RSS is
sampled every 0.1 s (/proc); peak = the kernel's VmHWM at the end; its CPU seconds (user + system) over
step 3. Errors are answers
other than the intended ones and exceptions (should be 0). Prints one JSON object.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import ROOT, pid_stat, status_kb

WORDS = "the bank raised its rates a river ran by".split()
ISSUE_46_HEADS = [b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\n" + line + b"Content-Length: 2\r\n\r\n{}"
                  for line in (b"Transfer-Encoding : chunked\r\n", b"Transfer-Encoding\t: chunked\r\n",
                               b"X-No-Colon\r\nTransfer-Encoding: chunked\r\n")]


def sentences(count: int) -> list[str]:
    return [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(3)) for i in range(count)]


def start_server(base: str, log_path: str) -> tuple[subprocess.Popen, int]:
    command = [sys.executable, "-m", "serving.server", "--model_name", "text", "--model_base_path", base,
               "--rest_api_port", "0", "--port", "0", "--file_system_poll_wait_seconds", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True, cwd=ROOT)
    line = process.stdout.readline()
    if not line.startswith("Serving "):
        process.kill()
        raise SystemExit(f"the server did not start; see {log_path}")
    return process, int(line.split("REST ")[1].split()[0].rsplit(":", 1)[1])


def post(connection, body: bytes) -> tuple[int, bytes]:
    connection.request("POST", "/v1/models/text:predict", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


def malformed_heads(port: int, count: int) -> list[socket.socket]:
    """`count` connections, each sending one of issue 46's heads and keeping its side open."""
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    for i, sock in enumerate(socks):
        sock.sendall(ISSUE_46_HEADS[i % len(ISSUE_46_HEADS)])
    return socks


def answers_to_malformed(socks: list[socket.socket]) -> dict:
    """What the `malformed_heads` connections received: answers (status lines) in all, the most on one, and
    how many the server closed."""
    counts, closed = [], 0
    for sock in socks:
        sock.setblocking(False)
        count = 0
        try:
            while chunk := sock.recv(1 << 20):
                count += chunk.count(b"HTTP/1.1 ")
            closed += 1
        except (BlockingIOError, ConnectionResetError):
            pass
        counts.append(count)
        sock.close()
    return {"malformed": len(socks), "malformed_answers": sum(counts), "malformed_most_answers": max(counts),
            "malformed_closed": closed}


def big_strings(port: int, pid: int, megabytes: float, count: int) -> dict:
    """`count` concurrent requests of one `megabytes` MB string each -> answers and the peak RSS rise."""
    body = json.dumps({"signature_name": "length", "instances": ["a " * int(megabytes * 5e5)]}).encode()
    before, statuses = status_kb(pid)[0], []

    def send():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            statuses.append(post(connection, body)[0])
        except Exception as e:  # noqa: BLE001  (reported)
            statuses.append(type(e).__name__)
        connection.close()
    threads = [threading.Thread(target=send) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"request_mb": round(len(body) / 1e6, 1), "requests": count, "statuses": sorted(map(str, statuses)),
            "rss_before_mb": round(before / 1024, 1), "hwm_after_mb": round(status_kb(pid)[1] / 1024, 1),
            "peak_rise_mb": round((status_kb(pid)[1] - before) / 1024, 1)}


@quiet_command
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    parser.add_argument("--big_instances", type=int, default=10000)
    parser.add_argument("--seconds", type=float, default=120.0, help="stop the load after this long")
    parser.add_argument("--stalled", type=int, default=2)
    parser.add_argument("--idle", type=int, default=200, help="idle / slow sockets held open during the load")
    parser.add_argument("--malformed", type=int, default=0, help="connections sending issue 46's heads")
    parser.add_argument("--string_mb", type=float, default=0.0, help="size of each big-string request; 0: skip")
    parser.add_argument("--string_requests", type=int, default=3)
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="server_limits_")
    subprocess.run([sys.executable, "-c", "import sys; from tests.fixtures.serving import save_text_model; "
                    "save_text_model(sys.argv[1])", os.path.join(folder, "text", "1")], check=True, cwd=ROOT,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    process, port = start_server(os.path.join(folder, "text"), os.path.join(folder, "server.log"))
    samples, done = [], threading.Event()

    def sample():
        while not done.wait(0.1):
            samples.append(status_kb(process.pid)[0])
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = {"rss_start_mb": round(status_kb(process.pid)[0] / 1024, 1)}
    big = json.dumps({"signature_name": "length", "instances": sentences(args.big_instances)}).encode()
    at_cap = json.dumps({"signature_name": "length", "instances": sentences(1024)}).encode()
    single = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for name, body in (("big", big), ("at_cap", at_cap)):
        start = time.perf_counter()
        status, answer = post(single, body)
        result[name] = {"request_mb": round(len(body) / 1e6, 3), "status": status,
                        "response_mb": round(len(answer) / 1e6, 3), "seconds": round(time.perf_counter() - start, 3),
                        "error": json.loads(answer).get("error", "")[:100] if status != 200 else ""}
    single.close()
    stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.stalled)]
    for sock in stalled:
        sock.sendall(b"POST /v1/models/text:predi")
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.idle)]
    for i, sock in enumerate(idle):
        if i % 3 == 1:
            sock.sendall(b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        elif i % 3 == 2:
            sock.sendall(b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"in")
    stalled += idle
    malformed = malformed_heads(port, args.malformed)
    cpu_before = pid_stat(process.pid)[2]
    small = json.dumps({"signature_name": "length", "instances": sentences(8)}).encode()
    counts, errors, latencies, lock = {"ok": 0, "intended_400": 0}, [], [], threading.Lock()
    small_latencies = []
    deadline = time.time() + args.seconds

    def client(c: int):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for i in range(args.requests):
            if time.time() > deadline:
                break
            kind = "big" if i % 5 == 4 else "bad" if i % 7 == 6 else "small"
            body = {"big": big, "bad": b'{"instances": [1, {"x": 2}]', "small": small}[kind]
            start = time.perf_counter()
            try:
                status, answer = post(connection, body)
            except Exception as e:  # noqa: BLE001  (counted)
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                continue
            with lock:
                latencies.append(time.perf_counter() - start)
                if status == 200 and kind == "small":
                    counts["ok"] += 1
                    small_latencies.append(latencies[-1])
                elif status == 400 and kind != "small":
                    counts["intended_400"] += 1
                else:
                    errors.append(f"{kind}: {status} {answer[:100]!r}")
        connection.close()
    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    cpu_s = pid_stat(process.pid)[2] - cpu_before
    done.set()
    sampler.join()
    result.update(clients=args.clients, requests=sum(counts.values()) + len(errors), **counts,
                  errors=len(errors), first_errors=errors[:3], wall_s=round(wall, 2),
                  p50_ms=round(1000 * sorted(latencies)[len(latencies) // 2], 1) if latencies else None,
                  rss_peak_sampled_mb=round(max(samples, default=0) / 1024, 1),
                  rss_hwm_mb=round(status_kb(process.pid)[1] / 1024, 1),
                  rss_end_mb=round(status_kb(process.pid)[0] / 1024, 1), stalled=args.stalled, idle=args.idle,
                  small_max_ms=round(1000 * max(small_latencies, default=0), 1),
                  small_over_1s=sum(t > 1.0 for t in small_latencies), server_cpu_s=round(cpu_s, 2),
                  **answers_to_malformed(malformed))
    for sock in stalled:
        sock.close()
    if args.string_mb > 0:
        result["strings"] = big_strings(port, process.pid, args.string_mb, args.string_requests)
    process.terminate()
    process.wait(timeout=60)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
