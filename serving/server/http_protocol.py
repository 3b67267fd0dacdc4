"""One REST connection's HTTP/1.1: h11 reads and writes the bytes, this module holds the server's rules.

h11 (python-hyper's sans-I/O HTTP/1.1 state machine) frames every request: it reads the request line and
headers, the Content-Length or chunked body, keep-alive and pipelining, `Expect: 100-continue`, and writes
every response. Its reading of a request is the only one: the event loop (`connections.py`) feeds bytes to
`HttpProtocol` and acts on what `next()` returns (a head, each piece of a chunked body as it arrives, a whole
request), and the worker that answers (`transport.py`) gets the same parsed `Request`. What h11 cannot read,
or what this server refuses, comes back as one `Refused` that is answered with a JSON error and the connection
closed, so no byte of a request is read twice.

The rules kept here: a body over `max_request_bytes` gets 413 (from a declared Content-Length before the body
is read; from a chunked body as soon as it grows past the limit), a request with both Transfer-Encoding and
Content-Length gets 400 (RFC 9112 section 6.1: framed either way, a smuggling risk), a request line and
headers over `MAX_HEAD_BYTES` get 431 (a chunk size line or trailers over it, 400), a body cut short by the
client's close gets 400 naming how much arrived, and every other head or chunk h11 cannot read gets 400 with
its reason.
"""

import dataclasses
import http
import json
import re
import urllib.parse

import h11

MAX_HEAD_BYTES = 64 * 1024  # request line and headers together (h11's max_incomplete_event_size)


def too_large(size: str, limit: int) -> str:
    return f"Request body of {size} bytes exceeds the limit of {limit} bytes (--max_request_bytes)"


def error_payload(message: str) -> bytes:
    """TF Serving's JSON error body."""
    return json.dumps({"error": message}, separators=(",", ":")).encode("utf-8")


@dataclasses.dataclass(frozen=True)
class Request:
    """A whole request as h11 read it. `headers`: (lower-case name, value) pairs in their order."""

    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    @property
    def path(self) -> str:
        return urllib.parse.urlsplit(self.target).path

    def header(self, name: str) -> str:
        """The values of header `name` joined by ", " ("" when absent)."""
        key = name.lower().encode("latin-1")
        return ", ".join(value.decode("latin-1") for found, value in self.headers if found == key)


@dataclasses.dataclass(frozen=True)
class Head:
    """A request's head was read and admitted; `length` is its Content-Length, None for a chunked body."""

    length: int | None


@dataclasses.dataclass(frozen=True)
class Arrived:
    """`size` more bytes of a chunked body are held: the loop counts them before it reads on."""

    size: int


@dataclasses.dataclass(frozen=True)
class Complete:
    request: Request


@dataclasses.dataclass(frozen=True)
class Refused:
    """Answer `status` with `message` and close the connection."""

    status: int
    message: str


NEED_DATA = "need data"  # nothing more to act on until more bytes (or the client's close) arrive
CLOSED = "closed"  # the client closed the connection between requests


