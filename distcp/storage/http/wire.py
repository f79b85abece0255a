"""HTTP/1.1 on kept-alive connections, nothing between us and the socket (driver and executor).

The lean S3 GET (``distcp.storage.s3.lean``) of a small object is bound by the client's CPU
per request. Measured here against ``rclone serve s3`` on loopback, 64-byte objects, one
thread: a signed GET through urllib3 (and so ``http.client``, whose header parsing goes
through the ``email`` package) cost 464 µs of CPU and ran 1,400 GETs/s; the same signed
request written on a socket and its answer split by hand cost 94 µs and ran 3,100/s.

So this module speaks just enough HTTP/1.1 for a GET, or a PUT or POST with its body in
hand (the lean uploads of ``distcp.storage.s3.lean``): one request at a time per
connection (no pipelining), answers with ``Content-Length``, chunked or read to the
close, interim ``1xx`` answers skipped, connections kept per endpoint and reused until
the server says ``close``. A kept connection the server closed meanwhile (its idle
timeout) is retried once on a new one, as every keep-alive client does. TLS uses the
standard library's context with the caller's verification settings. Anything it cannot
parse is an ``OSError``: the caller retries or falls back to its full client.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

#: Bytes a status line and headers may take: more is not an answer we expect.
MAX_HEAD = 64 * 1024
_RECV = 64 * 1024
#: A body up to this size goes out in one ``sendall`` with the head (one system call);
#: a bigger one is sent from where it lies, not copied behind the head.
_JOIN_BELOW = 256 * 1024


#: The variables that name a proxy. The wire speaks to the endpoint itself, never
#: through a proxy, so where one is set the stores' SDKs (which honour them) send.
PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
             "all_proxy")


def proxied() -> bool:
    """Whether the environment names a proxy (``PROXY_ENV``)."""
    return any(os.environ.get(name) for name in PROXY_ENV)


class ProtocolError(OSError):
    """An answer that is not the HTTP/1.1 we speak."""


class EndpointConnectionError(OSError):
    """No connection to the endpoint at all: named and worded as botocore's error of
    the same case, which ``driver_errors`` and the probe word as "S3 endpoint
    unreachable" (a refused port, an unknown host, no answer to the connect)."""


class _Stale(OSError):
    """A kept connection closed before the answer's first byte (the server's idle close)."""


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]  # names in lower case
    data: bytes


