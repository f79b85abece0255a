"""Many requests from one thread (``distcp.storage.s3.inflight``) against a real loopback server.

The server answers each request by its path, on as many kept-alive connections as the
client opens, and counts connections and requests; the getter is the lean path's own,
made from a real s3fs filesystem pointed at it. What ``fetch`` gives for each object
(its bytes, or None: read it the usual way) and what ``put`` gives for each body (its
ETag checked, or None: write it the usual way) is asserted, and so is what the server
saw.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcp.storage import filesystems as fsutil
from distcp.storage.s3 import inflight, lean
from tests.unit.test_httpwire import Scripted, _self_signed, read_head


def _ok(body: bytes, close: bool = False, etag: str = "e") -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    return (b"HTTP/1.1 200 OK\r\nETag: \"%s\"\r\n" % etag.encode() + extra
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


CHANGED = (b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 58\r\n\r\n"
           b"<Error><Code>PreconditionFailed</Code><Message/></Error>\r\n")
BUSY = b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
#: An answer that never comes, and a connection closed instead of an answer.
STALL, CUT = "stall", None
#: A PUT's answer: its body's MD5 as the ETag, as S3 gives for one part.
STORED = "stored"


class Keyed(Scripted):
    """A loopback server answering each request by its path (``answers``: the bytes of
    the answer, CUT or STALL), one request at a time per connection."""

    def __init__(self, answers: dict[str, bytes | str | None],
                 context: ssl.SSLContext | None = None) -> None:
        self.answers = answers
        self.paths: list[str] = []
        #: Each request's head and body by path (the last one sent there).
        self.heads: dict[str, bytes] = {}
        self.received: dict[str, bytes] = {}
        self.sockets: list[socket.socket] = []
        #: Requests read while the bytes of a next one had already arrived (pipelined).
        self.pipelined = 0
        self.stop = threading.Event()
        super().__init__([], context)

    def _converse(self, conn: socket.socket) -> None:
        self.sockets.append(conn)
        data = b""
        try:
            while (got := read_head(conn, data)) is not None:
                head, data = got
                path = head.split(b" ", 2)[1].decode()
                length = int(_header(head, b"content-length") or 0)
                while len(data) < length:
                    data += conn.recv(1 << 20) or b"!"  # a client gone: never equal
                body, data = data[:length], data[length:]
                self.pipelined += bool(data)
                self.paths.append(path)
                self.heads[path], self.received[path] = head, body
                answer = self.answers[path]
                if answer == STORED:
                    answer = _ok(b"", etag=hashlib.md5(body).hexdigest())
                if answer is CUT:
                    _end(conn)
                    return
                if answer == STALL:
                    self.stop.wait(30)
                    return
                assert isinstance(answer, bytes)
                conn.sendall(answer)
                if b"Connection: close" in answer:
                    _end(conn)
                    return
        except OSError:
            return

    def close_idle(self) -> None:
        """Close every connection from the server's side, as an idle timeout does."""
        for conn in self.sockets:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self.sockets.clear()

    def close(self) -> None:
        self.stop.set()
        super().close()
        self.close_idle()


