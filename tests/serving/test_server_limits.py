"""The local server's bounds (issue 18): the work of one request (instances, generation length), HTTP
framing answered with a JSON 400, a fixed worker pool with read/idle timeouts, flags checked before any
model loads; and the good behaviour already there (model names cannot reach outside the base paths, the
server binds to 127.0.0.1)."""

import gzip
import json
import logging
import shutil
import socket
import threading
import time
import urllib.request
import zlib

import numpy as np
import pytest

from serving.client import RestClient, ServerError
from serving.server import http as server_http
from serving.server.generation import check_generation_inputs
from serving.server.http import ModelServer, ServerOptions
from serving.server.manager import ModelManager
from serving.server.servable import ServingError
from serving.server.model_config import ModelEntry, write_model_config_list
from tests.fixtures.serving import save_classifier, save_text_model

# rest_api_timeout_in_ms: long, so that only the test about it meets a read timeout. At 0.5 s, this process not
# being run for 0.5 s between two sends (a loaded machine) would turn the answer into "nothing more arrived":
# between a truncated body and its end of stream, or between an Expect: 100-continue and its body.
LIMITS = dict(max_instances_per_request=4, max_new_tokens=8, rest_api_num_threads=2, rest_api_timeout_in_ms=120_000,
              max_request_bytes=4096)
WAIT_S = 120  # socket timeouts and waits: bound a hang only


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    save_text_model(str(root / "text" / "1"))
    save_classifier(str(root / "cls" / "1"))
    return root


@pytest.fixture(scope="module")
def server(base):
    models = [ModelEntry("text", str(base / "text")), ModelEntry("cls", str(base / "cls"))]
    with ModelServer(models, ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, **LIMITS)) as running:
        yield running


def raw(server, data: bytes, shut_write: bool = True) -> tuple[int, dict]:
    """Sends raw bytes on a new connection -> (status, JSON body) of the answer."""
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=WAIT_S) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert b"application/json" in head, reply[:300]
    return int(head.split()[1]), json.loads(body)


def post(path: str, body: bytes, headers: str = "") -> bytes:
    headers = headers or f"Content-Length: {len(body)}\r\n"
    return f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


def test_one_request_cannot_ask_for_unbounded_work(server):
    client = RestClient(server.url)
    assert len(client.predict("text", instances=["a"] * 4, signature_name="length")["predictions"]) == 4
    cases = [
        (lambda: client.predict("text", instances=["a"] * 5, signature_name="length"),
         "Request has 5 instances; this server takes at most 4 per request (--max_instances_per_request)"),
        (lambda: client.predict("text", inputs=["a"] * 5, signature_name="length"), "Request has 5 inputs"),
        (lambda: client.predict("text", inputs={"ids": [[1, 2, 3]] * 6, "weight": [1.0] * 6},
                                signature_name="score"), "Request has 6 rows of input '"),
        (lambda: client.classify("cls", [{"x": 0.5}] * 5, signature_name="classify_x"), "Request has 5 examples"),
        (lambda: client.predict("text", inputs={"prompt": ["a"], "max_new_tokens": 9}, signature_name="generate"),
         "max_new_tokens 9 exceeds this server's limit of 8 (--max_new_tokens)")]
    for call, message in cases:
        with pytest.raises(ServerError) as error:
            call()
        assert error.value.status == 400 and message in error.value.message
    assert client.predict("text", inputs={"prompt": ["a"], "max_new_tokens": 8}, signature_name="generate") == {
        "outputs": ["a" + " x" * 8]}


