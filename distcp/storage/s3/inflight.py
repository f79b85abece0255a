"""S3's small requests from one thread, pipelined on kept connections (driver and executor).

A unit of small objects was read by 32 threads, each sending one GET at a time and
waiting for its answer. On two cores the threads spent more of the process's time
handing the GIL to each other than reading: ``strace -c`` counted 72 ``futex`` calls
an object in a download of 5,000 objects of 64 B (``--copying driver``, ``rclone serve
s3``, 2026-12-01), and the client's system time was 0.6-0.8 ms an object. Uploads
with per-file visibility had the same storm: 68 ``futex`` calls a file for 2,000
PutObjects. Here one thread writes each signed request on one of ``connections``
sockets and reads whichever answer arrives (``distcp.storage.http.pipelined``).
GETs are pipelined, several sent in one write on a connection and answered in turn
(HTTP/1.1): a write and a read carry several requests and answers, which saved 40 µs
of the client's CPU a GET and 25 of the server's (``GET_DEPTH``). An answer's ETag
must be the one asked for: ``rclone serve s3`` answers a changed object's new bytes to
an ``If-Match`` of the old ETag, and a server that answered out of order could not
pass one object's bytes for another's.
``fetch`` sends GETs (each object's file is written by the caller as its body comes);
``put`` sends PutObjects whose bodies the caller makes when a connection is free, so
a unit holds at most one body a connection.

The connections are the lean getter's (``distcp.storage.http.wire``), kept between
units. Only the plain case is answered here: a ``200`` with a
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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from distcp.storage.http.pipelined import Request, each, exchange, request
from distcp.storage.s3 import settings
from distcp.storage.s3.lean import DISABLE_ENV, same_etag, sign

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
            yield index, (request("GET", host, path, sign(
                "GET", host, path, headers, credentials, getter.region)) if there == host
                else None)  # another host's object: its usual way

    limit = settings.READ_TIMEOUT_S if timeout is None else timeout
    for index, answer in each(wanted, exchange(getter.wire(host), requests(),
                                               getter.count_sent, connections, limit,
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
            yield index, request("PUT", host, path, sign(
                "PUT", host, path, headers, credentials, getter.region,
                payload=hashlib.sha256(data).hexdigest()), data)

    limit = settings.READ_TIMEOUT_S if timeout is None else timeout
    for index, answer in each(wanted, exchange(getter.wire(host), requests(),
                                               getter.count_sent, connections, limit)):
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


