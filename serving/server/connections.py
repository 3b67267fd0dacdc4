"""The REST server's sockets: one event loop (`Reactor`) that accepts, caps, reads and times out every
connection, and hands a connection to a worker only with one whole request in hand.

Each connection's bytes go to its `http_protocol.HttpProtocol` (h11), the one reader of its requests; the loop
acts on what it reads: a head admitted (a Content-Length body's bytes reserved from the budget, `100 Continue`
when the client waits for it), each piece of a chunked body (reserved as it arrives, so a body in transit
counts from its first byte), a whole request (given to a worker with `submit(connection, request)`; the loop
stops watching that socket until the worker calls `resume` (keep-alive) or `close`), or a refusal (answered
with its JSON error, then closed). What the loop answers itself, then closes: every request h11 cannot read or
`HttpProtocol` refuses (400, 413, 431), 503 over the connection caps or the in-flight byte budget, 408 for
headers not complete within the header timeout, 400 for a body that paused longer than the read timeout. A
connection that closes, at any point, gives its reservation back and drops what it held of its body. See
`transport.py` for the limits.
"""

import collections
import ctypes
import logging
import selectors
import socket
import threading
import time

from serving.server.http_protocol import (CLOSED, NEED_DATA, Arrived, Complete, Head, HttpProtocol, Refused,
                                          closing_answer)

log = logging.getLogger(__name__)
RECV_BYTES = 1 << 16  # one read; also the most a connection holds past a request being served
TICK_S = 0.05
LINGER_S = 2.0  # after an early answer, how long the rest of a request is read and dropped before closing
TRIM_BYTES = 1 << 20  # a body this large, once freed, has its pages given back to the system
_MALLOC_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; None elsewhere


def give_back_memory() -> None:
    """Returns malloc's free pages to the system. A body arrives in pieces of up to RECV_BYTES, which glibc
    keeps in its heaps once they are freed: without this, chunked bodies held open mid-way and then closed
    left the server's RSS higher by all they had held (128 MB), for good. malloc_trim takes well under a
    millisecond."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


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


def release(budget: Budget, connection: "Connection") -> None:
    """Gives the connection's reserved bytes back to `budget`, and a large body's freed memory to the system
    (call it once the body is dropped)."""
    if connection.reserved:
        budget.release(connection.reserved)
        if connection.reserved >= TRIM_BYTES:
            give_back_memory()
        connection.reserved = 0


class Connection:
    """One client socket, its HTTP state and the loop's clocks for its current request."""

    def __init__(self, sock: socket.socket, address, now: float, max_request_bytes: int):
        self.sock, self.address = sock, address
        self.http = HttpProtocol(max_request_bytes)
        self.started: float | None = now  # first byte of the current request (a new connection: its accept)
        self.last = now  # last bytes received
        self.has_bytes = False  # bytes of the current request have arrived
        self.reserved = 0
        self.draining: float | None = None  # answered early: read and drop until then, then close


class Reactor:
    """The event loop over the listening socket and every connection not with a worker.

    Args:
      listener: a bound, listening socket.
      limits: `transport.TransportLimits`.
      budget: the in-flight body bytes (`Budget`).
      submit: `submit(connection, request) -> bool` (False: no worker place; answered 503).
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
        while True:
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                log.debug("accept failed", exc_info=True)
                return
            refused = self._count_in(address[0])
            if refused:
                self._refuse(sock, 503, f"Server busy: this server takes at most {refused}; try again")
                continue
            sock.settimeout(self.limits.read_timeout_s)  # bounds a worker's writes; reads happen only when readable
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._watch(Connection(sock, address, time.monotonic(), self.limits.max_request_bytes))

    def _count_in(self, client: str) -> str:
        """Counts a new connection from `client` -> "" when the caps allow it, else the cap it meets."""
        limits = self.limits
        with self._lock:
            total, mine = sum(self._open.values()), self._open[client]
            if total >= limits.max_connections:
                return f"{limits.max_connections} connections in all (--rest_api_max_connections)"
            if mine >= limits.max_connections_per_client:
                return (f"{limits.max_connections_per_client} connections from {client} "
                        f"(--rest_api_max_connections_per_client)")
            self._open[client] += 1
            return ""

    @staticmethod
    def _refuse(sock: socket.socket, status: int, message: str) -> None:
        try:
            send_now(sock, closing_answer(status, message))
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
        self._release(connection)
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
            send_now(connection.sock, closing_answer(status, message))
            connection.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._unwatch(connection)
            return self._forget(connection)
        self._release(connection)
        connection.draining = time.monotonic() + LINGER_S

    def _release(self, connection: Connection) -> None:
        """Gives back the connection's reservation and the part of a body it holds (a request refused, or its
        client gone, mid-body)."""
        connection.http.discard()
        release(self.budget, connection)

    def _take_returned(self) -> None:
        now = time.monotonic()
        while self._returned:
            connection = self._returned.popleft()
            connection.has_bytes = connection.http.pending  # a pipelined request is already here
            connection.last, connection.started = now, (now if connection.has_bytes else None)
            self._watch(connection)
            if connection.has_bytes:
                self._advance(connection)

    def _read(self, connection: Connection) -> None:
        try:
            data = connection.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError, socket.timeout):
            return
        except OSError:
            return self._close(connection)
        if connection.draining is not None:
            if not data:
                self._close(connection)
            return
        if data:
            now = time.monotonic()
            if connection.started is None:
                connection.started = now
            connection.last, connection.has_bytes = now, True
        connection.http.receive(data)  # b"": the client closed its side
        self._advance(connection)

    def _advance(self, connection: Connection) -> None:
        """Acts on what the connection's protocol has read, until it needs more bytes."""
        while True:
            outcome = connection.http.next()
            if outcome is NEED_DATA:
                return
            if outcome is CLOSED:
                return self._close(connection)
            if isinstance(outcome, Refused):
                return self._close(connection, outcome.status, outcome.message)
            if isinstance(outcome, Head):
                if not self._admit(connection, outcome):
                    return
            elif isinstance(outcome, Arrived):
                if not self._reserve(connection, outcome.size):
                    return
            elif isinstance(outcome, Complete):  # its body is reserved whole by now
                return self._dispatch(connection, outcome.request)

    def _admit(self, connection: Connection, head: Head) -> bool:
        """A head was read: reserves its declared body (a chunked one as it arrives) and welcomes the body."""
        if head.length and not self._reserve(connection, head.length):
            return False
        if connection.http.waiting_for_continue:
            try:
                send_now(connection.sock, connection.http.continue_bytes())
            except OSError:
                pass
        return True

    def _reserve(self, connection: Connection, size: int) -> bool:
        if self.budget.reserve(size):
            connection.reserved += size
            return True
        self._close(connection, 503, f"Server busy: request bodies of {self.budget.limit} bytes are being received "
                                     f"or served (--rest_api_max_inflight_bytes); try again")
        return False

    def _dispatch(self, connection: Connection, request) -> None:
        self._unwatch(connection)
        if not self.submit(connection, request):
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
            elif not connection.http.head_read:  # headers (or a new connection's first byte)
                if now - connection.started > limits.header_timeout_s:
                    if connection.has_bytes:
                        self._close(connection, 408, f"Request headers incomplete: they did not arrive within "
                                                     f"{limits.header_timeout_s:g} s "
                                                     f"(--rest_api_header_timeout_in_ms)")
                    else:
                        self._close(connection)
            elif now - connection.last > limits.read_timeout_s:
                self._close(connection, 400, f"Request body incomplete: nothing more arrived within "
                                             f"{limits.read_timeout_s:g} s")
