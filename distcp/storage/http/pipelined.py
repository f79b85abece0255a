"""Many requests from one thread, pipelined on kept connections a selector serves (driver and executor).

An object store's small objects cost the client more CPU per request than bytes: read
by 32 threads, each sending one request at a time and waiting for its answer, two cores
spent more of the process's time handing the GIL to each other than reading (``strace
-c`` counted 72 ``futex`` calls an object in a download of 5,000 objects of 64 B from
``rclone serve s3``, 2026-12-01). Here one thread writes each request on one of
several sockets and reads whichever answer arrives (``selectors``): no thread waits
for another. Requests may be pipelined, several sent in one write on a connection and
answered in turn (HTTP/1.1): a write and a read then carry several of each.

This module knows HTTP, not any store: the caller makes each request's bytes (S3's
signed GETs and PUTs, ``distcp.storage.s3.inflight``; GCS's media GETs,
``distcp.storage.gcs.reads``) and judges each answer. The connections are the wire's
(``distcp.storage.http.wire``: TLS set up there), kept between calls. Only the plain
case is answered: a whole answer with a ``Content-Length``. Anything else (a
connection that closes, an answer that does not parse, no answer within the timeout)
gives None for that request, and the caller sends it its usual way, which knows every
retry and error: what a run reports never depends on which way a request went.
"""

from __future__ import annotations

import selectors
import ssl
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from distcp.storage.http.wire import MAX_HEAD, Answer, ProtocolError, parse_head

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


def request(method: str, host: str, path: str, headers: dict[str, str],
            body: bytes = b"") -> bytes:
    """A request's bytes: its head, with a ``Content-Length`` unless it is a GET, and
    ``body``."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}",
             *(f"{k}: {v}" for k, v in headers.items())]
    if method != "GET":
        lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join([*lines, "", ""]).encode("latin-1") + body


def each(wanted: Sequence[Any], answers: Iterator[tuple[int, Answer | None]]
         ) -> Iterator[tuple[int, Answer | None]]:
    """``answers``, then None for each index of ``wanted`` they did not give (the
    requests never sent when the exchange ended early)."""
    given = set()
    for index, answer in answers:
        given.add(index)
        yield index, answer
    yield from ((n, None) for n in range(len(wanted)) if n not in given)


def exchange(wire: Any, requests: Iterable[Request], on_send: Callable[[], None],
             connections: int, timeout: float, depth: int = 1
             ) -> Iterator[tuple[int, Answer | None]]:
    """Each request of ``requests`` (taken from it when a connection has room) sent on
    one of ``connections`` of ``wire``'s connections, at most ``depth`` of them waiting
    for their answers on one connection (HTTP/1.1 pipelining: sent in one write,
    answered in turn) once it kept alive after an answer (a new connection carries one
    request until then: moto's server ends each after its answer). Yields ``(index,
    answer)`` as the answers come; the answer None where it is not a whole one with a
    Content-Length (module docstring). ``on_send`` is called for each request sent.
    When nothing answers within ``timeout`` seconds, the requests waited for give None and the rest of ``requests`` is not
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
    limit = timeout
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
