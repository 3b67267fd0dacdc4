"""The REST server's HTTP/1.1 layer: an event loop that owns every socket, a fixed pool of workers that only
ever see complete requests, and request framing that answers every malformed request with a JSON 400.

- One reactor thread (`_Reactor`, a `selectors` loop) accepts connections and reads them without blocking.
  A connection goes to a worker only once a whole request has arrived (headers and a Content-Length or
  chunked body), so a client that sends nothing, stops in its headers or stops in its body holds no worker:
  idle and slow sockets cost a file descriptor and a buffer, never a thread.
- Timeouts: a request's headers (from its first byte, or from the accept for a new connection) must arrive
  within `header_timeout_s`; a body may pause at most `read_timeout_s` between bytes; a keep-alive
  connection idle for `read_timeout_s` is closed. A stalled body is answered 400 ("Request body
  incomplete"), stalled headers 408.
- Caps: at most `max_connections` open connections, and `max_connections_per_client` from one IP address;
  a connection over either gets 503 at once and is closed. Complete requests wait for a worker in a queue
  of at most `4 * num_threads`; past that, 503.
- Memory: request bodies held or being served at once total at most `max_inflight_bytes` (a body's bytes
  are reserved when its headers arrive, released when its answer is sent); a request that would go over
  gets 503 at once. A body over `max_request_bytes` gets 413 from its headers, before it is read, and an
  `Expect: 100-continue` request is answered 413 instead of `100 Continue`. A request with both
  Transfer-Encoding and Content-Length gets 400 and its connection is closed (RFC 9112 section 6.1: the
  bytes after it are never read as another request).
- `Content-Encoding: gzip` (and `deflate`) request bodies are decompressed, to at most `max_request_bytes`
  (413 beyond); any other Content-Encoding is refused with 400. Framing errors (a Content-Length that is
  not one decimal number, two Content-Lengths, a bad chunk, a Transfer-Encoding other than chunked, a
  body cut short, a garbled request line) get a JSON 400 and the connection is closed.

`app(method, path, body) -> (status, JSON bytes)` is the application (`http.RestApi.handle`); it never raises.
"""

import dataclasses
import http.server
import io
import json
import logging
import queue
import socket
import socketserver
import threading
import urllib.parse
import zlib

from serving.server.connections import Budget, Connection, Reactor, too_large

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TransportLimits:
    """Args:
      num_threads: worker threads, so requests handled at once.
      read_timeout_s: the longest pause within a body, and the longest keep-alive idle time.
      max_request_bytes: larger bodies (as sent, and once decompressed) get 413.
      header_timeout_s: the longest time from a request's first byte (a new connection: its accept) to the
        end of its headers; 408 and closed after it.
      max_connections: open connections in all; more are refused at once (503).
      max_connections_per_client: open connections from one IP address; more are refused at once (503).
      max_inflight_bytes: request bodies held or served at once, in bytes; a request over it gets 503.
    """

    num_threads: int = 64
    read_timeout_s: float = 30.0
    max_request_bytes: int = 64 << 20
    header_timeout_s: float = 10.0
    max_connections: int = 1024
    max_connections_per_client: int = 512
    max_inflight_bytes: int = 128 << 20