FRAMING = [
    (post("/v1/models/text:predict", b'{"instances":["a"]}', "Content-Length: abc\r\n"), 400, "Bad Content-Length"),
    (post("/v1/models/text:predict", b'{"instances":["a"]}', "Content-Length: -5\r\n"), 400, "Bad Content-Length"),
    (post("/v1/models/text:predict", b"{}", "Content-Length: 2\r\nContent-Length: 3\r\n"), 400, "Bad Content-Length"),
    (post("/v1/models/text:predict", b'{"instances"', "Content-Length: 100\r\n"), 400,
     "Request body truncated: got 12 of the 100 bytes"),
    (post("/v1/models/text:predict", b"zz\r\n{}\r\n0\r\n\r\n", "Transfer-Encoding: chunked\r\n"), 400,
     "Bad chunk size line"),
    (post("/v1/models/text:predict", b"10\r\n{}", "Transfer-Encoding: chunked\r\n"), 400, "Request body truncated"),
    (post("/v1/models/text:predict", b"{}", "Transfer-Encoding: gzip\r\n"), 400,
     "Unsupported Transfer-Encoding (Only Transfer-Encoding: chunked is supported)"),
    (post("/v1/models/text:predict", b"", "Content-Length: 5000\r\n"), 413, "exceeds the limit of 4096 bytes"),
    # answered from the headers while the body is still coming: read and dropped, the answer arrives whole
    (post("/v1/models/text:predict", b"x" * 300_000), 413, "Request body of 300000 bytes exceeds the limit"),
    (b"GARBAGE\r\n\r\n", 400, "Bad request"),
    (post("/v1/models/text:predict", b"[" * 65 + b"]" * 65), 400, "nested more than 64 levels"),
    (post("/v1/models/text:predict", b"[" * 2000), 400, "nested more than 64 levels"),
    (post("/v1/models/text:predict", b'"text"'), 400, "Is not object"),
    (post("/v1/models/text:predict", b'{"instances":["\\ud800"]}'), 400, "is not valid UTF-8 text"),
    (post("/v1/models/text:predict", b'{"instances":[{"text":{"a":1}}]}'), 400, "not formatted correctly for base64 data"),
    (post("/v1/models/text:predict", b'{"signature_name":"score","instances":[{"ids":[1,2,3],"weight":"1"}]}'),
     400, "Type: String is not of expected type: float"),
    (post("/v1/models/cls:classify", b'{"examples":[{"x":-9223372036854775809}]}'), 400, "below the int64 range"),
    (post("/v1/models/cls:classify", b'{"examples":[{"x":[[1]]}]}'), 400, "unexpected JSON type: Array"),
]


@pytest.mark.parametrize("request_bytes, status, message", FRAMING)
def test_malformed_requests_get_a_json_400_never_a_500(server, request_bytes, status, message):
    got, body = raw(server, request_bytes)
    assert got == status and message in body["error"], body
    assert "\n" not in body["error"]


def test_a_stalled_body_is_answered_after_the_read_timeout(base):
    """The client sends half its body and keeps the connection open: 400 after --rest_api_timeout_in_ms."""
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_timeout_in_ms=500)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        status, body = raw(running, post("/v1/models/text:predict", b'{"inst', "Content-Length: 100\r\n"),
                           shut_write=False)
        assert status == 400 and "nothing more arrived within 0.5 s" in body["error"]
        assert RestClient(running.url).predict("text", instances=["a"], signature_name="length") == {
            "predictions": [1]}


def read_answer(sock: socket.socket) -> tuple[int, dict]:
    """Reads one closing answer -> (status, JSON body)."""
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_idle_stuck_and_slow_sockets_hold_no_worker(base):
    """One worker, long timeouts: sockets that send nothing, stop in their headers or stop in their body
    hold no worker, so a normal client is answered at once; an idle keep-alive connection stays usable."""
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_num_threads=1,
                            rest_api_timeout_in_ms=120_000, rest_api_header_timeout_in_ms=120_000)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        port = running.rest_port
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        stuck = socket.create_connection(("127.0.0.1", port))
        stuck.sendall(b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(post("/v1/models/text:predict", b'{"instances"', "Content-Length: 100\r\n"))
        client = RestClient(running.url, timeout=WAIT_S)
        for _ in range(3):
            assert client.predict("text", instances=["a b c"], signature_name="length") == {"predictions": [3]}
        for sock in silent + [stuck, slow]:
            sock.close()


def test_headers_have_their_own_short_timeout(base):
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_timeout_in_ms=120_000,
                            rest_api_header_timeout_in_ms=300)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        status, body = answer_to_headers_that_stop(running.rest_port)
        assert status == 408 and "did not arrive within 0.3 s (--rest_api_header_timeout_in_ms)" in body["error"]
        with socket.create_connection(("127.0.0.1", running.rest_port), timeout=WAIT_S) as silent:
            assert silent.recv(10) == b""  # sent nothing: closed after the header timeout, no answer


