"""Issue 57: the REST server's HTTP framing under hostile input, against `python -m serving.server` in a
process of its own, so that the RSS measured is the server's alone.

Each case is a connection the client keeps open. A request the server cannot frame gets at most one answer
(a JSON error with `Connection: close`), then the server closes the connection; a legal request (pipelined,
`Expect: 100-continue`, an obs-fold inside the headers, chunk extensions and trailers) is served; 300 seeded
mutations of legal requests get HTTP answers with JSON bodies, never a 5xx, and a closed connection. Beside
them, a client that never reads its answers, silent sockets, heads never finished and an idle keep-alive
connection are closed by the server; then chunked bodies held open mid-way pass the in-flight budget (one
503) and, closed by their clients mid-body, give their memory back. Another client's predicts are answered
throughout, and the server's RSS stays within RSS_RISE_MB of what it was after a first predict."""

import dataclasses
import http.client
import json
import random
import select
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import h11
import pytest

from benchmarks.lib.proc import status_kb
from tests.fixtures.serving import save_text_model, server_process

WAIT_S = 60  # the longest wait for an answer or a close: bounds a hang only
MAX_BODY = 4 << 20
BUDGET = 7 << 21  # 14 MiB: three held bodies of 4 MiB fit, a fourth passes it
FLAGS = ("--rest_api_header_timeout_in_ms", "3000", "--rest_api_timeout_in_ms", "10000", "--rest_api_num_threads",
         "4", "--max_request_bytes", str(MAX_BODY), "--rest_api_max_inflight_bytes", str(BUDGET))
# Measured with these flags: the peak 31-38 MB over the RSS after a first predict (most of it the model's work on
# the 200 KB predicts of the client that never reads); closing the held bodies gave back 12.5-12.8 MB of 12.6.
RSS_RISE_MB = 96

PREDICT = b'{"signature_name":"length","instances":["a b"]}'
LINE = b"POST /v1/models/text:predict HTTP/1.1\r\n"


def request(headers: bytes = b"", body: bytes = PREDICT, length: bool = True, close: bool = True) -> bytes:
    """A predict with `headers` (CRLF-ended lines) after Host, a Content-Length unless `length` is False."""
    head = LINE + b"Host: x\r\n" + headers
    head += b"Content-Length: %d\r\n" % len(body) if length else b""
    return head + (b"Connection: close\r\n" if close else b"") + b"\r\n" + body


def chunked(body: bytes, headers: bytes = b"") -> bytes:
    return request(b"Transfer-Encoding: chunked\r\n" + headers, body, length=False)


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    close: bool
    body: dict | None  # None: a 1xx, or a body that is not JSON


def answers_in(reply: bytes) -> list[Answer]:
    """Every response in `reply`, each read by h11 as a client reads it; AssertionError for bytes that are not
    a whole HTTP/1.1 response."""
    found = []
    while reply:
        client = h11.Connection(h11.CLIENT)
        client.send(h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "0")]))
        client.send(h11.EndOfMessage())
        client.receive_data(reply)
        try:
            event = client.next_event()
            while isinstance(event, h11.InformationalResponse):
                found.append(Answer(event.status_code, False, None))
                event = client.next_event()
            assert isinstance(event, h11.Response), f"not a whole response: {reply[:200]!r}"
            body = b""
            while not isinstance(part := client.next_event(), h11.EndOfMessage):
                assert part is not h11.NEED_DATA, f"a response cut short: {reply[:200]!r}"
                body += part.data
        except h11.RemoteProtocolError as e:
            raise AssertionError(f"not HTTP ({e}): {reply[:200]!r}") from None
        close = (b"connection", b"close") in list(event.headers)
        found.append(Answer(event.status_code, close, json.loads(body)))
        reply = client.trailing_data[0]
    return found


