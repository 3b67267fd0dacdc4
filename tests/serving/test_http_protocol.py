"""`serving.server.http_protocol`, without sockets: h11's one reading of each request and the server's rules
on it (issue 46: a head that cannot be read is refused once, never read again; issue 45: the framing is
h11's), and the answers it writes."""

import h11
import pytest

from serving.server.http_protocol import (CLOSED, MAX_HEAD_BYTES, NEED_DATA, Arrived, Complete, Head, HttpProtocol,
                                          Refused, closing_answer)

HEAD = b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\n"
PREDICT = b'{"instances":["a"]}'


def read(protocol: HttpProtocol, data: bytes, eof: bool = False) -> list:
    """Feeds `data` (and the client's close) -> every outcome up to NEED_DATA / CLOSED / Complete / Refused
    (past a Head and each Arrived)."""
    protocol.receive(data)
    if eof:
        protocol.receive(b"")
    outcomes = []
    while True:
        outcomes.append(protocol.next())
        if not isinstance(outcomes[-1], (Head, Arrived)):
            return outcomes


# Issue 46: before h11, the event loop read these heads as chunked with a Content-Length (refused) and the
# worker's parser as a Content-Length body; the worker answered without closing and the loop found the same
# bytes again, ~1,700 answers a second on one connection.
ISSUE_46 = [
    (HEAD + b"Transfer-Encoding : chunked\r\nContent-Length: 2\r\n\r\n{}", "illegal header line"),
    (HEAD + b"Transfer-Encoding\t: chunked\r\nContent-Length: 2\r\n\r\n{}", "illegal header line"),
    (HEAD + b"X-No-Colon\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}", "illegal header line"),
]


@pytest.mark.parametrize("data, reason", ISSUE_46)
def test_a_head_h11_cannot_read_is_refused_once(data, reason):
    protocol = HttpProtocol(4096)
    outcomes = read(protocol, data)
    assert outcomes == [Refused(400, outcomes[0].message)] and reason in outcomes[0].message, outcomes
    assert "bytearray" not in outcomes[0].message and "\n" not in outcomes[0].message


@pytest.mark.parametrize("data, status, message", [
    (HEAD + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400,
     "Request has both Transfer-Encoding and Content-Length headers; send one (RFC 9112 section 6.1)"),
    (HEAD + b"Content-Length: abc\r\n\r\n", 400, "Bad Content-Length header (bad Content-Length)"),
    (HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n", 400,
     "Bad Content-Length header (conflicting Content-Length headers)"),
    (HEAD + b"Transfer-Encoding: gzip\r\n\r\n", 400, "Unsupported Transfer-Encoding"),
    (HEAD + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
     "Unsupported Transfer-Encoding (multiple Transfer-Encoding headers)"),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "Bad chunk size line in a chunked body"),
    (b"GARBAGE\r\n\r\n", 400, "Bad request line (illegal request line: b'GARBAGE')"),
    (b"POST / HTTP/1.1\r\n\r\n", 400, "Bad request: Missing mandatory Host: header"),
    (HEAD + b"Content-Length: 5000\r\n\r\n", 413, "Request body of 5000 bytes exceeds the limit of 4096 bytes"),
    (HEAD + b"X: " + b"y" * MAX_HEAD_BYTES, 431, f"exceed {MAX_HEAD_BYTES} bytes"),
    # issue 57: h11 bounds a head only while it waits for its end; a whole one in one read was accepted
    (HEAD + b"".join(b"X-Header-%05d: v\r\n" % i for i in range(10_000)) + b"\r\n", 431,
     f"exceed {MAX_HEAD_BYTES} bytes"),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n2;x=" + b"y" * MAX_HEAD_BYTES, 400,
     f"Bad chunked body: a chunk size line or the trailers exceed {MAX_HEAD_BYTES} bytes"),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\nX: " + b"y" * MAX_HEAD_BYTES, 400, "Bad chunked body"),
])
def test_what_the_server_refuses(data, status, message):
    outcome = read(HttpProtocol(4096), data)[-1]
    assert isinstance(outcome, Refused) and outcome.status == status and message in outcome.message, outcome


def test_a_head_is_measured_from_the_start_of_its_request():
    """The largest head taken is MAX_HEAD_BYTES, whole in one read or in pieces, after a pipelined request too."""
    head = HEAD + b"Content-Length: 0\r\n"
    largest = head + b"X: " + b"y" * (MAX_HEAD_BYTES - len(head) - 7) + b"\r\n\r\n"
    assert len(largest) == MAX_HEAD_BYTES and read(HttpProtocol(10), largest)[0] == Head(0)
    assert read(HttpProtocol(10), largest.replace(b"X: ", b"X:  "))[0].status == 431
    protocol = HttpProtocol(10)
    assert isinstance(read(protocol, head + b"\r\n" + largest)[1], Complete)
    protocol.response(200, b"{}", close=False)
    assert protocol.start_next() and read(protocol, b"")[0] == Head(0)


