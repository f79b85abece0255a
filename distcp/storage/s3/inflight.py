"""Many small requests from one thread, on kept connections a selector serves (driver and executor).

A unit of small objects was read by 32 threads, each sending one GET at a time and
waiting for its answer. On two cores the threads spent more of the process's time
handing the GIL to each other than reading: ``strace -c`` counted 72 ``futex`` calls
an object in a download of 5,000 objects of 64 B (``--copying driver``, ``rclone serve
s3``, 2026-12-01), and the client's system time was 0.6-0.8 ms an object. Uploads
with per-file visibility had the same storm: 68 ``futex`` calls a file for 2,000
PutObjects. Here one thread writes each request on one of ``connections`` sockets
and reads whichever answer arrives (``selectors``): no thread waits for another.
``fetch`` sends GETs (each object's file is written by the caller as its body comes);
``put`` sends PutObjects whose bodies the caller makes when a connection is free, so
a unit holds at most one body a connection.

The connections are the wire's own (``distcp.storage.s3.wire``: TLS set up there),
kept between units. Only the plain case is answered here: a ``200`` with a
``Content-Length``. Anything else (another status, a redirect, a connection that
closes, an answer that does not parse, no answer within the read timeout) gives None
for that request, and the caller sends it its usual way (``Storage.read_version``,
``Storage.publish_whole``), which knows every retry and error: what a run reports
never depends on which way a request went.
"""

from __future__ import annotations

import base64
import hashlib
import selectors
import ssl
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from distcp.storage.s3 import settings
from distcp.storage.s3.lean import sign
from distcp.storage.s3.wire import MAX_HEAD, Answer, ProtocolError, parse_head

#: Requests one unit keeps in flight, each on a connection of its own: as many as the
#: 32 threads had (``copying.task.SMALL_IN_FLIGHT``). On loopback 16, 32 and 64 read
#: 5,000 objects of 64 B alike (a bare loop of 16 took 0.58 s where 32 threads took
#: 1.23 s); at a region's round trip the answers in flight set the pace.
CONNECTIONS = 32
_RECV = 256 * 1024

#: One request: its index in the caller's list and its bytes (head and body), or None
#: where the caller does not send it (the index then comes back with None at once).
Request = tuple[int, bytes | None]


class _Conn:
    """One of the wire's connections (``wire._Connection``: its socket, and ``pending``,
    what arrived of the answer), whether it was kept from before, and the request it
    carries (index -1: none)."""

    __slots__ = ("index", "link", "request", "reused")

    def __init__(self, link: Any, reused: bool) -> None:
        self.link, self.reused, self.index, self.request = link, reused, -1, b""


def fetch(getter: Any, wanted: Sequence[tuple[str, str, str]],
          connections: int = CONNECTIONS, timeout: float | None = None
          ) -> Iterator[tuple[int, bytes | None]]:
    """Each ``(bucket, key, etag)`` of ``wanted`` read with one GET If-Match (any
    version where ``etag`` is "") through ``getter`` (a ``lean.LeanGetter``): yields
    ``(index, body)`` as the answers come, every index once; ``body`` None where this
    way did not read it (module docstring). ``timeout``: seconds without any answer
    before the requests still waited for are given up here (default: the read timeout
    of the S3 settings)."""
    target = _target(getter, wanted)
    if target is None:
        yield from ((n, None) for n in range(len(wanted)))
        return
    host, credentials = target

    def requests() -> Iterator[Request]:
        for index, (bucket, key, etag) in enumerate(wanted):
            there, path = getter.target(bucket, key)
            headers = {"if-match": etag} if etag else {}
            yield index, (_request("GET", host, path, sign(
                "GET", host, path, headers, credentials, getter.region)) if there == host
                else None)  # another host's object: its usual way

    for index, answer in _each(wanted, exchange(getter.wire(host), requests(),
                                                getter.count_sent, connections, timeout)):
        yield index, answer.data if answer is not None and answer.status == 200 else None