def exchange(port: int, parts: list[bytes], gap_s: float = 0.0, shut: bool = False) -> tuple[list[Answer], bool]:
    """Sends `parts` on a new connection (`gap_s` apart, stopping once an answer or the close arrives), keeps
    its side open unless `shut` -> (the answers, whether the server closed) within WAIT_S."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        for part in parts:
            if select.select([sock], [], [], gap_s)[0]:
                break
            try:
                sock.sendall(part)
            except OSError:  # closed by the server after its answer: read what came
                break
        if shut:
            sock.shutdown(socket.SHUT_WR)
        return read_until_closed(sock)


def read_until_closed(sock: socket.socket) -> tuple[list[Answer], bool]:
    reply, closed, deadline = b"", False, time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 16)
        except socket.timeout:
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        reply += chunk
    return answers_in(reply), closed


def expect_100_continue(port: int, head: bytes, body: bytes) -> tuple[list[Answer], bool]:
    """Sends `head`, waits for the interim `100 Continue`, then sends `body`."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(head)
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            interim += sock.recv(1)
        sock.sendall(body)
        answers, closed = read_until_closed(sock)
    return [Answer(int(interim.split()[1]), False, None)] + answers, closed


# --- the named cases: (name, parts, gap between parts, the statuses expected, a text of the last answer) -----
# A case "cannot be framed" when its last expected status is answered with `Connection: close` by the
# event loop; every case must end with the server closing the connection.