def test_a_chunked_body_over_the_limit_is_refused_as_it_grows():
    protocol = HttpProtocol(10)
    assert read(protocol, HEAD + b"Transfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n") == [
        Head(None), Arrived(8), NEED_DATA]
    assert read(protocol, b"8\r\n12345678\r\n") == [
        Refused(413, "Request body of more than 10 bytes exceeds the limit of 10 bytes (--max_request_bytes)")]


def test_each_piece_of_a_chunked_body_is_counted_as_it_arrives():
    """Issue 57: the event loop reserves a chunked body's bytes from `Arrived` (a piece of a chunk counts
    too), so a body held open mid-way counts; a Content-Length body was counted whole from its head."""
    protocol = HttpProtocol(4096)
    assert read(protocol, HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"in") == [
        Head(None), Arrived(4), NEED_DATA]
    outcomes = read(protocol, b"s\r\nE\r\ntances\":[\"a\"]}\r\n0\r\n\r\n")
    assert outcomes[:2] == [Arrived(1), Arrived(14)] and outcomes[2].request.body == PREDICT
    counted = HttpProtocol(4096)
    outcomes = read(counted, HEAD + b"Content-Length: %d\r\n\r\n" % len(PREDICT) + PREDICT)
    assert outcomes[0] == Head(len(PREDICT)) and isinstance(outcomes[1], Complete)


@pytest.mark.parametrize("data, message", [
    (HEAD + b"Content-Length: 100\r\n\r\n" + b'{"inst', "Request body truncated: got 6 of the 100 bytes"),
    (HEAD + b"Transfer-Encoding: chunked\r\n\r\n10\r\n{}", "after 2 bytes of its chunked body, before its last"),
    (HEAD, "Request incomplete: the connection was closed before the end of its headers"),
])
def test_a_request_cut_short_by_the_close_says_how_much_came(data, message):
    outcome = read(HttpProtocol(4096), data, eof=True)[-1]
    assert outcome.status == 400 and message in outcome.message, outcome


def test_one_reading_gives_the_request_to_the_answer_and_keeps_the_connection():
    protocol = HttpProtocol(4096)
    second = b"GET /v1/models/text?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    outcomes = read(protocol, HEAD + b"Content-Length: %d\r\nContent-Encoding: gzip\r\n\r\n" % len(PREDICT)
                    + PREDICT + second)
    assert outcomes[0] == Head(len(PREDICT)) and isinstance(outcomes[1], Complete)
    request = outcomes[1].request
    assert (request.method, request.path, request.body) == ("POST", "/v1/models/text:predict", PREDICT)
    assert request.header("content-encoding") == "gzip" and request.header("Expect") == ""
    assert protocol.next() == NEED_DATA  # the pipelined request waits for the answer
    assert protocol.response(200, b"{}", close=False) == (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    assert protocol.pending and protocol.start_next() and not protocol.head_read
    request = read(protocol, b"")[1].request
    assert (request.method, request.target, request.path) == ("GET", "/v1/models/text?x=1", "/v1/models/text")
    assert protocol.response(404, b"{}", close=False).startswith(b"HTTP/1.1 404 Not Found\r\n")
    assert not protocol.start_next()  # the client asked to close
    assert read(HttpProtocol(10), b"", eof=True) == [CLOSED]


def test_answers_are_written_by_h11():
    protocol = HttpProtocol(4096)
    assert read(protocol, HEAD + b"Content-Length: 2\r\nExpect: 100-continue\r\n\r\n") == [Head(2), NEED_DATA]
    assert protocol.waiting_for_continue and protocol.continue_bytes() == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert isinstance(read(protocol, b"{}")[0], Complete)
    assert protocol.response(499, b"{}", close=True).startswith(b"HTTP/1.1 499 \r\n")
    assert not protocol.start_next()
    head = HttpProtocol(10)
    read(head, b"HEAD /v1/models/m HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.response(400, b'{"error":"x"}', close=False).endswith(b"Content-Length: 13\r\n\r\n")
    answer = closing_answer(503, "Server busy")
    client = h11.Connection(h11.CLIENT)  # a client's reading of the closing answer: one JSON response, then close
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(answer)
    response, data, end = client.next_event(), client.next_event(), client.next_event()
    assert response.status_code == 503 and (b"connection", b"close") in list(response.headers)
    assert data.data == b'{"error":"Server busy"}' and isinstance(end, h11.EndOfMessage)