def answer_to_headers_that_stop(port: int) -> tuple[int, dict]:
    """The answer to a connection that sends the start of its headers and stops. The header timeout counts from
    the accept: a connection whose first bytes come later than that (this process not run in between, on a
    loaded machine) is closed as a silent one, with no answer; it is tried again then."""
    deadline = time.monotonic() + WAIT_S
    while True:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as stuck:
            try:
                stuck.sendall(b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\n")
                if stuck.recv(1, socket.MSG_PEEK):
                    return read_answer(stuck)
            except (BrokenPipeError, ConnectionResetError):
                pass
        assert time.monotonic() < deadline, "every connection was closed before its bytes were read"


def test_connection_caps_refuse_at_once(base):
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_max_connections_per_client=3,
                            rest_api_timeout_in_ms=120_000, rest_api_header_timeout_in_ms=120_000)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        held = [socket.create_connection(("127.0.0.1", running.rest_port)) for _ in range(3)]
        wait_until(lambda: running._http.reactor.open_connections == 3)
        with socket.create_connection(("127.0.0.1", running.rest_port), timeout=WAIT_S) as late:
            status, body = read_answer(late)  # answered before it sends anything
        assert status == 503 and "at most 3 connections from 127.0.0.1" in body["error"]
        held.pop().close()
        wait_until(lambda: running._http.reactor.open_connections == 2)
        assert RestClient(running.url).predict("text", instances=["a"], signature_name="length") == {
            "predictions": [1]}
        for sock in held:
            sock.close()
    with pytest.raises(ValueError, match="--rest_api_max_connections must be in 1..100000"):
        ServerOptions(rest_api_max_connections=0)


def test_the_connection_cap_in_all_refuses_at_once(base):
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_max_connections=2,
                            rest_api_timeout_in_ms=120_000, rest_api_header_timeout_in_ms=120_000)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        held = [socket.create_connection(("127.0.0.1", running.rest_port)) for _ in range(2)]
        wait_until(lambda: running._http.reactor.open_connections == 2)
        with socket.create_connection(("127.0.0.1", running.rest_port), timeout=WAIT_S) as late:
            status, body = read_answer(late)
        assert status == 503 and "at most 2 connections in all (--rest_api_max_connections)" in body["error"]
        held.pop().close()
        wait_until(lambda: running._http.reactor.open_connections == 1)
        assert RestClient(running.url).predict("text", instances=["a"], signature_name="length") == {
            "predictions": [1]}
        held[0].close()


LENGTH_OF_A = b'{"signature_name":"length","instances":["a"]}'


def test_a_full_queue_is_answered_503_and_the_queued_are_served(base):
    """One worker held by a client that does not read an 8 MB answer; four whole requests fill the queue
    (4 x --rest_api_num_threads); a fifth gets 503 at once. Once that client goes, the four are served."""
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_num_threads=1,
                            rest_api_timeout_in_ms=120_000)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        blocker = socket.socket()
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        blocker.connect(("127.0.0.1", running.rest_port))
        blocker.sendall(post("/v1/models/text:predict", json.dumps({"instances": ["x" * 8_000_000]}).encode()))
        http_server = running._http  # the blocker read whole, handed on, and taken by the worker:
        wait_until(lambda: http_server.budget.used > 0 and not http_server.reactor._watched
                   and http_server._requests.qsize() == 0)
        queued = []
        for _ in range(4):
            queued.append(socket.create_connection(("127.0.0.1", running.rest_port), timeout=WAIT_S))
            queued[-1].sendall(post("/v1/models/text:predict", LENGTH_OF_A,
                                    f"Content-Length: {len(LENGTH_OF_A)}\r\nConnection: close\r\n"))
        wait_until(lambda: running._http._requests.qsize() == 4)
        status, body = raw(running, post("/v1/models/text:predict", b'{"instances":["a"]}'))
        assert status == 503 and body == {"error": "Server busy: every worker and queued place is taken; try again"}
        blocker.close()
        for sock in queued:
            assert read_answer(sock) == (200, {"predictions": [1]})
            sock.close()


def wait_until(condition, seconds: float = WAIT_S) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_expect_100_continue_over_the_limit_gets_413_not_100(server):
    request = post("/v1/models/text:predict", b"", "Content-Length: 70000000\r\nExpect: 100-continue\r\n")
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=WAIT_S) as sock:
        sock.sendall(request)
        status, body = read_answer(sock)
    assert status == 413 and "70000000 bytes exceeds the limit of 4096" in body["error"]
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=WAIT_S) as sock:
        body = b'{"signature_name":"length","instances":["a b"]}'
        sock.sendall(post("/v1/models/text:predict", b"", f"Content-Length: {len(body)}\r\n"
                                                            f"Expect: 100-continue\r\nConnection: close\r\n"))
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert read_answer(sock) == (200, {"predictions": [2]})


