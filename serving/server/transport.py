"""The REST server's HTTP/1.1 layer: a fixed pool of worker threads, read and idle timeouts, and request
framing that answers every malformed request with a JSON 400 (never a 500, a hang or a dropped connection).

- `RestHttpServer` accepts on one thread and hands each connection to one of `num_threads` workers through
  a queue of at most `4 * num_threads` connections; past that a connection gets 503 at once.
- A worker reads one request at a time; the socket read timeout (`read_timeout_s`) bounds a slow or stuck
  client (request line, headers, body). Between keep-alive requests it waits at most `read_timeout_s`, and
  closes a connection idle for `IDLE_GRACE_S` (1 s) when other connections are queued, so idle clients never
  starve others (a client sending its next request at once keeps its connection).
- Framing: Content-Length must be one decimal number; a body shorter than it (the client closed, or sent
  nothing more within the timeout) is "truncated"; chunked bodies are checked the same way; any other
  Transfer-Encoding is refused; bodies over `max_request_bytes` get 413. Each such answer closes the
  connection. Protocol errors found by `http.server` (bad request line, oversized headers) are JSON too.

`app(method, path, body) -> (status, JSON bytes)` is the application (`http.RestApi.handle`); it never raises.
"""

import dataclasses
import http.server
import json
import logging
import queue
import select
import socketserver
import threading
import time
import urllib.parse

log = logging.getLogger(__name__)
IDLE_SLICE_S = 0.05  # how often an idle keep-alive connection looks for queued connections
IDLE_GRACE_S = 1.0  # idle this long while others wait, a keep-alive connection gives its worker up


@dataclasses.dataclass(frozen=True)
class TransportLimits:
    """Args:
      num_threads: worker threads, so requests handled at once.
      read_timeout_s: the longest wait for a client's next bytes (and for its next keep-alive request).
      max_request_bytes: larger bodies get 413.
    """

    num_threads: int = 64
    read_timeout_s: float = 30.0
    max_request_bytes: int = 64 << 20


class FramingError(Exception):
    """A request whose bytes cannot be read as HTTP: answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _json(message: str) -> bytes:
    return json.dumps({"error": message}, separators=(",", ":")).encode("utf-8")


_BUSY_BODY = _json("Server busy: every worker and queued place is taken; try again")
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; every response is JSON with a Content-Length."""

    protocol_version = "HTTP/1.1"
    server_version = "serving.server"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def setup(self) -> None:
        self.timeout = self.server.limits.read_timeout_s  # StreamRequestHandler sets it on the socket
        super().setup()

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection and self._next_request_arrives():
            self.handle_one_request()

    def _next_request_arrives(self) -> bool:
        waited = 0.0
        while waited < self.server.limits.read_timeout_s:
            readable, _, _ = select.select([self.connection], [], [], IDLE_SLICE_S)
            if readable:
                return True
            waited += IDLE_SLICE_S
            if self.server.closing or (waited >= IDLE_GRACE_S and self.server.waiting()):
                return False  # the server stops, or others are queued: this idle connection steps aside
        return False

    def _serve(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        try:
            body = self._read_body()
        except FramingError as e:
            self.close_connection = True
            return self._reply(e.status, _json(e.message))
        except TimeoutError:
            self.close_connection = True
            return self._reply(400, _json(f"Request body incomplete: nothing more arrived within "
                                          f"{self.server.limits.read_timeout_s:g} s"))
        self._reply(*self.server.app(self.command, path, body))

    def _reply(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _read_body(self) -> bytes:
        encoding = self.headers.get("Transfer-Encoding", "").strip().lower()
        if encoding == "chunked":
            return self._read_chunked()
        if encoding not in ("", "identity"):
            raise FramingError(400, f"Transfer-Encoding {encoding!r} is not supported (use chunked or "
                                    f"Content-Length)")
        lengths = {v.strip() for v in self.headers.get_all("Content-Length", [])}
        if not lengths:
            return b""
        text = lengths.pop()
        if lengths or not text.isdigit() or not text.isascii():
            raise FramingError(400, f"Bad Content-Length header: {self.headers.get('Content-Length')!r} "
                                    f"(one decimal number of bytes expected)")
        length = int(text)
        self._check_size(length, str(length))
        body = self.rfile.read(length)
        if len(body) < length:
            raise FramingError(400, f"Request body truncated: got {len(body)} of the {length} bytes of its "
                                    f"Content-Length")
        return body

    def _read_chunked(self) -> bytes:
        chunks, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            size_text = line.split(b";")[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                size = -1
            if not line.endswith(b"\n") or size < 0 or not size_text.isalnum():
                raise FramingError(400, f"Bad chunk size line in a chunked body: {line[:40]!r}")
            total += size
            self._check_size(total, f"more than {total - 1}")
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                raise FramingError(400, f"Request body truncated: a chunk of {size} bytes ended after "
                                        f"{len(chunk)}")
            chunks.append(chunk)

    def _check_size(self, size: int, text: str) -> None:
        limit = self.server.limits.max_request_bytes
        if size > limit:
            raise FramingError(413, f"Request body of {text} bytes exceeds the limit of {limit} bytes "
                                    f"(--max_request_bytes)")

    def send_error(self, code, message=None, explain=None):
        """http.server's protocol errors (bad request line, headers too long), as JSON."""
        self.close_connection = True
        self.command = getattr(self, "command", None) or "GET"
        self.request_version = "HTTP/1.1"  # a garbled request line leaves "HTTP/0.9": no status line at all
        self._reply(code, _json(f"{message or self.responses.get(code, ('Error',))[0]}"))

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _serve

    def log_message(self, format, *args):  # noqa: A002  (BaseHTTPRequestHandler's signature)
        log.debug("%s %s", self.address_string(), format % args)


class RestHttpServer(socketserver.TCPServer):
    """Accepts connections and serves them on a fixed pool of workers (see the module docstring).

    Args:
      address: (host, port); port 0 picks a free one (`server_address[1]`).
      app: `app(method, path, body) -> (status, JSON bytes)`, never raising (`http.RestApi.handle`).
      limits: `TransportLimits`.
    """

    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog

    def __init__(self, address, app, limits: TransportLimits = TransportLimits()):
        self.app, self.limits, self.closing = app, limits, False
        self._connections: queue.Queue = queue.Queue(maxsize=4 * limits.num_threads)
        self._workers: list[threading.Thread] = []  # (a failed bind calls server_close from __init__)
        super().__init__(address, _Handler)
        self._workers = [threading.Thread(target=self._work, name=f"rest-worker-{i}", daemon=True)
                         for i in range(limits.num_threads)]
        for worker in self._workers:
            worker.start()

    def waiting(self) -> bool:
        return not self._connections.empty()

    def process_request(self, request, client_address) -> None:  # on the accepting thread
        try:
            self._connections.put_nowait((request, client_address))
        except queue.Full:
            try:
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)

    def _work(self) -> None:
        while True:
            item = self._connections.get()
            if item is None:
                return
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # a client that vanished mid-answer; the next connection is served as usual
                log.debug("connection from %s ended with an error", client_address, exc_info=True)
            finally:
                self.shutdown_request(request)

    def server_close(self) -> None:
        """Stops accepting; idle keep-alive connections end; a worker busy with a slow client is left to
        its read timeout (daemon threads)."""
        self.closing = True
        super().server_close()
        for _ in self._workers:
            try:
                self._connections.put_nowait(None)
            except queue.Full:
                break
        deadline = time.monotonic() + 2.0
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
