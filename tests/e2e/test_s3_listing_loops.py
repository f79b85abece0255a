"""A server whose listing never ends is an error, never a loop nor a partial list.

A real HTTP server on 127.0.0.1 answers every ListObjectsV2 with a truncated page: the
same continuation token each time, none at all, or a page that does not move past the
key it was asked to start after. Such a server (a broken gateway, a faulty proxy cache)
would keep the lean listing asking forever, or hand a run part of a state folder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from distcp.storage import storage_for
from distcp.storage.s3 import listing

pytestmark = pytest.mark.e2e


class LoopingLister(BaseHTTPRequestHandler):
    """Answers every listing with the server's ``page`` (a truncated one)."""

    page: ClassVar[bytes] = b""
    asked: ClassVar[list[dict[str, list[str]]]] = []

    def do_GET(self) -> None:
        type(self).asked.append(parse_qs(urlsplit(self.path).query))
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture()
def lister() -> Iterator[tuple[type[LoopingLister], str]]:
    handler = type("Handler", (LoopingLister,), {"asked": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _page(body: str) -> bytes:
    return (b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
            + body.encode() + b"<IsTruncated>true</IsTruncated></ListBucketResult>")


def _fs(endpoint: str) -> Any:
    options = {"key": "AKIALOOPTEST0000001", "secret": "loop-secret-not-real",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    return storage_for("s3://b/p", options).fs("s3://b/p")[0]


@pytest.mark.parametrize(("token", "says"), [
    ("<NextContinuationToken>same</NextContinuationToken>", "a continuation token it gave"),
    ("", "without a continuation token")])
def test_a_folders_listing_that_would_not_end_is_an_error_naming_it(
        lister: tuple[type[LoopingLister], str], token: str, says: str) -> None:
    handler, endpoint = lister
    handler.page = _page(f"<Contents><Key>p/a</Key><Size>1</Size></Contents>{token}")
    with pytest.raises(OSError) as info:
        listing.folder_names(_fs(endpoint), "b", "p/")
    assert "listing s3://b/p/" in str(info.value) and says in str(info.value)
    assert len(handler.asked) == (2 if token else 1)


def test_pages_that_do_not_move_past_their_start_are_an_error_naming_it(
        lister: tuple[type[LoopingLister], str]) -> None:
    handler, endpoint = lister
    handler.page = _page("<Contents><Key>p/a</Key><Size>1</Size>"
                         "<LastModified>2026-12-01T00:00:00.000Z</LastModified></Contents>")
    pages = listing.page_stream(_fs(endpoint), "b", "p/")
    assert pages is not None
    with pytest.raises(OSError) as info:
        list(pages)
    assert "listing s3://b/p/" in str(info.value) and "'p/a'" in str(info.value)
    assert [q.get("start-after") for q in handler.asked] == [None, ["p/a"]]
