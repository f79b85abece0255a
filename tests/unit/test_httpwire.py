"""httpwire against a real loopback server that answers with scripted bytes.

Each connection the server accepts reads one request at a time and sends the next
scripted answer; the test sees what was sent (requests, connections) and asserts what
the client made of it. TLS runs against a throwaway self-signed certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcp.storage.http.wire import ProtocolError, Wire


class Scripted:
    """A server whose connections answer from ``script``: each entry is the bytes of one
    answer, or ``None`` to close the connection without answering the next request."""

    def __init__(self, script: list[bytes | None], context: ssl.SSLContext | None = None
                 ) -> None:
        self.script = list(script)
        self.requests: list[bytes] = []
        self.bodies: list[bytes] = []
        self.connections = 0
        self.context = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        if self.context is not None:
            try:
                conn = self.context.wrap_socket(conn, server_side=True)
            except OSError:  # a client that refused our certificate
                conn.close()
                return
        with conn:
            self._converse(conn)

    def _converse(self, conn: socket.socket) -> None:
        """Answer ``conn``'s requests, one at a time, from the script."""
        data = b""
        while self.script:
            got = read_head(conn, data)
            if got is None:
                return
            head, data = got
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(data) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            body, data = data[:length], data[length:]
            answer = self.script.pop(0)
            if answer is None:  # an idle close: the request is never answered
                return
            self.requests.append(head)
            self.bodies.append(body)
            conn.sendall(answer)

    def close(self) -> None:
        self.listener.close()


def read_head(conn: socket.socket, data: bytes) -> tuple[bytes, bytes] | None:
    """The next request's head on ``conn`` (``data``: what was read past the last one),
    and what came after it; None when the client closed first."""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


@pytest.fixture
def server() -> Iterator[list[Scripted]]:
    made: list[Scripted] = []
    yield made
    for s in made:
        s.close()


def _wire(s: Scripted, tls: ssl.SSLContext | None = None) -> Wire:
    return Wire("https" if tls else "http", f"127.0.0.1:{s.port}", connect_timeout=5,
                read_timeout=5, maxsize=4, context=tls)


def ok(body: bytes, extra: str = "") -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def test_answers_by_length_reuse_one_connection_and_send_the_headers(
        server: list[Scripted]) -> None:
    s = Scripted([ok(b"first"), ok(b"", "ETag: \"e\"\r\nX-Two: a\r\nx-two: b\r\n"),
                  b"HTTP/1.1 404 Not Found\r\nContent-Length: 22\r\n\r\n<Code>NoSuchKey</Code>"])
    server.append(s)
    wire = _wire(s)
    a = wire.get("/b/k%20x", {"if-match": '"e"', "authorization": "sig"})
    assert (a.status, a.data) == (200, b"first")
    b = wire.get("/b/empty", {})
    assert (b.status, b.data, b.headers["etag"], b.headers["x-two"]) == (200, b"", '"e"', "a, b")
    c = wire.get("/b/missing", {})
    assert (c.status, c.data) == (404, b"<Code>NoSuchKey</Code>")
    assert s.connections == 1
    first = s.requests[0].decode().split("\r\n")
    assert first[0] == "GET /b/k%20x HTTP/1.1"
    assert f"Host: 127.0.0.1:{s.port}" in first
    assert 'if-match: "e"' in first and "authorization: sig" in first


def test_chunked_interim_and_read_to_close_bodies(server: list[Scripted]) -> None:
    s = Scripted([
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"),
        ok(b"after chunks"),
        b"HTTP/1.0 200 OK\r\n\r\nto the close",
    ])
    server.append(s)
    wire = _wire(s)
    assert wire.get("/c", {}).data == b"hello, world"
    assert wire.get("/d", {}).data == b"after chunks"
    assert s.connections == 1
    # no length and HTTP/1.0: the body ends with the connection, which is not kept
    assert wire.get("/e", {}).data == b"to the close"
    assert wire._idle == []


def test_connection_close_and_an_idle_close_take_a_new_connection(
        server: list[Scripted]) -> None:
    s = Scripted([ok(b"one", "Connection: close\r\n"), ok(b"two"), None, ok(b"three")])
    server.append(s)
    wire = _wire(s)
    assert wire.get("/1", {}).data == b"one"
    assert wire.get("/2", {}).data == b"two"  # a new connection: the first was closed
    # the server closes the kept connection without answering: retried once, new one
    assert wire.get("/3", {}).data == b"three"
    assert s.connections == 3
    assert len(s.requests) == 3


@pytest.mark.parametrize("answer, words", [
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "5 bytes before the end"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
])
def test_a_malformed_answer_is_a_protocol_error_and_the_connection_dropped(
        server: list[Scripted], answer: bytes, words: str) -> None:
    s = Scripted([answer])
    server.append(s)
    wire = _wire(s)
    with pytest.raises(ProtocolError, match=words):
        wire.get("/x", {})
    assert wire._idle == []


def test_a_fresh_connection_closed_unanswered_is_an_error_not_a_retry(
        server: list[Scripted]) -> None:
    s = Scripted([None, ok(b"never")])
    server.append(s)
    with pytest.raises(OSError, match="closed by the server"):
        _wire(s).get("/x", {})
    assert s.connections == 1


def test_tls_with_the_callers_ca_and_refused_without_it(server: list[Scripted],
                                                         tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    s = Scripted([ok(b"secret bytes"), ok(b"again")], context=served)
    server.append(s)
    trusting = ssl.create_default_context(cafile=str(cert))
    wire = _wire(s, trusting)
    assert wire.get("/t", {}).data == b"secret bytes"
    assert wire.get("/t", {}).data == b"again"
    assert s.connections == 1
    with pytest.raises(ssl.SSLCertVerificationError):
        _wire(s, ssl.create_default_context()).get("/t", {})


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_put_sends_its_body_whole_small_or_big_and_is_resent_after_an_idle_close(
        server: list[Scripted]) -> None:
    small, big = b"x" * 1000, bytes(range(256)) * 4096  # 1 MiB: sent after the head
    s = Scripted([ok(b"", 'ETag: "1"\r\n'), ok(b"", 'ETag: "2"\r\n'), None,
                  ok(b"", 'ETag: "3"\r\n')])
    server.append(s)
    wire = _wire(s)
    assert wire.request("PUT", "/b/small", {"content-md5": "m"}, small).headers["etag"] == '"1"'
    assert wire.request("PUT", "/b/big?partNumber=1", {}, memoryview(big)).status == 200
    # the kept connection is closed unanswered: the PUT goes again on a new one
    assert wire.request("PUT", "/b/again", {}, small).headers["etag"] == '"3"'
    assert s.bodies == [small, big, small] and s.connections == 2
    heads = [r.decode().split("\r\n") for r in s.requests]
    assert heads[0][0] == "PUT /b/small HTTP/1.1" and "Content-Length: 1000" in heads[0]
    assert f"Content-Length: {len(big)}" in heads[1]
