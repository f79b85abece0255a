"""The GCS JSON API as the SDK's client reaches it, for requests written by hand (driver and executor).

Through Google's SDK each request costs the client CPU in a thread that holds the GIL
while it builds and parses. Where many small requests go at once, a unit's small
objects read (``gcs/reads.py``) and a file set's staged objects published
(``gcs/publishes.py``), each is written by hand and sent with the others from one
thread through ``distcp.storage.http.pipelined``, on connections kept here; a small
file's upload (``gcs/uploads.py``) is written by hand too, sent from its task's thread.

Such a request carries what the SDK's client of the same options would send: to its
API's base URL (Google's, or an emulator's), with its credentials' OAuth token
(refreshed first when it has expired; nothing for anonymous access) and, under
requester pays, the paying project. Where the environment names a proxy (``HTTPS_PROXY``
and the like) nothing goes this way: the SDK honours the proxy, the wire would not. A
forked child keeps none of the parent's connections.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from distcp.storage.gcs import objects
from distcp.storage.http.pipelined import Request, each, exchange
from distcp.storage.http.wire import Answer, Wire, proxied
from distcp.storage.watchdog import watchdog_seconds

#: Connections kept to one endpoint, as S3's small requests keep.
CONNECTIONS = 8

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


@dataclass(frozen=True)
class Endpoint:
    """Where the SDK's client of some options sends, and what it sends with: ``root``,
    its base URL's path (no trailing slash); ``headers``, its authorization;
    ``payer``, the project that pays under requester pays; ``limit``, the seconds an
    answer may take."""

    scheme: str
    netloc: str
    root: str
    headers: dict[str, str]
    payer: str | None
    limit: float

    def paying(self, sep: str = "&") -> str:
        """``userProject`` as the query's next parameter (after ``sep``), or nothing."""
        return f"{sep}userProject={quote(self.payer, safe='')}" if self.payer else ""


def endpoint(options: dict[str, Any]) -> Endpoint | None:
    """The endpoint of the SDK's client of ``options``; None where requests written
    here cannot go (a proxy named by the environment, an endpoint that is not HTTP,
    credentials that cannot be had: the SDK's way then says why)."""
    if proxied():
        return None
    client = objects.client(options)
    base = urlsplit(str(getattr(getattr(client, "_connection", None), "API_BASE_URL", "")))
    headers = authorization(client)
    if base.scheme not in ("http", "https") or not base.netloc or headers is None:
        return None
    payer = (options.get("project") or client.project) if options.get("requester_pays") \
        else None
    return Endpoint(base.scheme, base.netloc, base.path.rstrip("/"), headers, payer,
                    min(float(objects.TIMEOUT[1]), watchdog_seconds()))


def send(at: Endpoint, count: int, requests: Iterable[Request], depth: int
         ) -> Iterator[tuple[int, Answer | None]]:
    """The answers to ``count`` requests sent to ``at``, at most ``depth`` pipelined on
    each kept connection: ``(index, answer)`` as they come, every index once, None
    where no whole answer came (``pipelined.exchange``)."""
    return each(range(count), exchange(_wire(at), requests, _sent, CONNECTIONS, at.limit,
                                       depth))


def one(at: Endpoint, method: str, target: str, headers: dict[str, str], body: bytes
        ) -> Answer | None:
    """One request to ``at`` on a kept connection, from the calling thread: its answer,
    None where none came whole (the SDK's way then says why)."""
    try:
        return _wire(at).request(method, target, headers, body)
    except OSError:
        return None


def name(path: str) -> str:
    """``bucket/name`` as the JSON API's resource path: ``/b/BUCKET/o/NAME``, each
    percent-encoded whole (an object's name is data, never part of the URL's syntax)."""
    bucket, key = objects.split(path)
    return f"/b/{quote(bucket, safe='')}/o/{quote(key, safe='')}"


def authorization(client: Any) -> dict[str, str] | None:
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
    """GCS's requests are not counted (``distcp.request_count`` counts S3's requests)."""


def _wire(at: Endpoint) -> Wire:
    """The kept connections to ``at``, their timeouts within its limit."""
    key = (at.scheme, at.netloc, at.limit)
    with _lock:
        wire = _wires.get(key)
        if wire is None:
            wire = _wires[key] = Wire(at.scheme, at.netloc,
                                      connect_timeout=min(float(objects.TIMEOUT[0]), at.limit),
                                      read_timeout=at.limit, maxsize=CONNECTIONS)
        return wire