def put(getter: Any, wanted: Sequence[tuple[str, str]],
        body: Callable[[int], bytes | None], connections: int = CONNECTIONS,
        timeout: float | None = None) -> Iterator[tuple[int, bool | None]]:
    """Each ``(bucket, key)`` of ``wanted`` written with one PutObject of ``body(index)``
    (asked when a connection is free to send it; None: not sent), with its Content-MD5
    (a server that received other bytes refuses them): yields ``(index, True)`` where
    the answer's ETag is the body's MD5, ``(index, False)`` where it is another (the
    object may hold other bytes: the caller checks it its usual way), and ``(index,
    None)`` where this way did not write it or the caller did not give a body."""
    target = _target(getter, wanted)
    if target is None:
        yield from ((n, None) for n in range(len(wanted)))
        return
    host, credentials = target
    digests: dict[int, str] = {}

    def requests() -> Iterator[Request]:
        for index, (bucket, key) in enumerate(wanted):
            there, path = getter.target(bucket, key)
            data = body(index) if there == host else None
            if data is None:
                yield index, None
                continue
            md5 = hashlib.md5(data)
            digests[index] = md5.hexdigest()
            headers = {"content-md5": base64.b64encode(md5.digest()).decode()}
            yield index, _request("PUT", host, path, sign(
                "PUT", host, path, headers, credentials, getter.region,
                payload=hashlib.sha256(data).hexdigest()), data)

    for index, answer in _each(wanted, exchange(getter.wire(host), requests(),
                                                getter.count_sent, connections, timeout)):
        sent = digests.pop(index, "")
        if answer is None or answer.status != 200 or "etag" not in answer.headers:
            yield index, None
        else:
            yield index, answer.headers["etag"].strip('"') == sent


def _target(getter: Any, wanted: Sequence[tuple[str, ...]]) -> tuple[str, Any] | None:
    """The host the first of ``wanted`` is sent to and the credentials to sign with;
    None where this way cannot send (none wanted, no credentials, not HTTP)."""
    credentials = getter.credentials() if wanted else None
    if credentials is None or getter.endpoint.scheme not in ("http", "https"):
        return None
    return getter.target(wanted[0][0], "")[0], credentials


def _request(method: str, host: str, path: str, headers: dict[str, str],
             body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}",
             *(f"{k}: {v}" for k, v in headers.items())]
    if method != "GET":
        lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join([*lines, "", ""]).encode("latin-1") + body


def _each(wanted: Sequence[Any], answers: Iterator[tuple[int, Answer | None]]
          ) -> Iterator[tuple[int, Answer | None]]:
    """``answers``, then None for each index of ``wanted`` they did not give (the
    requests never sent when the exchange ended early)."""
    given = set()
    for index, answer in answers:
        given.add(index)
        yield index, answer
    yield from ((n, None) for n in range(len(wanted)) if n not in given)


