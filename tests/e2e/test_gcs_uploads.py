"""A small GCS object uploaded in one request written by hand, against fake-gcs-server on
127.0.0.1 (``distcp.storage.gcs.uploads``).

The object arrives whole, with its metadata and content type, and Google's SDK's upload
is not called; an upload the service refuses goes the SDK's way, whose error is the one
raised; an MD5 answered that is not the body's (a relay that changes bytes on the way)
deletes the object and raises.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import storage as gcs_sdk

from distcp.errors import IntegrityError
from distcp.storage.gcs import objects, uploads
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _count_the_sdk(monkeypatch: pytest.MonkeyPatch, send: bool) -> list[str]:
    """The SDK's uploads counted (and sent only when ``send``)."""
    calls: list[str] = []
    real = gcs_sdk.Blob.upload_from_string

    def counted(blob: Any, *args: Any, **kw: Any) -> Any:
        calls.append(blob.name)
        return real(blob, *args, **kw) if send else None

    monkeypatch.setattr(gcs_sdk.Blob, "upload_from_string", counted)
    return calls


def test_an_upload_is_one_request_written_here(gcs: GcsServer,  # noqa: F811
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_the_sdk(monkeypatch, send=False)
    bodies = {"small": b"x", "odd name #?%&/ü": b"data, not syntax",
              "bigger": bytes(range(256)) * 300}
    attributes = objects.kept_attributes(0o640, 1_700_000_000.0)
    for name, body in bodies.items():
        assert uploads.upload({}, f"dst/up/{name}", body, attributes) == len(body)
    assert calls == []
    assert gcs.objects("dst", "up/") == {f"up/{n}": b for n, b in bodies.items()}
    stored = gcs.client().bucket("dst").get_blob("up/odd name #?%&/ü")
    assert stored.content_type == objects.CONTENT_TYPE
    assert stored.metadata[objects.MTIME_KEY] == "1700000000"
    assert stored.metadata[objects.MODE_KEY] == "640"


def test_an_upload_the_service_refuses_goes_the_sdk_way(gcs: GcsServer,  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """No such bucket: the service answers 404 to the request written here, and the
    SDK's upload then raises its own error."""
    calls = _count_the_sdk(monkeypatch, send=True)
    with pytest.raises(gexc.NotFound):
        uploads.upload({}, "no-such-bucket/a", b"A", {})
    assert calls == ["a"]


class _Changer:
    """127.0.0.1:<port> -> ``target``, ``old`` replaced by ``new`` (as long) in what the
    client sends: bytes changed on the way to the service."""

    def __init__(self, target: tuple[str, int], old: bytes, new: bytes) -> None:
        self.target, self.old, self.new = target, old, new
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client,), daemon=True).start()

    def _pump(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target)
        pending = b""
        with client, upstream:
            while not self.closed:
                ready, _, _ = select.select([client, upstream], [], [], 0.1)
                for sock in ready:
                    data = sock.recv(1 << 20)
                    if not data:
                        return
                    if sock is upstream:
                        client.sendall(data)
                        continue
                    pending += data  # a marker split over two reads is still found
                    pending = pending.replace(self.old, self.new)
                    keep = len(self.old) - 1
                    upstream.sendall(pending[:-keep])
                    pending = pending[-keep:]
                    if not select.select([client], [], [], 0.05)[0]:
                        upstream.sendall(pending)
                        pending = b""

    def close(self) -> None:
        self.closed = True
        self.listener.close()


@pytest.fixture()
def changer(gcs: GcsServer) -> Iterator[_Changer]:  # noqa: F811
    host, port = gcs.endpoint.rsplit("//", 1)[1].rsplit(":", 1)
    relay = _Changer((host, int(port)), b"change-me", b"CHANGED!!")
    yield relay
    relay.close()


def test_a_body_stored_changed_is_deleted_and_raises(gcs: GcsServer,  # noqa: F811
                                                     changer: _Changer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_the_sdk(monkeypatch, send=False)
    options = {"endpoint_url": changer.endpoint, "token": "anon"}
    assert uploads.upload(options, "dst/kept", b"plain bytes", {}) == 11
    with pytest.raises(IntegrityError, match="gs://dst/changed: the service's MD5 of what "
                                             "it stored is not that of the 13 bytes sent"):
        uploads.upload(options, "dst/changed", b"a change-me b", {})
    assert calls == []
    assert gcs.objects("dst") == {"kept": b"plain bytes"}