def test_gzip_bodies_are_decompressed_within_the_limit(server):
    body = b'{"signature_name":"length","instances":["a b c"]}'
    cases = [(gzip.compress(body), "gzip", 200, None), (zlib.compress(body), "deflate", 200, None),
             (gzip.compress(b" " * 5000), "gzip", 413, "(decompressed) bytes exceeds the limit of 4096"),
             (b"not gzip", "gzip", 400, "Request body is not valid gzip data"),
             (gzip.compress(body)[:-10], "gzip", 400, "ends before the stream does"),
             (body, "br", 400, "Content-Encoding 'br' is not supported")]
    for data, encoding, status, message in cases:
        got, answer = raw(server, post("/v1/models/text:predict", data, f"Content-Length: {len(data)}\r\n"
                                                                          f"Content-Encoding: {encoding}\r\n"))
        assert got == status and (message in answer["error"] if message else answer == {"predictions": [3]})


def test_bodies_in_flight_are_bounded(base):
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_max_inflight_bytes=1000,
                            rest_api_timeout_in_ms=120_000)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        holder = socket.create_connection(("127.0.0.1", running.rest_port))
        holder.sendall(post("/v1/models/text:predict", b"{", "Content-Length: 800\r\n"))  # 800 reserved
        wait_until(lambda: running._http.budget.used == 800)
        status, body = raw(running, post("/v1/models/text:predict", b"x" * 300))
        assert status == 503 and "--rest_api_max_inflight_bytes" in body["error"]
        holder.close()
        wait_until(lambda: running._http.budget.used == 0)
        assert RestClient(running.url).predict("text", instances=["a"], signature_name="length") == {
            "predictions": [1]}