class _Connection:
    """One socket and the bytes received past the last answer."""

    __slots__ = ("pending", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = bytearray()

    def fill(self) -> int:
        """Receive what the socket has into ``pending``; 0 at the end of the stream."""
        chunk = self.sock.recv(_RECV)
        self.pending += chunk
        return len(chunk)

    def until(self, marker: bytes, limit: int) -> bytes:
        """The bytes up to and including ``marker``, taken out of ``pending``."""
        start = 0
        while True:
            at = self.pending.find(marker, start)
            if at >= 0:
                end = at + len(marker)
                out = bytes(self.pending[:end])
                del self.pending[:end]
                return out
            if len(self.pending) > limit:
                raise ProtocolError(f"no {marker!r} within {limit} bytes")
            start = max(0, len(self.pending) - len(marker) + 1)
            if not self.fill():
                raise ProtocolError("connection closed mid-answer")

    def exactly(self, n: int) -> bytes:
        while len(self.pending) < n:
            if not self.fill():
                raise ProtocolError(f"connection closed {n - len(self.pending)} bytes "
                                    "before the end of the body")
        out = bytes(self.pending[:n])
        del self.pending[:n]
        return out

    def rest(self) -> bytes:
        while self.fill():
            pass
        out = bytes(self.pending)
        self.pending.clear()
        return out

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Wire:
    """Kept-alive connections to one endpoint; ``request`` is safe from many threads (each
    takes a connection of its own)."""

    def __init__(self, scheme: str, authority: str, *, connect_timeout: float,
                 read_timeout: float, maxsize: int, context: ssl.SSLContext | None = None
                 ) -> None:
        if scheme not in ("http", "https"):
            raise ValueError(f"not an HTTP endpoint: {scheme}://{authority}")
        parts = urlsplit(f"//{authority}")
        self.tls = scheme == "https"
        #: ``host[:port]`` as given: sent as the Host header (what a signature signed).
        self.authority = authority
        self.host = parts.hostname or authority
        self.port = parts.port or (443 if self.tls else 80)
        self.context = context if context is not None or not self.tls \
            else ssl.create_default_context()
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.maxsize = maxsize
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def get(self, target: str, headers: Mapping[str, str]) -> Answer:
        """GET ``target`` (the path and query, already encoded) with ``headers``."""
        return self.request("GET", target, headers)

    def request(self, method: str, target: str, headers: Mapping[str, str],
                body: bytes | memoryview = b"") -> Answer:
        """``method`` on ``target`` with ``headers`` and ``body`` (sent with its
        Content-Length). A request on a kept connection the server had closed before
        answering is sent again on a new one, as every keep-alive client does: the
        caller decides whether its request may be sent twice."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.authority}",
                 *(f"{name}: {value}" for name, value in headers.items())]
        if body or method not in ("GET", "HEAD"):
            lines.append(f"Content-Length: {len(body)}")
        head = "\r\n".join([*lines, "", ""]).encode("latin-1")
        request = (head + body, b"") if len(body) <= _JOIN_BELOW else (head, body)
        conn, reused = self.take(target)
        try:
            try:
                answer, keep = _exchange(conn, *request, headless=method == "HEAD")
            except _Stale:
                if not reused:
                    raise
                conn.close()
                conn, reused = self._connect(target), False
                answer, keep = _exchange(conn, *request, headless=method == "HEAD")
        except BaseException:
            conn.close()
            raise
        if keep:
            self.give(conn)
        else:
            conn.close()
        return answer

    def take(self, target: str = "/") -> tuple[_Connection, bool]:
        """A kept connection (True) or a new one (False), the caller's until ``give``;
        ``target``: the request's, named if no connection can be made."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(target), False

    def give(self, conn: _Connection) -> None:
        """``conn`` kept for the next request (its answer read whole, its socket
        blocking with the read timeout again), or closed when enough are kept."""
        with self._lock:
            if len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self, target: str = "/") -> _Connection:
        try:
            sock = socket.create_connection((self.host, self.port),
                                            timeout=self.connect_timeout)
        except OSError as exc:
            scheme = "https" if self.tls else "http"
            raise EndpointConnectionError(
                f'Could not connect to the endpoint URL: "{scheme}://{self.authority}'
                f'{target}"') from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
            sock.settimeout(self.read_timeout)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)


def _exchange(conn: _Connection, request: bytes, body: bytes | memoryview = b"",
              headless: bool = False) -> tuple[Answer, bool]:
    """Send one request (its head, then ``body`` unless empty) and read its answer;
    True with it when the connection may be kept. A kept connection that ends before
    the first byte is ``_Stale``. ``headless``: a HEAD's answer, whose Content-Length
    names the object's body, not one sent."""
    try:
        conn.sock.sendall(request)
        if body:
            conn.sock.sendall(body)
        if not conn.pending and not conn.fill():
            raise _Stale("connection closed by the server")
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise _Stale(str(exc)) from exc
    while True:
        version, status, headers = parse_head(conn.until(b"\r\n\r\n", MAX_HEAD))
        if not 100 <= status < 200:
            break
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if headless or status in (204, 304):
        data = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        data = _chunked(conn)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise ProtocolError(f"bad Content-Length: {headers['content-length']!r}") from None
        data = conn.exactly(length)
    else:
        data, keep = conn.rest(), False
    return Answer(status, headers, data), keep and not conn.pending


def parse_head(raw: bytes) -> tuple[str, int, dict[str, str]]:
    """The version, status and lower-cased headers of an answer's head."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line: {line[:80]!r}")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return version, int(code), headers


def _chunked(conn: _Connection) -> bytes:
    parts: list[bytes] = []
    while True:
        line = conn.until(b"\r\n", 1024)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size line: {line[:40]!r}") from None
        if size == 0:
            while conn.until(b"\r\n", MAX_HEAD) != b"\r\n":  # trailers, ignored
                pass
            return b"".join(parts)
        parts.append(conn.exactly(size))
        if conn.exactly(2) != b"\r\n":
            raise ProtocolError("chunk not followed by CRLF")
