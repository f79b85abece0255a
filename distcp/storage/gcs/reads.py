"""Small GCS objects read from one thread, pipelined on kept connections (executor).

Each object read through Google's SDK costs the client 2-3 ms of CPU, where rclone's Go
client sends the same GET: GCS -> local of 20,000 objects of 64 B on fake-gcs-server
took 57.2 s against rclone's 10.35 s (5.5x, 2026-12-04, ``bench_stores.py``). Here
each object is one media GET of its listed generation,
``/download/storage/v1/b/BUCKET/o/NAME?alt=media&generation=G`` (the URL the SDK
itself downloads from), written by hand and sent with the others through
``distcp.storage.http.pipelined``, as S3's small objects are
(``distcp.storage.s3.inflight``).

An answer is taken only when it is a ``200`` whose ``x-goog-generation`` is the one
asked for and whose bytes are the stored ones (no ``Content-Encoding``, stored as
``identity``: GCS would otherwise decompress on the way). Anything else, and every
object whose listed version is an ETag rather than a generation, gives None: the
caller reads it its usual way (``GcsStorage.read_version``, through the SDK), which
knows every retry and error.

Where the environment names a proxy (``HTTPS_PROXY`` and the like) every object goes
the SDK's way, which honours it. The requests carry what the SDK's client of the same
options would send: nothing for an emulator's anonymous access, else its credentials'
OAuth token (refreshed first when it has expired; a token that expires meanwhile is
answered 401, and those objects go the usual way), and the paying project under
requester pays.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from distcp.storage.gcs import objects
from distcp.storage.http.pipelined import Request, each, exchange, request
from distcp.storage.http.wire import Answer, Wire, proxied
from distcp.storage.watchdog import watchdog_seconds

#: GETs in flight: ``GET_DEPTH`` pipelined on each of ``GET_CONNECTIONS``, as S3's.
GET_CONNECTIONS, GET_DEPTH = 8, 4

_wires: dict[tuple[str, str, float], Wire] = {}
_lock = threading.Lock()


def _after_fork() -> None:
    """A forked child keeps none of the parent's connections (two processes writing
    requests on one socket would read each other's answers) nor a lock a parent's
    thread held."""
    global _lock
    _lock = threading.Lock()
    _wires.clear()


os.register_at_fork(after_in_child=_after_fork)


def fetch(options: dict[str, Any], wanted: Sequence[tuple[str, str]]
          ) -> Iterator[tuple[int, bytes | None]] | None:
    """Each ``(bucket/name, generation)`` of ``wanted`` read with one GET of that
    generation: yields ``(index, bytes)`` as the answers come, every index once, None
    where this way did not read it (module docstring). None at once where this way
    cannot send at all (an endpoint that is not HTTP, credentials that cannot be had, a
    proxy named by the environment: the SDK sends through it, the wire would not)."""
    if proxied():
        return None
    client = objects.client(options)
    base = urlsplit(str(getattr(getattr(client, "_connection", None), "API_BASE_URL", "")))
    headers = _authorization(client)
    if base.scheme not in ("http", "https") or not base.netloc or headers is None:
        return None
    limit = min(float(objects.TIMEOUT[1]), watchdog_seconds())
    payer = objects.bucket(options, objects.split(wanted[0][0])[0]).user_project \
        if options.get("requester_pays") else None
    prefix = base.path.rstrip("/") + "/download/storage/v1/b/"
    paying = f"&userProject={quote(payer, safe='')}" if payer else ""

    def requests() -> Iterator[Request]:
        for index, (path, generation) in enumerate(wanted):
            bucket, name = objects.split(path)
            yield index, request(
                "GET", base.netloc, f"{prefix}{quote(bucket, safe='')}/o/"
                f"{quote(name, safe='')}?alt=media&generation={generation}{paying}",
                headers) if generation.isdigit() else None

    def read() -> Iterator[tuple[int, bytes | None]]:
        for index, answer in each(wanted, exchange(_wire(base.scheme, base.netloc, limit),
                                                   requests(), _sent, GET_CONNECTIONS,
                                                   limit, GET_DEPTH)):
            yield index, answer.data if answer is not None \
                and _stored(answer, wanted[index][1]) else None

    return read()


def _stored(answer: Answer, generation: str) -> bool:
    """Whether ``answer`` holds the stored bytes of ``generation``."""
    got = answer.headers
    return answer.status == 200 and got.get("x-goog-generation") == generation \
        and got.get("content-encoding", "identity") == "identity" \
        and got.get("x-goog-stored-content-encoding", "identity") == "identity"


def _authorization(client: Any) -> dict[str, str] | None:
    """The headers the SDK's ``client`` authorizes a request with (none for anonymous
    access), its token refreshed first if it expired; None where they cannot be had
    (the usual way then says why)."""
    headers: dict[str, str] = {}
    credentials = getattr(client, "_credentials", None)
    if credentials is None:
        return headers
    try:
        from google.auth.transport.requests import Request as AuthRequest

        credentials.before_request(AuthRequest(), "GET", "", headers)
    except Exception:  # noqa: BLE001 - the SDK's own request reports it
        return None
    return {k.lower(): v for k, v in headers.items()}


def _sent() -> None:
    """Reads of GCS are not counted (``distcp.request_count`` counts S3's requests)."""


def _wire(scheme: str, authority: str, limit: float) -> Wire:
    """The kept connections to ``authority``, their timeouts within ``limit``."""
    with _lock:
        wire = _wires.get((scheme, authority, limit))
        if wire is None:
            wire = _wires[(scheme, authority, limit)] = Wire(
                scheme, authority, connect_timeout=min(float(objects.TIMEOUT[0]), limit),
                read_timeout=limit, maxsize=GET_CONNECTIONS)
        return wire