def exchange(wire: Any, requests: Iterable[Request], on_send: Callable[[], None],
             connections: int = CONNECTIONS, timeout: float | None = None
             ) -> Iterator[tuple[int, Answer | None]]:
    """Each request of ``requests`` (taken from it when a connection is free) sent on
    one of ``connections`` of ``wire``'s connections: yields ``(index, answer)`` as
    the answers come; the answer None where it is not a whole one with a
    Content-Length (module docstring). ``on_send`` is called for each request sent.
    A kept connection the server had closed before answering is replaced and its
    request sent again on the new one; a new connection that fails its request gives
    None (the usual way says why). When nothing answers within ``timeout`` seconds
    (default: the S3 settings' read timeout), the requests waited for give None and
    the rest of ``requests`` is not taken. The connections go back to the wire.

    A request is written whole before the loop goes on (``sendall`` within the
    timeout): the bodies are small, and a server reads a request before it answers."""
    limit = settings.READ_TIMEOUT_S if timeout is None else timeout
    source = iter(requests)
    again: deque[tuple[int, bytes]] = deque()  # requests of kept connections found closed
    selector = selectors.DefaultSelector()
    live: list[_Conn] = []

    def start(conn: _Conn | None) -> Iterator[tuple[int, Answer | None]]:
        """``conn`` (a new one if None) sent the next request, or given back."""
        while (item := again.popleft() if again else next(source, None)) is not None:
            index, request = item
            if request is None:
                yield index, None
                continue
            if conn is None:
                conn = _connect(wire, limit)
                if conn is None:  # none can be made: the usual way says why
                    yield index, None
                    continue
                live.append(conn)
                selector.register(conn.link.sock, selectors.EVENT_READ, conn)
            conn.index, conn.request = index, request
            conn.link.pending.clear()
            on_send()
            try:
                conn.link.sock.sendall(request)
                return
            except OSError:  # closed or reset by the server, or it read nothing in time
                yield from failed(conn)
            conn = None
        if conn is not None:
            _keep(conn, wire, selector, live)

    def failed(conn: _Conn) -> Iterator[tuple[int, Answer | None]]:
        """``conn`` broke before its answer: a kept one the server had closed gives
        its request to a new connection; any other gives None for it."""
        _drop(conn, selector, live)
        if conn.reused and not conn.link.pending:
            again.appendleft((conn.index, conn.request))
        else:
            yield conn.index, None

    try:
        for _ in range(connections):
            yield from start(None)
            if not live:
                break  # nothing more to send
        while live:
            events = selector.select(limit)
            if not events:  # nothing answered in time: the waiting ones go their usual way
                for conn in live[:]:  # each one dropped
                    _drop(conn, selector, live)
                    yield conn.index, None
                return
            for key, _ in events:
                conn = key.data
                done, answer, keep = _receive(conn.link)
                if not done:
                    continue
                if answer is None and conn.reused and not conn.link.pending:
                    yield from failed(conn)  # a kept connection the server had closed
                    yield from start(None)
                    continue
                index, conn.index = conn.index, -1
                yield index, answer
                if not keep:
                    _drop(conn, selector, live)
                yield from start(conn if keep else None)
    finally:
        while live:
            _drop(live[-1], selector, live)
        selector.close()


def _connect(wire: Any, limit: float) -> _Conn | None:
    """One of ``wire``'s kept connections, else a new one, its writes bounded by
    ``limit`` seconds; None if none can be made (the requests then go their usual way,
    which says why)."""
    try:
        link, reused = wire.take()
    except OSError:
        return None
    link.sock.settimeout(limit)
    return _Conn(link, reused)


def _keep(conn: _Conn, wire: Any, selector: selectors.BaseSelector, live: list[_Conn]
          ) -> None:
    """``conn`` back to the wire's kept connections, as the wire uses them."""
    selector.unregister(conn.link.sock)
    live.remove(conn)
    conn.link.pending.clear()
    conn.link.sock.settimeout(wire.read_timeout)
    wire.give(conn.link)


def _drop(conn: _Conn, selector: selectors.BaseSelector, live: list[_Conn]) -> None:
    selector.unregister(conn.link.sock)
    live.remove(conn)
    conn.link.close()


def _receive(link: Any) -> tuple[bool, Answer | None, bool]:
    """Read what ``link`` has: (answer complete, the answer, connection reusable). An
    answer this way does not serve is complete with None; a connection is reused only
    after a whole 2xx answer."""
    sock = link.sock
    try:
        chunk = sock.recv(_RECV)
        if chunk and isinstance(sock, ssl.SSLSocket):
            while sock.pending():  # records already decrypted: the selector never says
                chunk += sock.recv(_RECV)
    except (BlockingIOError, ssl.SSLWantReadError):  # no whole record yet
        return False, None, True
    except OSError:
        return True, None, False
    if not chunk:
        return True, None, False
    got = link.pending
    got += chunk
    end = got.find(b"\r\n\r\n")
    if end < 0:  # the head is still coming, unless it is longer than any we expect
        return (True, None, False) if len(got) > MAX_HEAD else (False, None, True)
    try:
        version, status, headers = parse_head(bytes(got[:end + 4]))
        length = int(headers.get("content-length", ""))
    except (ProtocolError, ValueError):
        return True, None, False
    if "transfer-encoding" in headers or status < 200:
        return True, None, False
    start = end + 4
    if len(got) < start + length:
        return False, None, True
    if len(got) > start + length:  # bytes past the answer: not ours to guess at
        return True, None, False
    answer = Answer(status, headers, bytes(got[start:]))
    got.clear()
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    return True, answer, keep and 200 <= status < 300