def _end(conn: socket.socket) -> None:
    """Close ``conn`` as HTTP servers do (Go's, nginx's): the answers sent stay readable
    although requests sent behind them are never read (a bare close would reset the
    connection, and the client's kernel could drop answers it had not read yet)."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(2)
        while conn.recv(1 << 16):
            pass
    except OSError:
        pass
    conn.close()


@pytest.fixture
def served() -> Iterator[Keyed]:
    server = Keyed({})
    yield server
    server.close()


def _getter(server: Keyed, scheme: str = "http", ca: Path | None = None) -> Any:
    options: dict[str, Any] = {"key": "AKIATEST", "secret": "not-a-secret", "client_kwargs": {
        "endpoint_url": f"{scheme}://127.0.0.1:{server.port}", "region_name": "us-east-1"}}
    if ca is not None:
        options["client_kwargs"]["verify"] = str(ca)
    fs, _ = fsutil.filesystem("s3://b/", options)
    getter = lean.lean(fs, lambda g: g)
    assert getter is not None
    return getter


def _fetched(getter: Any, keys: list[str], **kwargs: Any) -> dict[int, bytes | None]:
    out: dict[int, bytes | None] = {}
    for index, body in inflight.fetch(getter, [("b", k, '"e"') for k in keys], **kwargs):
        assert index not in out, f"{index} given twice"
        out[index] = body
    assert sorted(out) == list(range(len(keys)))
    return out


def test_plain_answers_are_read_and_every_other_answer_is_left_to_the_usual_way(
        served: Keyed) -> None:
    keys = [f"ok{n}" for n in range(12)] + ["changed", "busy", "cut", "chunked", "closing"]
    served.answers.update({f"/b/ok{n}": _ok(b"body %d" % n) for n in range(12)})
    served.answers.update({"/b/changed": CHANGED, "/b/busy": BUSY, "/b/cut": CUT,
                           "/b/chunked": CHUNKED, "/b/closing": _ok(b"last", close=True)})
    sent = lean.requests_sent()
    got = _fetched(_getter(served), keys, connections=4, depth=1)
    assert [got[n] for n in range(12)] == [b"body %d" % n for n in range(12)]
    assert [got[n] for n in range(12, 16)] == [None] * 4
    assert got[16] == b"last"  # a 200 that closes its connection is still read
    # one GET an object, signed, If-Match the listed ETag, on at most 4 connections
    # and their replacements for the three that were closed
    assert sorted(served.paths) == sorted(f"/b/{k}" for k in keys)
    assert lean.requests_sent() - sent == len(keys)
    assert served.connections <= 4 + 4
    assert served.pipelined == 0  # one request at a time on a connection


def test_pipelined_answers_are_read_in_turn_and_a_connections_end_sends_the_rest_again(
        served: Keyed) -> None:
    keys = ["a", "b", "busy", "c", "d", "cut", "e", "f", "closing", "g", "moved", "h"]
    served.answers.update({f"/b/{k}": _ok(k.encode()) for k in keys})
    served.answers.update({"/b/busy": BUSY, "/b/cut": CUT, "/b/closing": _ok(b"last", close=True),
                           "/b/moved": _ok(b"other bytes", etag="another")})
    sent = lean.requests_sent()
    got = _fetched(_getter(served), keys, connections=1, depth=4)
    assert got == {n: None if k in ("busy", "cut", "moved") else b"last" if k == "closing"
                   else k.encode() for n, k in enumerate(keys)}
    # up to four wait on a connection (refilled as answers come). After the 503 the
    # answers already asked for are read and the connection closed; the server ends
    # one at "cut" and another after "closing": what was sent behind those and never
    # read goes again on the next connection, so each request is read once
    assert served.pipelined > 0
    assert 3 <= served.connections <= 4
    assert sorted(served.paths) == sorted(f"/b/{k}" for k in keys)
    assert len(keys) <= lean.requests_sent() - sent <= len(keys) + 2 * 3


def test_serial_gets_on_request(served: Keyed, monkeypatch: pytest.MonkeyPatch) -> None:
    served.answers.update({f"/b/k{n}": _ok(b"%d" % n) for n in range(12)})
    monkeypatch.setenv("PYDISTCP_S3_LEAN_GET", "serial")
    keys = [f"k{n}" for n in range(12)]
    assert _fetched(_getter(served), keys, connections=1) == {n: b"%d" % n for n in range(12)}
    assert served.pipelined == 0 and served.connections > 1  # one a connection, on 32


def test_an_object_without_an_answer_in_time_is_left_to_the_usual_way(
        served: Keyed) -> None:
    served.answers.update({"/b/a": _ok(b"a"), "/b/slow": STALL, "/b/c": _ok(b"c")})
    t = time.monotonic()
    got = _fetched(_getter(served), ["a", "slow", "c"], connections=3, timeout=0.5, depth=1)
    assert got == {0: b"a", 1: None, 2: b"c"}
    assert time.monotonic() - t < 5


def test_connections_are_kept_for_the_next_unit_and_a_closed_one_is_replaced(
        served: Keyed) -> None:
    served.answers.update({f"/b/k{n}": _ok(b"%d" % n) for n in range(6)})
    getter = _getter(served)
    keys = [f"k{n}" for n in range(6)]
    assert _fetched(getter, keys, connections=2) == {n: b"%d" % n for n in range(6)}
    assert _fetched(getter, keys, connections=2) == {n: b"%d" % n for n in range(6)}
    assert served.connections == 2  # the second unit took the kept connections
    served.close_idle()  # the server's idle timeout closed them meanwhile
    # a kept connection that ends before its answer was closed before the request:
    # sent again on a new one, not left to the usual way
    assert _fetched(getter, keys, connections=2) == {n: b"%d" % n for n in range(6)}
    assert served.connections == 4


@pytest.mark.parametrize("depth", [1, 4])
def test_tls_with_the_callers_ca_and_without_it_the_usual_way(tmp_path: Path, depth: int
                                                               ) -> None:
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    big = bytes(range(256)) * 1024  # 256 KiB: an answer of many TLS records
    server = Keyed({"/b/a": _ok(b"a"), "/b/big": _ok(big), "/b/c": _ok(b"c")}, context)
    try:
        getter = _getter(server, "https", ca=cert)
        assert _fetched(getter, ["a", "big", "c", "a", "c"], connections=2, depth=depth) == {
            0: b"a", 1: big, 2: b"c", 3: b"a", 4: b"c"}
        assert server.connections == 2
        assert (server.pipelined > 0) == (depth > 1)  # answers of many TLS records in turn
        # a certificate this client does not trust: no connection, the usual way says why
        refused = _getter(server, "https")
        assert _fetched(refused, ["a"]) == {0: None}
    finally:
        server.close()


class _Refusing:
    """A wire whose every connection is one the server has already closed: a socket
    whose peer is gone, so each send fails."""

    read_timeout = 5.0

    def __init__(self) -> None:
        self.made = 0

    def take(self) -> tuple[Any, bool]:
        from distcp.storage.http.wire import _Connection

        ours, theirs = socket.socketpair()
        theirs.close()
        self.made += 1
        return _Connection(ours), False

    def give(self, link: Any) -> None:
        link.close()


def test_new_connections_that_refuse_every_request_end_the_reads(served: Keyed,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    getter = _getter(served)
    refusing = _Refusing()
    monkeypatch.setattr(getter, "wire", lambda host: refusing)
    got: dict[int, bytes | None] = {}
    reading = threading.Thread(target=lambda: got.update(_fetched(getter, ["a", "b", "c"])),
                               daemon=True)
    reading.start()
    reading.join(10)
    assert not reading.is_alive(), "the reads never ended"
    assert got == {0: None, 1: None, 2: None} and refusing.made <= 3 + inflight.CONNECTIONS


def _put(getter: Any, bodies: dict[str, bytes | None], **kwargs: Any
         ) -> tuple[dict[str, bool | None], list[str]]:
    """What ``put`` gave for each key, and the keys whose bodies it asked for, in turn."""
    keys = list(bodies)
    asked: list[str] = []

    def body(index: int) -> bytes | None:
        asked.append(keys[index])
        return bodies[keys[index]]

    out: dict[str, bool | None] = {}
    for index, ok in inflight.put(getter, [("b", k) for k in keys], body, **kwargs):
        assert keys[index] not in out, f"{keys[index]} given twice"
        out[keys[index]] = ok
    assert sorted(out) == sorted(keys)
    return out, asked


def test_puts_are_sent_whole_with_their_digests_and_every_answer_is_checked(
        served: Keyed) -> None:
    bodies: dict[str, bytes | None] = {f"ok{n}": b"body %d" % n for n in range(10)}
    # 3 MiB: more than a socket takes at once, so written in many sends
    bodies.update({"empty": b"", "big": bytes(range(256)) * 12288, "other": b"x",
                   "busy": b"y", "cut": b"z", "skipped": None})
    served.answers.update({f"/b/{k}": STORED for k in bodies})
    # an ETag that is not the MD5 sent; a refusal; a connection closed instead
    served.answers.update({"/b/other": _ok(b""), "/b/busy": BUSY, "/b/cut": CUT})
    sent = lean.requests_sent()
    got, asked = _put(_getter(served), bodies, connections=4)
    assert got == {**{f"ok{n}": True for n in range(10)}, "empty": True, "big": True,
                   "other": False, "busy": None, "cut": None, "skipped": None}
    assert sorted(asked) == sorted(bodies)  # each body asked for once
    assert "/b/skipped" not in served.paths
    for key, data in bodies.items():
        if data is None:
            continue
        head = served.heads[f"/b/{key}"]
        assert head.startswith(f"PUT /b/{key} HTTP/1.1".encode())
        assert served.received[f"/b/{key}"] == data
        assert _header(head, b"content-md5") == base64.b64encode(hashlib.md5(data).digest())
        assert _header(head, b"x-amz-content-sha256") == hashlib.sha256(data).hexdigest().encode()
        assert (_header(head, b"authorization") or b"").startswith(b"AWS4-HMAC-SHA256 Credential=AKIATEST/")
    # one PUT a body given, none sent twice, on 4 connections and a new one for the cut
    assert sorted(served.paths) == sorted(f"/b/{k}" for k, v in bodies.items() if v is not None)
    assert lean.requests_sent() - sent == len(bodies) - 1
    assert served.connections <= 4 + 3


def test_after_no_answer_in_time_no_more_bodies_are_asked_for(served: Keyed) -> None:
    served.answers.update({"/b/a": STORED, "/b/slow": STALL, "/b/c": STORED, "/b/d": STORED})
    t = time.monotonic()
    got, asked = _put(_getter(served), {"a": b"1", "slow": b"2", "c": b"3", "d": b"4"},
                      connections=1, timeout=0.5)
    assert got == {"a": True, "slow": None, "c": None, "d": None}
    assert asked == ["a", "slow"]  # the files after it are not read: their usual way does
    assert time.monotonic() - t < 5
