"""Many small requests from one thread, on kept connections a selector serves (driver and executor).

A unit of small objects was read by 32 threads, each sending one GET at a time and
waiting for its answer. On two cores the threads spent more of the process's time
handing the GIL to each other than reading: ``strace -c`` counted 72 ``futex`` calls
an object in a download of 5,000 objects of 64 B (``--copying driver``, ``rclone serve
s3``, 2026-12-01), and the client's system time was 0.6-0.8 ms an object. Uploads
with per-file visibility had the same storm: 68 ``futex`` calls a file for 2,000
PutObjects. Here one thread writes each request on one of ``connections`` sockets
and reads whichever answer arrives (``selectors``): no thread waits for another.
GETs are pipelined, several sent in one write on a connection and answered in turn
(HTTP/1.1): a write and a read carry several requests and answers, which saved 40 µs
of the client's CPU a GET and 25 of the server's (``GET_DEPTH``). An answer's ETag
must be the one asked for: ``rclone serve s3`` answers a changed object's new bytes to
an ``If-Match`` of the old ETag, and a server that answered out of order could not
pass one object's bytes for another's.
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
import os
import selectors
import ssl
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from distcp.storage.s3 import settings
from distcp.storage.s3.lean import DISABLE_ENV, same_etag, sign
from distcp.storage.s3.wire import MAX_HEAD, Answer, ProtocolError, parse_head

#: Requests one unit keeps in flight, each on a connection of its own: as many as the
#: 32 threads had (``copying.task.SMALL_IN_FLIGHT``). On loopback 16, 32 and 64 read
#: 5,000 objects of 64 B alike (a bare loop of 16 took 0.58 s where 32 threads took
#: 1.23 s); at a region's round trip the answers in flight set the pace.
CONNECTIONS = 32
#: GETs go out ``GET_DEPTH`` at a time on each of ``GET_CONNECTIONS`` (the same 32 in
#: flight), pipelined: a write carries several requests and a read often several
#: answers. 6,000 GETs of 64 B from ``rclone serve s3`` on loopback, 3 rounds in turn
#: (2026-12-02): the client's CPU 79-90 µs a GET one a connection, 39-49 µs four a
#: connection; the server's 117-197 µs against 123-148 µs.
GET_CONNECTIONS, GET_DEPTH = 8, 4
#: ``PYDISTCP_S3_LEAN_GET=serial``: one GET at a time a connection, on ``CONNECTIONS``
#: (for a network in between that mishandles pipelined requests).
SERIAL = "serial"
_RECV = 256 * 1024

#: One request: its index in the caller's list and its bytes (head and body), or None
#: where the caller does not send it (the index then comes back with None at once).
Request = tuple[int, bytes | None]


class _Conn:
    """One of the wire's connections (``wire._Connection``: its socket, and ``pending``,
    what arrived of its answers) and what is known of it: whether it was kept from
    before; the requests sent on it whose answers are still to come, in the order they
    were sent; whether any answer came on it yet; whether it takes more requests
    (``last``: after an answer that is not a 2xx, only those already sent are read on
    it); whether it takes several at once (``proven``: kept from before, or kept alive
    after an answer)."""

    __slots__ = ("answered", "last", "link", "proven", "queue", "reused")

    def __init__(self, link: Any, reused: bool) -> None:
        self.link, self.reused, self.answered, self.last = link, reused, False, False
        self.proven = reused
        self.queue: deque[tuple[int, bytes]] = deque()


def fetch(getter: Any, wanted: Sequence[tuple[str, str, str]],
          connections: int = GET_CONNECTIONS, timeout: float | None = None,
          depth: int = GET_DEPTH) -> Iterator[tuple[int, bytes | None]]:
    """Each ``(bucket, key, etag)`` of ``wanted`` read with one GET If-Match (any
    version where ``etag`` is "") through ``getter`` (a ``lean.LeanGetter``): yields
    ``(index, body)`` as the answers come, every index once; ``body`` None where this
    way did not read it (module docstring). ``depth`` GETs go out at once on each of
    ``connections`` (``exchange``); an answer whose ETag is not the one asked for is
    None, so a server that answered pipelined requests out of order could never give
    one object's bytes for another. ``timeout``: seconds without any answer before the
    requests still waited for are given up here (default: the read timeout of the S3
    settings)."""
    target = _target(getter, wanted)
    if target is None:
        yield from ((n, None) for n in range(len(wanted)))
        return
    host, credentials = target
    if os.environ.get(DISABLE_ENV) == SERIAL:
        connections, depth = CONNECTIONS, 1

    def requests() -> Iterator[Request]:
        for index, (bucket, key, etag) in enumerate(wanted):
            there, path = getter.target(bucket, key)
            headers = {"if-match": etag} if etag else {}
            yield index, (_request("GET", host, path, sign(
                "GET", host, path, headers, credentials, getter.region)) if there == host
                else None)  # another host's object: its usual way

    for index, answer in _each(wanted, exchange(getter.wire(host), requests(),
                                                getter.count_sent, connections, timeout,
                                                depth)):
        yield index, answer.data if answer is not None and answer.status == 200 \
            and same_etag(answer.headers, wanted[index][2]) else None


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
             connections: int = CONNECTIONS, timeout: float | None = None, depth: int = 1
             ) -> Iterator[tuple[int, Answer | None]]:
    """Each request of ``requests`` (taken from it when a connection has room) sent on
    one of ``connections`` of ``wire``'s connections, at most ``depth`` of them waiting
    for their answers on one connection (HTTP/1.1 pipelining: sent in one write,
    answered in turn) once it kept alive after an answer (a new connection carries one
    request until then: moto's server ends each after its answer). Yields ``(index,
    answer)`` as the answers come; the answer None where it is not a whole one with a
    Content-Length (module docstring). ``on_send`` is called for each request sent.
    When nothing answers within ``timeout`` seconds (default: the S3 settings' read
    timeout), the requests waited for give None and the rest of ``requests`` is not
    taken. The connections go back to the wire.

    A connection that ends or breaks: its requests sent again on another connection,
    all of them where it was a kept one that ended before any answer (the server's idle
    close), else all but the one whose answer broke (None: the usual way says why).
    An answer that ends its connection (``Connection: close``) leaves the requests after
    it to another connection; one after which the connection is not reused (not a 2xx)
    is read with the answers after it, and the connection then closed. So, beyond a
    kept connection's idle close (sent again as before), a request is sent twice only
    where it waited behind another on a connection that ended: a GET (``put`` sends
    its PUTs one at a time a connection).

    A request is written whole before the loop goes on (``sendall`` within the
    timeout): the bodies are small, and a server reads a request before it answers."""
    limit = settings.READ_TIMEOUT_S if timeout is None else timeout
    source = iter(requests)
    again: deque[tuple[int, bytes]] = deque()  # requests to send again on another connection
    selector = selectors.DefaultSelector()
    live: list[_Conn] = []

    def take(batch: list[tuple[int, bytes]], room: int
             ) -> Iterator[tuple[int, Answer | None]]:
        """``batch`` filled up to ``room`` requests, those sent again first; None at
        once for what the caller does not send."""
        while len(batch) < room and \
                (item := again.popleft() if again else next(source, None)) is not None:
            index, request = item
            if request is None:
                yield index, None
            else:
                batch.append((index, request))

    def start(conn: _Conn | None) -> Iterator[tuple[int, Answer | None]]:
        """``conn`` (a new one if None, or if it takes no more) sent requests until
        ``depth`` wait on it (one on a connection not proven yet), in one write; given
        back to the wire when none waits on it and none is left to send."""
        if conn is not None and conn.last and not conn.queue:
            _drop(conn, selector, live)
            conn = None
        while True:
            batch: list[tuple[int, bytes]] = []
            yield from take(batch, 1 if conn is None else 0 if conn.last else
                            (depth if conn.proven else 1) - len(conn.queue))
            if not batch:
                if conn is not None and not conn.queue:
                    _keep(conn, wire, selector, live)
                return
            if conn is None:
                conn = _connect(wire, limit)
                if conn is None:  # none can be made: the usual way says why
                    yield from ((index, None) for index, _ in batch)
                    continue
                live.append(conn)
                selector.register(conn.link.sock, selectors.EVENT_READ, conn)
                if conn.proven:  # kept from an earlier unit: as many as it takes
                    yield from take(batch, depth)
            conn.queue.extend(batch)
            for _ in batch:
                on_send()
            try:
                conn.link.sock.sendall(batch[0][1] if len(batch) == 1
                                       else b"".join(request for _, request in batch))
                return
            except OSError:  # closed or reset by the server, or it read nothing in time
                yield from broken(conn)
            conn = None

    def broken(conn: _Conn) -> Iterator[tuple[int, Answer | None]]:
        """``conn`` ended or broke before the answers it waits for: which of them are
        sent again is said above."""
        _drop(conn, selector, live)
        waiting, conn.queue = conn.queue, deque()
        if waiting and not (conn.reused and not conn.answered and not conn.link.pending):
            yield waiting.popleft()[0], None
        again.extendleft(reversed(waiting))

    try:
        for _ in range(connections):
            yield from start(None)
            if not live:
                break  # nothing more to send
        while live:
            events = selector.select(limit)
            if not events:  # nothing answered in time: the waiting ones go their usual way
                for waited in live[:]:  # each one dropped
                    _drop(waited, selector, live)
                    yield from ((index, None) for index, _ in waited.queue)
                return
            for key, _ in events:
                conn = key.data
                got = _fill(conn.link)
                if got is None:
                    yield from broken(conn)
                    yield from start(None)
                    continue
                while got and conn.queue:
                    done, answer, keep = _answer(conn.link, alone=len(conn.queue) == 1)
                    if not done:
                        break
                    if answer is None:  # not ours to read: the stream is lost from here
                        yield from broken(conn)
                        break
                    conn.answered = True
                    yield conn.queue.popleft()[0], answer
                    if keep is None:  # the server ends the connection after this answer:
                        _drop(conn, selector, live)  # those after it were never read
                        again.extendleft(reversed(conn.queue))
                        conn.queue.clear()
                        break
                    conn.last = conn.last or not keep
                    conn.proven = conn.proven or bool(keep)
                yield from start(conn if conn in live else None)
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

def _fill(link: Any) -> bool | None:
    """Receive what ``link`` has into its ``pending``: True when bytes came, False when
    none yet (a TLS record not whole), None when the connection ended or broke."""
    sock = link.sock
    try:
        chunk = sock.recv(_RECV)
        if chunk and isinstance(sock, ssl.SSLSocket):
            while sock.pending():  # records already decrypted: the selector never says
                chunk += sock.recv(_RECV)
    except (BlockingIOError, ssl.SSLWantReadError):  # no whole record yet
        return False
    except OSError:
        return None
    if not chunk:
        return None
    link.pending += chunk
    return True


def _answer(link: Any, alone: bool) -> tuple[bool, Answer | None, bool | None]:
    """The first answer in ``link.pending``, taken out of it: (whole, the answer, what
    follows). Not whole yet: (False, None, True). An answer this way does not read (no
    Content-Length, chunked, interim, one too long, bytes past it when it is the only one
    waited for: ``alone``): (True, None, False). A whole one: (True, answer, True) when
    its connection carries more, False when it may carry only the answers already asked
    for (not a 2xx), None when the server ends it after this answer."""
    got = link.pending
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
    if alone and len(got) > start + length:  # bytes past the answer: not ours to guess at
        return True, None, False
    answer = Answer(status, headers, bytes(got[start:start + length]))
    del got[:start + length]
    if version != "HTTP/1.1" or "close" in headers.get("connection", "").lower():
        return True, answer, None
    return True, answer, 200 <= status < 300