def _reason_phrase(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode("ascii")
    except ValueError:  # 499 (TF Serving's CANCELLED) has no standard phrase
        return b""


def _response(connection: h11.Connection, status: int, payload: bytes, close: bool, with_body: bool) -> bytes:
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    if close:
        headers.append(("Connection", "close"))
    data = connection.send(h11.Response(status_code=status, reason=_reason_phrase(status), headers=headers))
    if with_body:
        data += connection.send(h11.Data(data=payload))
    return data + connection.send(h11.EndOfMessage())


def closing_answer(status: int, message: str) -> bytes:
    """A whole JSON error response with `Connection: close`, written by a fresh h11 connection: it can be sent
    whatever state the client's connection is in (before any request, or in the middle of one)."""
    return _response(h11.Connection(h11.SERVER), status, error_payload(message), close=True, with_body=True)


def _readable(reason: str) -> str:
    """h11's reason with `bytearray(b'...')` shown as the bytes, on one line."""
    return re.sub(r"bytearray\((b(['\"]).*?\2)\)", r"\1", reason)[:300]


def head_too_large() -> Refused:
    return Refused(431, f"Request head too large: the request line and headers exceed {MAX_HEAD_BYTES} bytes")


def _unreadable(error: h11.RemoteProtocolError, head_read: bool) -> Refused:
    """What h11 could not read (in the head, or in a body after `head_read`) -> the answer."""
    reason = _readable(str(error))
    if error.error_status_hint == 431:  # h11's buffer passed MAX_HEAD_BYTES while it waited for a line's end
        if head_read:
            return Refused(400, f"Bad chunked body: a chunk size line or the trailers exceed {MAX_HEAD_BYTES} bytes")
        return head_too_large()
    if error.error_status_hint == 501:  # h11 gives 501 only for a Transfer-Encoding it does not read
        return Refused(400, f"Unsupported Transfer-Encoding ({reason}): send one 'Transfer-Encoding: chunked' "
                            f"or a Content-Length")
    if "Content-Length" in reason:
        return Refused(400, f"Bad Content-Length header ({reason}): one decimal number of bytes expected")
    if reason.startswith("illegal chunk header"):
        return Refused(400, f"Bad chunk size line in a chunked body ({reason})")
    if reason.startswith("illegal request line"):
        return Refused(400, f"Bad request line ({reason})")
    return Refused(400, f"Bad request: {reason}")


class HttpProtocol:
    """One connection's requests, read by h11 and checked against this server's rules; its answers, written
    by h11. Not thread-safe: the event loop and the worker use it in turn, never at once.

    Feed bytes with `receive` (b"" for the client's close), then call `next()` until it returns NEED_DATA,
    CLOSED, a `Complete` request or a `Refused` one. A chunked body's bytes are counted as they come: each
    piece read is one `Arrived(size)`, so the caller can refuse a body before it is whole.

    Args:
      max_request_bytes: the largest body (413 beyond it).

    Example:
        protocol = HttpProtocol(4096)
        protocol.receive(b"GET /v1/models/m HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        protocol.next()  # Head(length=0)
        protocol.next()  # Complete(Request(method="GET", target="/v1/models/m", ...))
        protocol.response(200, b"{}", close=False)  # b"HTTP/1.1 200 OK\\r\\n..."
        protocol.start_next()  # True: the connection stays open for the next request
    """

    def __init__(self, max_request_bytes: int):
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._limit = max_request_bytes
        self._closed = False
        self._fed = 0  # bytes given to h11 since the current request began
        self._reset()

    def _reset(self) -> None:
        self._head: h11.Request | None = None
        self._length: int | None = None
        self._chunks: list[bytes] = []
        self._received = 0

    @property
    def head_read(self) -> bool:
        """The current request's head has been read (its body may still be coming)."""
        return self._head is not None

    @property
    def waiting_for_continue(self) -> bool:
        return self._h11.they_are_waiting_for_100_continue

    def continue_bytes(self) -> bytes:
        """`100 Continue`, for a client that waits for it before sending its body."""
        return self._h11.send(h11.InformationalResponse(status_code=100, reason=b"Continue", headers=[]))

    def receive(self, data: bytes) -> None:
        """Bytes from the client; b"": the client closed its side."""
        self._closed = self._closed or not data
        self._fed += len(data)
        self._h11.receive_data(data)

    def next(self):
        """-> NEED_DATA | CLOSED | Head | Arrived | Complete | Refused: the next thing to act on."""
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as e:
                return self._truncated() if self._closed else _unreadable(e, self._head is not None)
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return NEED_DATA
            if isinstance(event, h11.ConnectionClosed):
                return CLOSED
            if isinstance(event, h11.Request):
                # h11 bounds a head only while it waits for its end: one that came whole in one read is measured
                if self._fed - len(self._h11.trailing_data[0]) > MAX_HEAD_BYTES:
                    return head_too_large()
                return self._admit(event)
            if isinstance(event, h11.Data):
                self._received += len(event.data)
                if self._length is None and self._received > self._limit:
                    self.discard()
                    return Refused(413, too_large(f"more than {self._limit}", self._limit))
                self._chunks.append(event.data)
                if self._length is None:  # a Content-Length body was counted whole from its head
                    return Arrived(len(event.data))
            elif isinstance(event, h11.EndOfMessage):
                head, body = self._head, b"".join(self._chunks)
                self._chunks = []
                return Complete(Request(head.method.decode("latin-1"), head.target.decode("latin-1"),
                                        tuple(head.headers), body))

    def _admit(self, head: h11.Request) -> Head | Refused:
        self._head = head
        names = {name for name, _ in head.headers}
        if b"transfer-encoding" in names and b"content-length" in names:
            return Refused(400, "Request has both Transfer-Encoding and Content-Length headers; send one "
                                "(RFC 9112 section 6.1)")
        if b"transfer-encoding" in names:
            return Head(None)
        self._length = int(dict(head.headers).get(b"content-length", b"0"))  # h11 checked: one decimal number
        if self._length > self._limit:
            return Refused(413, too_large(str(self._length), self._limit))
        return Head(self._length)

    def discard(self) -> None:
        """Drops the body read so far (the request was refused, or its connection closed)."""
        self._chunks = []

    def _truncated(self) -> Refused:
        """The client closed its side within a request."""
        if self._head is None:
            return Refused(400, "Request incomplete: the connection was closed before the end of its headers")
        if self._length is None:
            return Refused(400, f"Request body truncated: the connection was closed after {self._received} bytes "
                                f"of its chunked body, before its last chunk")
        return Refused(400, f"Request body truncated: got {self._received} of the {self._length} bytes of its "
                            f"Content-Length")

    def response(self, status: int, payload: bytes, close: bool) -> bytes:
        """The answer to the current request (no body for HEAD), with `Connection: close` when `close`."""
        with_body = self._head is None or self._head.method != b"HEAD"
        return _response(self._h11, status, payload, close, with_body)

    def start_next(self) -> bool:
        """After an answer: True when the connection stays open for another request (h11 decides from both
        sides' keep-alive), with the state reset for it."""
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            self._fed = len(self._h11.trailing_data[0])  # a pipelined request's bytes, already given
            self._reset()
            return True
        return False

    @property
    def pending(self) -> bool:
        """Bytes of a next request (pipelined) are already buffered."""
        return bool(self._h11.trailing_data[0])
