"""The REST server's sockets: one event loop (`Reactor`) that accepts, caps, reads and times out every
connection, and hands a connection to a worker only with one whole request in hand.

Per connection it buffers bytes until the request's headers end, reads Content-Length or the chunked framing
from them, and buffers the body too; then `submit(connection, request_bytes, eof)` gives it to a worker,
and the loop stops watching that socket until the worker calls `resume` (keep-alive) or `close`. Anything it
cannot frame (a bad Content-Length, an unknown Transfer-Encoding, a bad chunk line, oversized headers, a
client that closed mid request) is submitted as it is, so the worker's HTTP parser gives its JSON 400. What
the loop answers itself, then closes: 503 over the connection caps or the in-flight byte budget, 413 for a
declared body over the limit (instead of `100 Continue`), 408 for headers not complete within the header
timeout, 400 for a body that paused longer than the read timeout. See `transport.py` for the limits.
"""

import collections
import json
import logging
import selectors
import socket
import threading
import time

log = logging.getLogger(__name__)
MAX_HEADER_BYTES = 65536 + 100 * 8192  # past this without an end of headers, http.server's parser refuses it
RECV_BYTES = 1 << 18
TICK_S = 0.05
LINGER_S = 2.0  # after an early answer, how long the rest of a request is read and dropped before closing
_REASONS = {400: "Bad Request", 408: "Request Timeout", 413: "Payload Too Large", 503: "Service Unavailable"}


def answer(status: int, message: str) -> bytes:
    """A whole closing JSON response."""
    body = json.dumps({"error": message}, separators=(",", ":")).encode("utf-8")
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (status, _REASONS[status].encode(), len(body), body))


def send_now(sock: socket.socket, data: bytes) -> None:
    """Sends what fits in the socket's buffer without waiting (the loop must never block on a client that
    does not read); raises OSError for a closed connection."""
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        sock.send(data)
    except (BlockingIOError, InterruptedError):
        pass
    finally:
        sock.settimeout(timeout)


def too_large(size: str, limit: int) -> str:
    return f"Request body of {size} bytes exceeds the limit of {limit} bytes (--max_request_bytes)"


class Budget:
    """Bytes of request bodies held or being served at once, at most `limit`."""

    def __init__(self, limit: int):
        self.limit, self.used, self._lock = limit, 0, threading.Lock()

    def reserve(self, size: int) -> bool:
        with self._lock:
            if size and self.used + size > self.limit:
                return False
            self.used += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self.used -= size


class Connection:
    """One client socket and what the loop knows of its current request."""

    def __init__(self, sock: socket.socket, address, now: float):
        self.sock, self.address, self.buffer = sock, address, bytearray()
        self.started: float | None = now  # first byte of the current request (a new connection: its accept)
        self.last = now  # last bytes received
        self.body_start = self.body_end = None  # offsets in `buffer` once the headers are read
        self.chunked, self.reserved = False, 0
        self.draining: float | None = None  # answered early: read and drop until then, then close

    def reset(self) -> None:
        self.body_start = self.body_end = None
        self.chunked = False


