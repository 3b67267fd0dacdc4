"""The REST server's HTTP/1.1 layer: an event loop that owns every socket, a fixed pool of workers that only
ever see complete requests, and the limits both keep. h11 reads and writes HTTP (`http_protocol.py`).

- One reactor thread (`connections.Reactor`, a `selectors` loop) accepts connections and reads them without
  blocking. A connection goes to a worker only once a whole request has arrived (headers and a
  Content-Length or chunked body), so a client that sends nothing, stops in its headers or stops in its
  body holds no worker: idle and slow sockets cost a file descriptor and a buffer, never a thread.
- Timeouts: a request's headers (from its first byte, or from the accept for a new connection) must arrive
  within `header_timeout_s`; a body may pause at most `read_timeout_s` between bytes; a keep-alive
  connection idle for `read_timeout_s` is closed. A stalled body is answered 400 ("Request body
  incomplete"), stalled headers 408.
- Caps: at most `max_connections` open connections, and `max_connections_per_client` from one IP address;
  a connection over either gets 503 at once and is closed. Complete requests wait for a worker in a queue
  of at most `4 * num_threads`; past that, 503.
- Memory: request bodies held or being served at once total at most `max_inflight_bytes` (a
  Content-Length body's bytes are reserved when its headers arrive, a chunked body's as they arrive;
  released when its answer is sent or its connection closes, mid-body too); a request that would go over
  gets 503 at once and its connection is closed. A body over `max_request_bytes` gets 413 from its
  headers, before it is read, and an `Expect: 100-continue` request is answered 413 instead of
  `100 Continue`.
- Framing: every request is read once, by h11; a head or chunk it cannot read, a request with both
  Transfer-Encoding and Content-Length, a body cut short get a JSON 400 and the connection is closed
  (`http_protocol.py`), so the bytes after such a request are never read as another one.
- `Content-Encoding: gzip` (and `deflate`) request bodies are decompressed here, by the worker, to at most
  `max_request_bytes` (413 beyond); any other Content-Encoding is refused with 400 and the connection
  closed.

`app(method, path, body) -> (status, JSON bytes)` is the application (`http.RestApi.handle`); it never raises.
"""

import dataclasses
import logging
import queue
import socket
import threading
import zlib

from serving.server.connections import Budget, Connection, Reactor, release
from serving.server.http_protocol import Request, error_payload, too_large

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


class BodyError(Exception):
    """A body that cannot be decoded: answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def decoded_body(request: Request, limit: int) -> bytes:
    """The body without its Content-Encoding (gzip, deflate), at most `limit` bytes once decompressed."""
    encoding = request.header("Content-Encoding").strip().lower()
    if encoding in ("", "identity"):
        return request.body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise BodyError(400, f"Content-Encoding {encoding!r} is not supported (use gzip, deflate or none)")
    decompressor = zlib.decompressobj(zlib.MAX_WBITS | (16 if "gzip" in encoding else 32))
    try:
        plain = decompressor.decompress(request.body, limit + 1)
    except zlib.error as e:
        raise BodyError(400, f"Request body is not valid {encoding} data: {e}") from None
    if len(plain) > limit:
        raise BodyError(413, too_large(f"more than {limit} (decompressed)", limit))
    if not decompressor.eof:
        raise BodyError(400, f"Request body is not valid {encoding} data: it ends before the stream does")
    return plain


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

    def _submit(self, connection: Connection, request: Request) -> bool:
        try:
            self._requests.put_nowait((connection, request))
            return True
        except queue.Full:
            return False

    def _work(self) -> None:
        while True:
            item = self._requests.get()
            if item is None:
                return
            connection, request = item
            keep = False
            try:
                keep = self._answer(connection, request)
            except Exception:  # a client that vanished mid-answer; the next request is served as usual
                log.debug("connection from %s ended with an error", connection.address, exc_info=True)
            del item, request  # the body: freed before its memory is given back
            release(self.budget, connection)
            if keep:
                self.reactor.resume(connection)
            else:
                self.reactor.close(connection)

    def _answer(self, connection: Connection, request: Request) -> bool:
        """Answers one request on the worker's thread -> whether the connection stays open."""
        plain, close = 0, False
        try:
            body = decoded_body(request, self.limits.max_request_bytes)
            if body is not request.body:  # the decompressed copy counts against the budget too
                if not self.budget.reserve(len(body)):
                    raise BodyError(503, "Server busy: request bodies in flight exceed "
                                         "--rest_api_max_inflight_bytes; try again")
                plain = len(body)
            status, payload = self.app(request.method, request.path, body)
        except BodyError as e:
            status, payload, close = e.status, error_payload(e.message), True
        try:
            log.debug("%s %s %s -> %d", connection.address[0], request.method, request.target[:200], status)
            connection.sock.sendall(connection.http.response(status, payload, close))
        finally:
            self.budget.release(plain)
        return not close and connection.http.start_next()

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