class FramingError(Exception):
    """A request whose bytes cannot be read as HTTP: answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _json(message: str) -> bytes:
    return json.dumps({"error": message}, separators=(",", ":")).encode("utf-8")


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; every response is JSON with a Content-Length."""

    protocol_version = "HTTP/1.1"
    server_version = "serving.server"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def __init__(self, connection: Connection, request: bytes, eof: bool, server):
        self._request, self._eof, self._reserved = request, eof, 0
        super().__init__(connection.sock, connection.address, server)

    def setup(self) -> None:
        """The request was read whole by the reactor; answers go straight to the socket."""
        self.connection = self.request
        self.rfile = io.BytesIO(self._request)
        self.wfile = socketserver._SocketWriter(self.connection)  # noqa: SLF001 (http.server's own writer)

    def handle(self) -> None:
        self.close_connection = True
        try:
            self.handle_one_request()
        finally:
            if self._reserved:
                self.server.budget.release(self._reserved)
        if self._eof:
            self.close_connection = True

    def finish(self) -> None:
        self.rfile.close()

    def handle_expect_100(self) -> bool:
        return True  # the reactor answered it: 100 Continue, or 413 for a body over the limit

    def _serve(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        try:
            body = self._decode(self._read_body())
        except FramingError as e:
            self.close_connection = True
            return self._reply(e.status, _json(e.message))
        self._reply(*self.server.app(self.command, path, body))

    def _decode(self, body: bytes) -> bytes:
        """Content-Encoding gzip / deflate -> the body, at most --max_request_bytes once decompressed."""
        encoding = self.headers.get("Content-Encoding", "").strip().lower()
        if encoding in ("", "identity"):
            return body
        if encoding not in ("gzip", "x-gzip", "deflate"):
            raise FramingError(400, f"Content-Encoding {encoding!r} is not supported (use gzip, deflate or none)")
        limit = self.server.limits.max_request_bytes
        decompressor = zlib.decompressobj(zlib.MAX_WBITS | (16 if "gzip" in encoding else 32))
        try:
            plain = decompressor.decompress(body, limit + 1)
        except zlib.error as e:
            raise FramingError(400, f"Request body is not valid {encoding} data: {e}") from None
        if len(plain) > limit:
            raise FramingError(413, too_large(f"more than {limit} (decompressed)", limit))
        if not decompressor.eof:
            raise FramingError(400, f"Request body is not valid {encoding} data: it ends before the stream does")
        if not self.server.budget.reserve(len(plain)):
            raise FramingError(503, "Server busy: request bodies in flight exceed --rest_api_max_inflight_bytes; "
                                    "try again")
        self._reserved = len(plain)
        return plain

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
        if encoding not in ("", "identity") and self.headers.get_all("Content-Length"):
            raise FramingError(400, "Request has both Transfer-Encoding and Content-Length headers; send one "
                                    "(RFC 9112 section 6.1)")
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
            raise FramingError(413, too_large(text, limit))

    def send_error(self, code, message=None, explain=None):
        """http.server's protocol errors (bad request line, headers too long), as JSON."""
        self.close_connection = True
        self.command = getattr(self, "command", None) or "GET"
        self.request_version = "HTTP/1.1"  # a garbled request line leaves "HTTP/0.9": no status line at all
        self._reply(code, _json(f"{message or self.responses.get(code, ('Error',))[0]}"))

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _serve

    def log_message(self, format, *args):  # noqa: A002  (BaseHTTPRequestHandler's signature)
        log.debug("%s %s", self.address_string(), format % args)


class RestHttpServer:
    """Serves HTTP on `address`: the reactor owns the sockets, `num_threads` workers answer whole requests.

    Args:
      address: (host, port); port 0 picks a free one (`server_address[1]`).
      app: `app(method, path, body) -> (status, JSON bytes)`, never raising (`http.RestApi.handle`).
      limits: `TransportLimits`.
    """

    def __init__(self, address, app, limits: TransportLimits = TransportLimits()):
        self.app, self.limits = app, limits
        self.budget = Budget(limits.max_inflight_bytes)
        self.socket = socket.create_server(address, backlog=128)  # SO_REUSEADDR on POSIX
        self.server_address = self.socket.getsockname()[:2]
        self._requests: queue.Queue = queue.Queue(maxsize=4 * limits.num_threads)
        self.reactor = Reactor(self.socket, limits, self.budget, self._submit)
        self._workers = [threading.Thread(target=self._work, name=f"rest-worker-{i}", daemon=True)
                         for i in range(limits.num_threads)]
        for worker in self._workers:
            worker.start()

    def _submit(self, connection: Connection, request: bytes, eof: bool) -> bool:
        try:
            self._requests.put_nowait((connection, request, eof))
            return True
        except queue.Full:
            return False

    def _work(self) -> None:
        while True:
            item = self._requests.get()
            if item is None:
                return
            connection, request, eof = item
            keep = False
            try:
                keep = not _Handler(connection, request, eof, self).close_connection
            except Exception:  # a client that vanished mid-answer; the next request is served as usual
                log.debug("connection from %s ended with an error", connection.address, exc_info=True)
            if connection.reserved:
                self.budget.release(connection.reserved)
                connection.reserved = 0
            if keep:
                self.reactor.resume(connection)
            else:
                self.reactor.close(connection)

    def serve_forever(self) -> None:
        self.reactor.run()

    def shutdown(self) -> None:
        self.reactor.stop()

    def server_close(self) -> None:
        """Stops accepting and closes the connections the reactor holds; workers end after their request."""
        self.reactor.stop()
        self.socket.close()
        for _ in self._workers:
            try:
                self._requests.put_nowait(None)
            except queue.Full:
                break