HUGE_CHUNK = chunked(b"") + b"ffffffffffffffff\r\n"  # the head, then a chunk of 2^64 - 1 bytes
NAMED = [
    ("a header line without a colon", [request(b"X-No-Colon\r\n")], 0, [400], "illegal header line"),
    ("a space before the colon", [LINE + b"Host: x\r\nContent-Length : 47\r\n\r\n" + PREDICT], 0, [400],
     "illegal header line"),
    ("a tab before the colon of Transfer-Encoding", [chunked(b"0\r\n\r\n").replace(b"g:", b"g\t:")], 0, [400],
     "illegal header line"),
    ("an obs-fold before any header", [LINE + b" X-Folded: 1\r\nHost: x\r\nContent-Length: 47\r\n\r\n" + PREDICT],
     0, [400], "Bad request"),
    ("Transfer-Encoding and Content-Length", [request(b"Transfer-Encoding: chunked\r\n")], 0, [400],
     "both Transfer-Encoding and Content-Length"),
    ("Transfer-Encoding: chunked, identity", [chunked(b"0\r\n\r\n").replace(b"chunked", b"chunked, identity")], 0,
     [400], "Unsupported Transfer-Encoding"),
    ("Transfer-Encoding: identity", [chunked(PREDICT).replace(b"chunked", b"identity")], 0, [400],
     "Unsupported Transfer-Encoding"),
    ("Transfer-Encoding twice", [chunked(b"0\r\n\r\n", b"Transfer-Encoding: chunked\r\n")], 0, [400],
     "Unsupported Transfer-Encoding"),
    ("a Content-Length of 20 digits", [request(b"", b"").replace(b"Length: 0", b"Length: " + b"9" * 20)], 0,
     [413], "exceeds the limit"),
    ("a Content-Length of 21 digits", [request(b"", b"").replace(b"Length: 0", b"Length: " + b"9" * 21)], 0,
     [400], "Bad Content-Length"),
    ("a Content-Length of 1e9", [request(b"", b"").replace(b"Length: 0", b"Length: 1e9")], 0, [400],
     "Bad Content-Length"),
    ("a Content-Length over --max_request_bytes", [request(b"", b"").replace(b"Length: 0", b"Length: 4194305")],
     0, [413], "exceeds the limit of 4194304"),
    ("a chunk size that is no hex", [chunked(b"zz\r\n{}\r\n0\r\n\r\n")], 0, [400], "Bad chunk size line"),
    ("a negative chunk size", [chunked(b"-2\r\n{}\r\n0\r\n\r\n")], 0, [400], "Bad chunk size line"),
    ("a chunk size with 0x", [chunked(b"0x2\r\n{}\r\n0\r\n\r\n")], 0, [400], "Bad chunk size line"),
    ("a chunk size with a space inside", [chunked(b"2 2\r\n{}\r\n0\r\n\r\n")], 0, [400], "Bad chunk size line"),
    ("an empty chunk size line", [chunked(b"\r\n{}\r\n0\r\n\r\n")], 0, [400], "Bad chunk size line"),
    ("a chunk size of 30 hex digits", [chunked(b"0" * 29 + b"2\r\n{}\r\n0\r\n\r\n")], 0, [400],
     "Bad chunk size line"),
    ("a chunk of 2^64 - 1 bytes", [HUGE_CHUNK, b"x" * (MAX_BODY + 1)], 0, [413], "exceeds the limit"),
    ("chunk data without its CRLF", [chunked(b"2\r\n{}XY0\r\n\r\n")], 0, [400], "Bad request"),
    ("a trailer without a colon", [chunked(b"2\r\n{}\r\n0\r\nX-Bad-Trailer\r\n\r\n")], 0, [400],
     "illegal header line"),
    ("a space before a trailer's colon", [chunked(b"2\r\n{}\r\n0\r\nX-T : 1\r\n\r\n")], 0, [400],
     "illegal header line"),
    ("a NUL byte in a trailer", [chunked(b"2\r\n{}\r\n0\r\nX-T: a\x00b\r\n\r\n")], 0, [400], "Bad request"),
    ("a chunk extension of 1 MB", [chunked(b"2;x=" + b"y" * (1 << 20) + b"\r\n{}\r\n0\r\n\r\n")], 0, [400],
     "Bad chunked body"),
    ("trailers of 1 MB", [chunked(b"2\r\n{}\r\n0\r\nX-T: " + b"y" * (1 << 20) + b"\r\n\r\n")], 0, [400],
     "Bad chunked body"),
    ("a header line of 1 MB", [request(b"X-Big: " + b"y" * (1 << 20) + b"\r\n")], 0, [431], "exceed 65536"),
    ("10,000 headers in 200 KB", [request(b"".join(b"X-Header-%05d: v\r\n" % i for i in range(10_000)))], 0,
     [431], "exceed 65536"),
    ("a TLS ClientHello", [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(64)) + b"\r\n\r\n"], 0,
     [400], "Bad request line"),
    ("a NUL byte in the target", [request().replace(b"text:predict", b"te\x00xt:predict")], 0, [400],
     "Bad request line"),
    ("HTTP/1.1 without Host", [request().replace(b"Host: x\r\n", b"")], 0, [400], "Host"),
    ("two Host headers", [request(b"Host: y\r\n")], 0, [400], "multiple Host"),
    ("a head sent one byte a second", [bytes([b]) for b in request()], 1.0, [408],
     "did not arrive within 3 s"),
    ("a predict, then a head without a colon, pipelined", [request(close=False) + request(b"X-No-Colon\r\n")],
     0, [200, 400], "illegal header line"),
    # legal, so served
    ("three predicts pipelined in one write", [request(body=b'{"signature_name":"length","instances":["a"]}',
                                                       close=False) + request(close=False)
                                               + request(body=b'{"signature_name":"length","instances":["a b c"]}')],
     0, [200, 200, 200], '{"predictions": [3]}'),
    ("a predict with Connection: close, then another pipelined", [request() + request()], 0, [200],
     '{"predictions": [2]}'),
    ("Expect: 100-continue with the body sent at once", [request(b"Expect: 100-continue\r\n")], 0, [100, 200],
     '{"predictions": [2]}'),
    ("a chunked body in HTTP/1.0", [chunked(b"%x\r\n" % len(PREDICT) + PREDICT + b"\r\n0\r\n\r\n").replace(
        b"HTTP/1.1\r\nHost: x\r\n", b"HTTP/1.0\r\n")], 0, [200], '{"predictions": [2]}'),
    ("an obs-fold inside the headers", [request(b"X-Folded: 1\r\n  2\r\n")], 0, [200], '{"predictions": [2]}'),
    ("chunk extensions and a trailer", [chunked(b"%x;ext=1\r\n" % len(PREDICT) + PREDICT + b"\r\n0;last\r\n"
                                                b"X-Trailer: 1\r\n\r\n")], 0, [200], '{"predictions": [2]}'),
    ("a chunked body in 1-byte chunks", [chunked(b"".join(b"1\r\n%c\r\n" % c for c in PREDICT) + b"0\r\n\r\n")],
     0, [200], '{"predictions": [2]}'),
    ("HTTP/1.0 without Host", [request().replace(b"HTTP/1.1\r\nHost: x\r\n", b"HTTP/1.0\r\n")], 0, [200],
     '{"predictions": [2]}'),
    ("10,000 headers in 50 KB", [request(b"".join(b"a:%d\r\n" % (i % 10) for i in range(10_000)))], 0, [200],
     '{"predictions": [2]}'),
    ("an absolute-form target", [request().replace(b"POST /", b"POST http://x/")], 0, [200],
     '{"predictions": [2]}'),
    ("an Upgrade: h2c request", [request(b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")], 0,
     [200], '{"predictions": [2]}'),
    ("CONNECT", [b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\nConnection: close\r\n\r\n"], 0, [404],
     "Not found"),
]


def check(name: str, answers: list[Answer], closed: bool, statuses: list[int], text: str) -> str:
    """'' when the connection got `statuses`, JSON bodies, `Connection: close` on the last answer only (the
    last holding `text`), and was closed; else what it got."""
    got = [a.status for a in answers]
    last = answers[-1] if answers else None
    if not closed or got != statuses or text not in json.dumps(last.body if last else None):
        return f"{name}: answers {got} (expected {statuses}), closed {closed}, last {last}"
    if [a.close for a in answers] != [False] * (len(answers) - 1) + [True] or any(
            a.status != 100 and not isinstance(a.body, dict) for a in answers):
        return f"{name}: not one `Connection: close`, on the last answer, or an answer that is not JSON: {answers}"
    return ""


# --- random mutations of legal requests, each sent with the client's side shut after it ---------------------

def mutated(rng: random.Random) -> bytes:
    data = bytearray(rng.choice([request(close=False), chunked(b"%x\r\n" % len(PREDICT) + PREDICT + b"\r\n0\r\n\r\n"),
                                 request(close=False) + request()]))
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        at = rng.randrange(len(data))
        what = rng.randrange(5)
        if what == 0:
            data[at] = rng.randrange(256)
        elif what == 1:
            data[at:at] = rng.choice([b"\r", b"\n", b"\r\n", b" ", b":", b"\x00", b"\t", b"0", b"\r\n\r\n"])
        elif what == 2:
            del data[at:at + rng.randint(1, 8)]
        elif what == 3:
            data = data[:at]
        else:
            end = data.find(b"\r\n", at)
            data[at:at] = data[at:end + 2] if end > 0 else b""
    return bytes(data)


def check_mutated(data: bytes, answers: list[Answer], closed: bool) -> str:
    """Any bytes: answers that are HTTP with JSON bodies, never a 5xx, a `Connection: close` only on the
    last, and the connection closed."""
    bad = [a for a in answers if a.status >= 500 or not isinstance(a.body, dict)]
    if not closed or bad or any(a.close for a in answers[:-1]):
        return f"{data[:120]!r}: answers {answers}, closed {closed}"
    return ""


# --- the holders ----------------------------------------------------------------------------------------------

def hold_chunked(port: int, size: int) -> socket.socket:
    """A connection that sends `size` bytes of a chunked body in 1 MiB chunks and keeps its side open."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    piece = b"100000\r\n" + b"x" * 0x100000 + b"\r\n"
    try:
        sock.sendall(chunked(b"") + piece * (size // 0x100000))
    except OSError:  # refused (503) and closed while sending
        pass
    return sock


def never_reading(port: int) -> tuple[socket.socket, threading.Thread, list]:
    """A connection with a small receive buffer that pipelines predicts whose answers echo 200 KB each, and
    never reads them; its sender thread ends when the server closes the connection (the error it met is
    put in the list) or after 40 requests (answers that fit the buffers: the list stays empty)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(WAIT_S)
    sock.connect(("127.0.0.1", port))
    body = json.dumps({"instances": ["w " * 100_000]}).encode()

    def send():
        try:
            for _ in range(40):
                sock.sendall(request(body=body, close=False))
        except OSError as e:
            errors.append(e)
    errors = []
    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sock, sender, errors


class Predicts:
    """Another client's predicts on one keep-alive connection, in a loop until `stop()`."""

    def __init__(self, port: int):
        self.port, self.answered, self.failures = port, 0, []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop)

    def one(self, connection) -> None:
        connection.request("POST", "/v1/models/text:predict", PREDICT)
        response = connection.getresponse()
        got = (response.status, response.read())
        if got != (200, b'{"predictions":[2]}'):
            self.failures.append(got)
        self.answered += 1

    def _loop(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT_S)
        while not self._done.is_set():
            try:
                self.one(connection)
            except (OSError, http.client.HTTPException) as e:
                self.failures.append(repr(e))
                connection.close()
            time.sleep(0.02)
        connection.close()

    def start(self) -> "Predicts":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("models") / "text"
    save_text_model(str(base / "1"))
    with server_process(str(base), *FLAGS) as (process, port):
        yield process, port


def rss_mb(pid: int) -> float:
    return status_kb(pid)[0] / 1024


def run_cases(port: int) -> list[str]:
    """The named cases, 300 mutated requests and two `Expect: 100-continue` exchanges, four connections at a
    time -> what failed."""
    rng = random.Random(57)
    with ThreadPoolExecutor(4) as pool:
        named = [pool.submit(exchange, port, parts, gap) for _, parts, gap, *_ in NAMED]
        randoms = [(data, pool.submit(exchange, port, [data], 0, True)) for data in (mutated(rng) for _ in range(300))]
        failures = [check(name, *future.result(), statuses, text)
                    for (name, _, _, statuses, text), future in zip(NAMED, named)]
        failures += [check_mutated(data, *future.result()) for data, future in randoms]
    expect = b"Expect: 100-continue\r\n"
    for name, head, body in (
            ("Expect: 100-continue", request(expect)[:-len(PREDICT)], PREDICT),
            ("Expect: 100-continue, chunked", chunked(b"", expect),
             b"%x\r\n%s\r\n0\r\n\r\n" % (len(PREDICT), PREDICT))):
        failures.append(check(name, *expect_100_continue(port, head, body), [100, 200], '{"predictions": [2]}'))
    return [f for f in failures if f]


def wait_until(condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.mark.slow
def test_hostile_framing_is_answered_once_and_closed_while_predicts_go_on(served):
    process, port = served
    predicts = Predicts(port)
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    predicts.one(idle)  # the model warmed up: the RSS from here is the baseline; then the connection is idle
    before = rss_mb(process.pid)
    predicts.start()
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
    heads = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
    for sock in heads:  # 60 KB of a head, never finished
        sock.sendall(LINE + b"Host: x\r\nX-Long: " + b"y" * 60_000)
    reader, sender, closed_by_server = never_reading(port)
    failures = run_cases(port)
    assert failures == [], f"{len(failures)} cases failed:\n" + "\n".join(failures[:10])
    sender.join(WAIT_S)  # it ends once the server closed the connection, a worker's write having timed out
    assert not sender.is_alive() and closed_by_server, "the client that never reads was never closed"
    reader.close()
    for sock in silent + [idle.sock]:  # closed after the header timeout, or idle after the read timeout
        assert read_until_closed(sock) == ([], True)
        sock.close()
    for sock in heads:
        answers, closed = read_until_closed(sock)
        assert closed and [(a.status, a.close) for a in answers] == [(408, True)], answers
        sock.close()

    # chunked bodies held open mid-way, 4 MiB each: the one that passes the budget gets 503 at once, the others
    # wait, predicts (47 bytes) are answered beside them; closed mid-body, they give their memory back
    settled = rss_mb(process.pid)
    bodies = [hold_chunked(port, MAX_BODY) for _ in range(4)]
    over = select.select(bodies, [], [], WAIT_S)[0]
    assert len(over) == 1 and read_until_closed(over[0])[0] == [Answer(503, True, {"error": (
        f"Server busy: request bodies of {BUDGET} bytes are being received or served "
        f"(--rest_api_max_inflight_bytes); try again")})]
    mark = predicts.answered
    wait_until(lambda: predicts.answered > mark + 2)
    held = rss_mb(process.pid)
    assert select.select(bodies, [], [], 0)[0] == over
    for sock in bodies:
        sock.close()
    bodies_mb = 3 * MAX_BODY / 2 ** 20
    deadline = time.monotonic() + WAIT_S
    while held - rss_mb(process.pid) < 0.75 * bodies_mb and time.monotonic() < deadline:
        time.sleep(0.1)
    given_back = held - rss_mb(process.pid)
    predicts.stop()
    peak = status_kb(process.pid)[1] / 1024
    print(f"RSS: {before:.1f} MB after a first predict, peak {peak:.1f} MB; {settled:.1f} MB before the held "
          f"bodies, {held:.1f} MB with them, {rss_mb(process.pid):.1f} MB once closed; {predicts.answered} predicts")
    assert predicts.failures == [] and mark > 0, (predicts.failures[:3], mark)
    assert peak - before < RSS_RISE_MB, f"the server's RSS rose from {before:.0f} to a peak of {peak:.0f} MB"
    assert given_back >= 0.75 * bodies_mb, f"closing {bodies_mb:.0f} MB of bodies gave back {given_back:.1f} MB"
