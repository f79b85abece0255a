"""Many small GETs from one thread, on kept connections a selector serves (driver and executor).

A unit of small objects was read by 32 threads, each sending one GET at a time and
waiting for its answer. On two cores the threads spent more of the process's time
handing the GIL to each other than reading: ``strace -c`` counted 72 ``futex`` calls
an object in a download of 5,000 objects of 64 B (``--copying driver``, ``rclone serve
s3``, 2026-12-01), and the client's system time was 0.6-0.8 ms an object. Here one
thread writes each request on one of ``connections`` sockets and reads whichever
answer arrives (``selectors``): no thread waits for another, and the objects' files are
written by that same thread as their bodies come.

The connections are the wire's own (``distcp.storage.s3.wire``: TLS set up there),
kept between units. Only the plain case is answered here: a ``200`` with a
``Content-Length``. Anything else (another status, a redirect, a connection that
closes, an answer that does not parse, no answer within the read timeout) gives None
for that object, and the caller reads it its usual way (``Storage.read_version``),
which knows every retry and error: what a run reports never depends on which way an
object was read.
"""

from __future__ import annotations

import selectors
import ssl
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from distcp.storage.s3 import settings
from distcp.storage.s3.lean import sign
from distcp.storage.s3.wire import MAX_HEAD, ProtocolError, parse_head

#: GETs one unit keeps in flight, each on a connection of its own: as many as the 32
#: threads had (``copying.task.SMALL_IN_FLIGHT``). On loopback 16, 32 and 64 read 5,000
#: objects of 64 B alike (a bare loop of 16 took 0.58 s where 32 threads took 1.23 s);
#: at a region's round trip the answers in flight set the pace.
CONNECTIONS = 32
_RECV = 256 * 1024


class _Conn:
    """One of the wire's connections (``wire._Connection``: its socket, and ``pending``,
    what arrived of the answer), whether it was kept from before, and the object it
    waits for (-1: none)."""

    __slots__ = ("index", "link", "reused")

    def __init__(self, link: Any, reused: bool) -> None:
        self.link, self.reused, self.index = link, reused, -1


def fetch(getter: Any, wanted: Sequence[tuple[str, str, str]],
          connections: int = CONNECTIONS, timeout: float | None = None
          ) -> Iterator[tuple[int, bytes | None]]:
    """Each ``(bucket, key, etag)`` of ``wanted`` read with one GET If-Match (any
    version where ``etag`` is "") through ``getter`` (a ``lean.LeanGetter``): yields
    ``(index, body)`` as the answers come, every index once; ``body`` None where this
    way did not read it (module docstring). ``timeout``: seconds without any answer
    before the objects still waited for are given up here (default: the read timeout
    of the S3 settings). The connections are the getter's kept ones, given back for
    the next unit (the server then accepts no new connection a unit)."""
    limit = settings.READ_TIMEOUT_S if timeout is None else timeout
    todo = deque(range(len(wanted)))
    selector = selectors.DefaultSelector()
    live: list[_Conn] = []
    credentials = getter.credentials() if wanted else None
    if credentials is None or getter.endpoint.scheme not in ("http", "https"):
        yield from ((n, None) for n in todo)
        return
    host = getter.target(wanted[0][0], "")[0]
    wire = getter.wire(host)

    def start(conn: _Conn | None) -> Iterator[tuple[int, bytes | None]]:
        """``conn`` (a new one if None) sent the next object's GET, or given back."""
        while todo:
            if conn is None:
                conn = _connect(wire)
                if conn is None:
                    return
                live.append(conn)
                selector.register(conn.link.sock, selectors.EVENT_READ, conn)
            index = todo.popleft()
            sent = _send(getter, conn, host, wanted[index], credentials)
            if sent is None:  # another host's object: its usual way
                yield index, None
                continue
            if sent:
                conn.index = index
                return
            _drop(conn, selector, live)
            if conn.reused:  # a kept connection the server had closed: a new one takes it
                todo.appendleft(index)
            else:  # a new one that refuses it: the usual way says why
                yield index, None
            conn = None
        if conn is not None:
            _keep(conn, wire, selector, live)

    try:
        for _ in range(min(connections, len(wanted))):
            yield from start(None)
        while any(c.index >= 0 for c in live):
            events = selector.select(limit)
            if not events:  # nothing answered in time: the waiting ones go their usual way
                for conn in [c for c in live if c.index >= 0]:
                    yield conn.index, None
                    _drop(conn, selector, live)
                break
            for key, _ in events:
                conn = key.data
                done, body, keep = _receive(conn.link)
                if not done:
                    continue
                index, conn.index = conn.index, -1
                if body is None and conn.reused and not conn.link.pending:
                    todo.appendleft(index)  # a kept connection the server had closed
                    _drop(conn, selector, live)
                    yield from start(None)
                    continue
                yield index, body
                if not keep:
                    _drop(conn, selector, live)
                yield from start(conn if keep else None)
        yield from ((n, None) for n in todo)  # no connection could be made for these
    finally:
        while live:
            _drop(live[-1], selector, live)
        selector.close()


def _connect(wire: Any) -> _Conn | None:
    """One of ``wire``'s kept connections, else a new one, made non-blocking; None if
    none can be made (the objects then go their usual way, which says why)."""
    try:
        link, reused = wire.take()
    except OSError:
        return None
    link.sock.setblocking(False)
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


def _send(getter: Any, conn: _Conn, host: str, item: tuple[str, str, str], credentials: Any
          ) -> bool | None:
    """The GET of ``item`` written on ``conn``: True; False if the socket did not take
    it whole (a connection the server closed or reset; a live one takes a GET's head
    whole); None for an object of another host."""
    bucket, key, etag = item
    target, path = getter.target(bucket, key)
    if target != host:
        return None
    headers = sign("GET", host, path, {"if-match": etag} if etag else {}, credentials,
                   getter.region)
    request = "\r\n".join([f"GET {path} HTTP/1.1", f"Host: {host}",
                            *(f"{k}: {v}" for k, v in headers.items()), "", ""]
                           ).encode("latin-1")
    conn.link.pending.clear()
    try:
        sent = conn.link.sock.send(request)
    except OSError:  # ssl.SSLWant*Error included: a new connection takes the request
        return False
    getter.count_sent()
    return bool(sent == len(request))


def _receive(link: Any) -> tuple[bool, bytes | None, bool]:
    """Read what ``link`` has: (answer complete, its body if a 200, connection
    reusable). An answer this way does not serve is complete with None, and its
    connection is not reused."""
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
    if status != 200 or "transfer-encoding" in headers:
        return True, None, False
    start = end + 4
    if len(got) < start + length:
        return False, None, True
    if len(got) > start + length:  # bytes past the answer: not ours to guess at
        return True, None, False
    body = bytes(got[start:])
    got.clear()
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    return True, body, keep
