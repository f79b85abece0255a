"""An S3-compatible server without some requests still serves a run.

Google Cloud Storage's XML API answers DeleteObjects (the removal of many keys in one
request) with 501 NotImplemented. Between s3fs and the real moto server sits a proxy that
answers that request so and passes every other one on: removing a folder then deletes
its keys one request each, and nothing is left behind.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from distcp.storage import storage_for
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    ACCESS_KEY,
    SECRET_KEY,
    S3Server,
    moto_server,
    s3,
)

pytestmark = pytest.mark.e2e

_ERROR = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
          b"<Message>A header or query you provided implies functionality that is not "
          b"implemented.</Message></Error>")
_REFUSAL = (b"HTTP/1.1 501 Not Implemented\r\nContent-Type: application/xml\r\n"
            b"Content-Length: " + str(len(_ERROR)).encode() + b"\r\n\r\n" + _ERROR)


class RefusingProxy:
    """127.0.0.1:<port> -> ``target``; requests whose first line starts with ``refused``
    are answered 501 here (``refusals`` counts them), every other one is passed on."""

    def __init__(self, target: tuple[str, int], refused: bytes) -> None:
        self.target, self.refused = target, refused
        self.refusals = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._answers, args=(server, client), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        """A request starts where the last one's answer ended (s3fs does not pipeline)."""
        try:
            while chunk := client.recv(65536):
                if not chunk.startswith(self.refused):
                    server.sendall(chunk)
                    continue
                while b"\r\n\r\n" not in chunk:
                    chunk += client.recv(65536)
                head, _, body = chunk.partition(b"\r\n\r\n")
                found = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
                while len(body) < (int(found.group(1)) if found else 0):
                    body += client.recv(65536)
                self.refusals += 1
                client.sendall(_REFUSAL)
        except OSError:
            pass
        finally:
            server.close()

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while chunk := server.recv(65536):
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            client.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture()
def no_multi_delete(s3: S3Server) -> Iterator[RefusingProxy]:  # noqa: F811
    host, port = s3.endpoint.removeprefix("http://").split(":")
    proxy = RefusingProxy((host, int(port)), b"POST /dst?delete")
    yield proxy
    proxy.close()


def test_a_folder_is_removed_key_by_key_where_the_server_has_no_deleteobjects(
        s3: S3Server, no_multi_delete: RefusingProxy) -> None:  # noqa: F811
    options: dict[str, Any] = {
        "key": ACCESS_KEY, "secret": SECRET_KEY,
        "client_kwargs": {"endpoint_url": no_multi_delete.endpoint, "region_name": "us-east-1"}}
    storage = storage_for("s3://dst/t", options)
    for name in ("t/a", "t/sub/b", "t/c d", "tree-kept"):
        storage.write_atomic(f"s3://dst/{name}", name.encode())
    storage.remove("s3://dst/t")
    assert no_multi_delete.refusals == 1
    assert s3.objects("dst", "") == {"tree-kept": b"tree-kept"}