def chunked_head(port: int, body: bytes) -> socket.socket:
    """A connection that sends a chunked predict's head and one chunk of `body`, and keeps its side open."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.sendall(post("/v1/models/text:predict", b"%x\r\n" % len(body) + body + b"\r\n",
                      "Transfer-Encoding: chunked\r\n"))
    return sock


def test_chunked_bodies_count_against_the_budget_from_their_first_byte(base):
    """Issue 57: a chunked body was reserved only once whole, so bodies in transit counted nowhere (ten held
    open mid-body took 4.5x the budget). Now each piece is reserved as it arrives: the connection whose piece
    passes the budget gets 503 and is closed, and closing the others mid-body gives their bytes back."""
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0, rest_api_max_inflight_bytes=100_000,
                            rest_api_timeout_in_ms=120_000)
    with ModelServer([ModelEntry("text", str(base / "text"))], options) as running:
        budget, held = running._http.budget, []
        for count in (1, 2):
            held.append(chunked_head(running.rest_port, b"x" * 40_000))
            wait_until(lambda: budget.used == 40_000 * count)
        with chunked_head(running.rest_port, b"x" * 40_000) as over:
            status, body = read_answer(over)
        assert status == 503 and body["error"].startswith("Server busy") and \
            "(--rest_api_max_inflight_bytes)" in body["error"], body
        assert budget.used == 80_000
        for sock in held:
            sock.close()
        wait_until(lambda: budget.used == 0 and running._http.reactor.open_connections == 0)
        assert RestClient(running.url).predict("text", instances=["a"], signature_name="length") == {
            "predictions": [1]}


def test_model_names_cannot_reach_outside_the_base_paths(server):
    for path in ("/v1/models/..%2F..%2Fetc", "/v1/models/%2E%2E", "/v1/models/text%2F..%2Fcls"):
        request = urllib.request.Request(server.url + path)
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=WAIT_S)
        assert error.value.code == 404 and "Could not find any versions of model" in json.loads(
            error.value.read())["error"]
    status, body = raw(server, post("/v1/models/..%2Ftext:predict", b'{"instances":["a"]}'))
    assert status == 404 and body == {"error": "Servable not found for request: Latest(../text)"}
    assert server._http.server_address[0] == "127.0.0.1"


@pytest.mark.parametrize("field, value, message", [
    ("rest_api_port", 70000, "--rest_api_port must be in 0..65535, got 70000"),
    ("grpc_port", -1, "--grpc_port must be in 0..65535"),
    ("rest_api_num_threads", 0, "--rest_api_num_threads must be in 1..1024, got 0"),
    ("rest_api_timeout_in_ms", 0, "--rest_api_timeout_in_ms must be in 1..3600000"),
    ("max_request_bytes", 0, "--max_request_bytes must be in 1..2147483647"),
    ("max_instances_per_request", 0, "--max_instances_per_request must be in 1..1000000"),
    ("max_new_tokens", -3, "--max_new_tokens must be in 1..1000000"),
    ("file_system_poll_wait_seconds", -1.0, "--file_system_poll_wait_seconds must be in 0..86400"),
])
def test_options_out_of_range_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        ServerOptions(**{field: value})


def test_the_cli_checks_every_flag_before_any_model_loads(base, tmp_path, capsys):
    config = str(tmp_path / "models.config")
    write_model_config_list(config, [("text", str(base / "text"))])
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    cases = [
        (["--model_base_path", str(tmp_path / "none")], "--model_base_path", "no such folder"),
        (["--model_base_path", config], "--model_base_path", "is a file, not a folder"),
        (["--model_config_file", str(tmp_path)], "--model_config_file", "is a folder"),
        (["--model_config_file", config, "--rest_api_port", "99999"], "--rest_api_port", "0..65535"),
        (["--model_config_file", config, "--rest_api_num_threads", "0"], "--rest_api_num_threads", "1..1024"),
        (["--model_config_file", config, "--max_new_tokens", "x"], "--max_new_tokens", "invalid int value"),
        (["--model_config_file", config, "--rest_api_port", str(busy.getsockname()[1]), "--port", "0"],
         "cannot listen on 127.0.0.1", "in use"),
    ]
    for argv, flag, problem in cases:
        try:
            code = server_http.main(argv)
        except SystemExit as e:  # argparse's own errors
            code = e.code
        err = capsys.readouterr().err.strip()
        assert code == 2 and flag in err and problem in err and len(err.splitlines()) == 1, (argv, err)
    busy.close()


def test_generation_inputs_out_of_range_are_refused(server):
    client = RestClient(server.url)
    with pytest.raises(ServerError) as error:
        client.predict("text", inputs={"prompt": ["a"], "max_new_tokens": -5}, signature_name="generate")
    assert error.value.status == 400 and "max_new_tokens -5 is out of range: it must be at least 1" in \
        error.value.message
    base = {"max_new_tokens": np.array(4, np.int32)}
    for extra, message in ((dict(top_k=np.array(-1, np.int32)), "top_k -1 is out of range"),
                           (dict(temperature=np.array(-0.5, np.float32)), "temperature -0.5 is out of range"),
                           (dict(temperature=np.array(np.nan, np.float32)), "temperature nan is out of range")):
        with pytest.raises(ServingError, match=message):
            check_generation_inputs({**base, **extra}, max_new_tokens=8)
    check_generation_inputs({**base, "top_k": np.array(0, np.int32), "temperature": np.array(0.0, np.float32)}, 8)


def test_a_missing_base_path_is_warned_about_once(tmp_path, caplog):
    manager = ModelManager([ModelEntry("gone", str(tmp_path / "missing"))])
    with caplog.at_level(logging.WARNING, logger="serving.server.manager"):
        for _ in range(5):
            manager.poll()
    warnings = [r.getMessage() for r in caplog.records if "No versions of servable gone" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].endswith("(no such folder)")


def test_a_failed_version_is_retried_when_its_folder_changes(base, tmp_path, caplog):
    version = tmp_path / "m" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"half written")
    manager = ModelManager([ModelEntry("m", str(tmp_path / "m"))])
    with caplog.at_level(logging.INFO, logger="serving.server.manager"):
        manager.poll()
        manager.poll()  # unchanged: not retried
    assert [s.state for s in manager.status("m")] == ["END"] and manager.status("m")[0].error_code != "OK"
    assert sum(r.getMessage().startswith("Loading servable") and "} from " in r.getMessage()
               for r in caplog.records) == 1
    shutil.rmtree(version)
    shutil.copytree(base / "text" / "1", version)  # the copy completes
    manager.poll()
    assert [(s.state, s.error_code) for s in manager.status("m")] == [("AVAILABLE", "OK")]


def test_pipelined_requests_are_answered_in_order(server):
    """Two requests sent in one write on a keep-alive connection: the event loop frames both."""
    first = post("/v1/models/text:predict", b'{"signature_name":"length","instances":["a"]}')
    second = post("/v1/models/text:predict", b'{"signature_name":"length","instances":["a b"]}',
                  "Content-Length: 47\r\nConnection: close\r\n")
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=WAIT_S) as sock:
        sock.sendall(first + second)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.count(b"HTTP/1.1 200") == 2
    assert reply.index(b'{"predictions":[1]}') < reply.index(b'{"predictions":[2]}')