def _headers(head: bytes) -> dict[str, list[str]]:
    found: dict[str, list[str]] = collections.defaultdict(list)
    for line in head.split(b"\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            found[name.strip().lower().decode("latin-1")].append(value.strip().decode("latin-1"))
    return found


def scan_chunked(buffer: bytearray, start: int, limit: int):
    """-> ("incomplete", None) | ("bad", None) | ("too_large", total) | ("done", end offset): where a chunked
    body starting at `start` ends (after its trailers), without copying it."""
    position, total = start, 0
    while True:
        line_end = buffer.find(b"\n", position, position + 1024)
        if line_end < 0:
            return ("bad", None) if len(buffer) - position >= 1024 else ("incomplete", None)
        size_text = bytes(buffer[position:line_end]).split(b";")[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return "bad", None
        if size < 0 or not size_text.isalnum():
            return "bad", None
        total += size
        if total > limit:
            return "too_large", total
        position = line_end + 1
        if size == 0:
            while True:  # trailers, up to an empty line
                line_end = buffer.find(b"\n", position)
                if line_end < 0:
                    return "incomplete", None
                if buffer[position:line_end].strip() == b"":
                    return "done", line_end + 1
                position = line_end + 1
        if len(buffer) < position + size + 2:
            return "incomplete", None
        position += size
        if buffer[position:position + 2] == b"\r\n":
            position += 2
        elif buffer[position:position + 1] == b"\n":
            position += 1
        else:
            return "bad", None


class Reactor:
    """The event loop over the listening socket and every connection not with a worker.

    Args:
      listener: a bound, listening socket.
      limits: `transport.TransportLimits`.
      budget: the in-flight body bytes (`Budget`).
      submit: `submit(connection, request_bytes, eof) -> bool` (False: no worker place; answered 503).
    """

    def __init__(self, listener: socket.socket, limits, budget: Budget, submit):
        self.limits, self.budget, self.submit = limits, budget, submit
        self.selector = selectors.DefaultSelector()
        listener.setblocking(False)
        self.listener = listener
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)  # a full wake-up pipe already means "wake up"
        self.selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._returned: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._open: dict[str, int] = collections.Counter()
        self._watched: set[Connection] = set()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._running = False

    @property
    def open_connections(self) -> int:
        with self._lock:
            return sum(self._open.values())

    def run(self) -> None:
        self._running = True
        try:
            while not self._stopping.is_set():
                for key, _ in self.selector.select(TICK_S):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        self._read(key.data)
                self._take_returned()
                self._expire(time.monotonic())
        finally:
            for connection in list(self._watched):
                self._close(connection)
            self._stopped.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        if self._running:
            self._stopped.wait(5)

    # --- from workers -------------------------------------------------------------------------------------

    def resume(self, connection: Connection) -> None:
        """A worker answered and the connection stays open: watch it again."""
        self._returned.append(connection)
        self._wake()

    def close(self, connection: Connection) -> None:
        """A worker is done with a connection that must close (not watched: safe from any thread)."""
        self._forget(connection)

    # --- the loop -----------------------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _accept(self) -> None:
        limits = self.limits
        while True:
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.debug("accept failed", exc_info=True)
                return
            client = address[0]
            with self._lock:
                total, mine = sum(self._open.values()), self._open[client]
                refused = total >= limits.max_connections or mine >= limits.max_connections_per_client
                if not refused:
                    self._open[client] += 1
            if refused:
                which = (f"{limits.max_connections} connections in all (--rest_api_max_connections)"
                         if total >= limits.max_connections else f"{limits.max_connections_per_client} connections "
                         f"from {client} (--rest_api_max_connections_per_client)")
                self._refuse(sock, 503, f"Server busy: this server takes at most {which}; try again")
                continue
            sock.settimeout(limits.read_timeout_s)  # bounds a worker's writes; reads happen only when readable
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection(sock, address, time.monotonic())
            self._watch(connection)

    @staticmethod
    def _refuse(sock: socket.socket, status: int, message: str) -> None:
        try:
            send_now(sock, answer(status, message))
        except OSError:
            pass
        sock.close()

    def _watch(self, connection: Connection) -> None:
        self._watched.add(connection)
        self.selector.register(connection.sock, selectors.EVENT_READ, connection)

    def _unwatch(self, connection: Connection) -> None:
        self._watched.discard(connection)
        try:
            self.selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass

    def _forget(self, connection: Connection) -> None:
        with self._lock:
            self._open[connection.address[0]] -= 1
            if self._open[connection.address[0]] <= 0:
                del self._open[connection.address[0]]
        if connection.reserved:
            self.budget.release(connection.reserved)
            connection.reserved = 0
        try:
            connection.sock.close()
        except OSError:
            pass

    def _close(self, connection: Connection, status: int | None = None, message: str = "") -> None:
        """Closes; with `status`, answers first and then reads and drops what the client still sends for up to
        LINGER_S (a lingering close: closing with unread bytes would reset the connection, and the client
        that is still sending its body would lose the answer)."""
        if status is None or connection.draining is not None:
            self._unwatch(connection)
            return self._forget(connection)
        try:
            send_now(connection.sock, answer(status, message))
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._unwatch(connection)
            return self._forget(connection)
        if connection.reserved:
            self.budget.release(connection.reserved)
            connection.reserved = 0
        connection.buffer.clear()
        connection.draining = time.monotonic() + LINGER_S

    def _take_returned(self) -> None:
        now = time.monotonic()
        while self._returned:
            connection = self._returned.popleft()
            connection.last, connection.started = now, (now if connection.buffer else None)
            self._watch(connection)
            if connection.buffer:  # a pipelined request is already here
                self._advance(connection)

    def _read(self, connection: Connection) -> None:
        try:
            data = connection.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError, socket.timeout):
            return
        except OSError:
            return self._close(connection)
        now = time.monotonic()
        if connection.draining is not None:
            if not data:
                self._close(connection)
            return
        if not data:  # the client closed its side
            if not connection.buffer:
                return self._close(connection)
            return self._dispatch(connection, bytes(connection.buffer), eof=True)
        if connection.started is None:
            connection.started = now
        connection.buffer += data
        connection.last = now
        self._advance(connection)

    def _advance(self, connection: Connection) -> None:
        """Reads the framing of the buffered request; dispatches it once complete."""
        buffer, limits = connection.buffer, self.limits
        if connection.body_start is None and not self._read_headers(connection):
            return
        if connection.chunked:
            state, value = scan_chunked(buffer, connection.body_start, limits.max_request_bytes)
            if state == "incomplete":
                return
            if state == "too_large":
                return self._close(connection, 413, too_large(f"more than {value - 1}", limits.max_request_bytes))
            if state == "bad":
                return self._dispatch(connection, bytes(buffer))
            if not self._reserve(connection, value - connection.body_start):
                return
            connection.body_end = value
        if len(buffer) >= connection.body_end:
            if len(buffer) == connection.body_end:  # the usual case: one copy, no slice
                request = bytes(buffer)
                buffer.clear()
            else:
                with memoryview(buffer) as view:
                    request = bytes(view[:connection.body_end])
                del buffer[:connection.body_end]
            self._dispatch(connection, request)

    def _read_headers(self, connection: Connection) -> bool:
        """True once the headers are in and the body's framing is known."""
        buffer, limits = connection.buffer, self.limits
        end = buffer.find(b"\r\n\r\n")
        end = end + 4 if end >= 0 else -1
        if end < 0:
            bare = buffer.find(b"\n\n")
            end = bare + 2 if bare >= 0 else -1
        if end < 0:
            if len(buffer) > MAX_HEADER_BYTES:
                self._dispatch(connection, bytes(buffer))  # the parser answers 431 / 414
            return False
        head = bytes(buffer[:end])
        headers = _headers(head)
        encoding = ",".join(headers.get("transfer-encoding", [])).strip().lower()
        lengths = {v for v in headers.get("content-length", [])}
        connection.body_start = end
        if encoding not in ("", "identity") and lengths:  # RFC 9112 6.1: framed either way, a smuggling risk
            self._dispatch(connection, head)  # the parser answers its 400 and the connection is closed
            return False
        if encoding == "chunked":
            connection.chunked = True
            self._continue(connection, head, headers)
            return True
        if encoding not in ("", "identity") or len(lengths) > 1 or \
                (lengths and not (next(iter(lengths)).isdigit() and next(iter(lengths)).isascii())):
            self._dispatch(connection, head)  # the parser answers its 400
            return False
        length = int(lengths.pop()) if lengths else 0
        if length > limits.max_request_bytes:
            self._close(connection, 413, too_large(str(length), limits.max_request_bytes))
            return False
        if not self._reserve(connection, length):
            return False
        if length:
            self._continue(connection, head, headers)
        connection.body_end = end + length
        return True

    def _reserve(self, connection: Connection, size: int) -> bool:
        if self.budget.reserve(size):
            connection.reserved += size
            return True
        self._close(connection, 503, f"Server busy: request bodies of {self.budget.limit} bytes are being received "
                                     f"or served (--rest_api_max_inflight_bytes); try again")
        return False

    @staticmethod
    def _continue(connection: Connection, head: bytes, headers) -> None:
        """`Expect: 100-continue` (HTTP/1.1): the body is welcome (its size was checked)."""
        if "100-continue" in [v.lower() for v in headers.get("expect", [])] and \
                head.split(b"\n", 1)[0].rstrip().endswith(b"HTTP/1.1"):
            try:
                send_now(connection.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:
                pass

    def _dispatch(self, connection: Connection, request: bytes, eof: bool = False) -> None:
        self._unwatch(connection)
        connection.reset()
        if eof:
            connection.buffer.clear()
        if not self.submit(connection, request, eof):
            self._refuse(connection.sock, 503, "Server busy: every worker and queued place is taken; try again")
            self._forget(connection)

    def _expire(self, now: float) -> None:
        limits = self.limits
        for connection in list(self._watched):
            if connection.draining is not None:
                if now > connection.draining:
                    self._close(connection)
            elif connection.started is None:  # idle keep-alive
                if now - connection.last > limits.read_timeout_s:
                    self._close(connection)
            elif connection.body_start is None:  # headers (or a new connection's first byte)
                if now - connection.started > limits.header_timeout_s:
                    if connection.buffer:
                        self._close(connection, 408, f"Request headers incomplete: they did not arrive within "
                                                     f"{limits.header_timeout_s:g} s "
                                                     f"(--rest_api_header_timeout_in_ms)")
                    else:
                        self._close(connection)
            elif now - connection.last > limits.read_timeout_s:
                self._close(connection, 400, f"Request body incomplete: nothing more arrived within "
                                             f"{limits.read_timeout_s:g} s")
