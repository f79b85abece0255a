"""The lean CreateMultipartUpload and CompleteMultipartUpload against a scripted server.

A real s3fs filesystem points at a loopback server that answers with scripted bytes
(``Scripted``, from the httpwire tests), so the answers S3 documents but the local
servers never give can be played: an ``<Error>`` inside a 200 answer to a complete,
entities in an ETag.
"""

from __future__ import annotations

import pytest

from distcp.storage.s3 import lean as s3get
from distcp.storage.s3 import ops as s3
from tests.unit.test_httpwire import Scripted, ok
from tests.unit.test_httpwire import server as scripted  # noqa: F401 - the fixture


def _fs(server: Scripted) -> object:
    import s3fs

    return s3fs.S3FileSystem(key="AKIDTEST", secret="not-a-secret", skip_instance_cache=True,
                             client_kwargs={"endpoint_url": f"http://127.0.0.1:{server.port}",
                                            "region_name": "us-east-1"})


def test_create_and_complete_go_out_as_posts_and_read_their_answers(
        scripted: list[Scripted], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    server = Scripted([
        ok(b"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k y</Key>"
           b"<UploadId>up/1+2==</UploadId></InitiateMultipartUploadResult>"),
        ok(b"<Error><Code>InternalError</Code><Message>try again</Message></Error>"),
        ok(b"<CompleteMultipartUploadResult><ETag>&quot;abc-2&quot;</ETag>"
           b"</CompleteMultipartUploadResult>"),
    ])
    scripted.append(server)
    monkeypatch.setattr(s3get.time, "sleep", lambda _: None)
    fs = _fs(server)
    before = s3get.requests_sent()
    upload_id = s3.create(fs, "s3://b/k y")
    assert upload_id == "up/1+2=="
    parts = [(2, '"e2"', 5 << 20), (1, '"e&1"', 5 << 20)]
    assert s3.complete(fs, "s3://b/k y", upload_id, parts) == '"abc-2"'
    assert s3get.requests_sent() - before == 3  # the complete once more after its error
    heads = [r.decode().split("\r\n")[0] for r in server.requests]
    assert heads == ["POST /b/k%20y?uploads= HTTP/1.1",
                     "POST /b/k%20y?uploadId=up%2F1%2B2%3D%3D HTTP/1.1",
                     "POST /b/k%20y?uploadId=up%2F1%2B2%3D%3D HTTP/1.1"]
    assert server.bodies[2] == (
        b'<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b'<Part><ETag>"e&amp;1"</ETag><PartNumber>1</PartNumber></Part>'
        b'<Part><ETag>"e2"</ETag><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>')


def test_an_error_in_a_200_answer_that_is_not_the_servers_trouble_fails_at_once(
        scripted: list[Scripted]) -> None:  # noqa: F811
    server = Scripted([ok(b"<Error><Code>InvalidPart</Code><Message>no</Message></Error>")])
    scripted.append(server)
    with pytest.raises(OSError, match=r"complete_multipart_upload s3://b/k: HTTP 400 InvalidPart"):
        s3.complete(_fs(server), "s3://b/k", "u", [(1, '"e"', 1)])
    assert len(server.requests) == 1


def test_an_answer_without_what_it_must_hold_is_an_error_not_a_guess(
        scripted: list[Scripted]) -> None:  # noqa: F811
    server = Scripted([ok(b"<InitiateMultipartUploadResult></InitiateMultipartUploadResult>")])
    scripted.append(server)
    with pytest.raises(OSError, match="without <UploadId>"):
        s3.create(_fs(server), "s3://b/k")


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 301 Moved Permanently\r\nLocation: http://elsewhere/b/k\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://elsewhere/b/k\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 54\r\n\r\n"
    b"<Error><Code>AuthorizationHeaderMalformed</Code></Error>",
])
def test_a_redirect_hands_the_filesystem_to_s3fs_and_the_lean_path_sends_no_more(
        scripted: list[Scripted], answer: bytes) -> None:  # noqa: F811
    """A bucket in another region (or a moved endpoint) is botocore's to follow: the
    hand-written path never follows a Location, it gives the filesystem to s3fs for the
    rest of the process (as the SDK's region redirector then does it right)."""
    server = Scripted([answer])
    scripted.append(server)
    fs = _fs(server)
    assert s3get.get(fs, "b", "k", '"e"') is None
    assert s3get.get(fs, "b", "k", '"e"') is None  # not asked again: s3fs's from now on
    assert [r.decode().split("\r\n")[0] for r in server.requests] == ["GET /b/k HTTP/1.1"]


def test_an_expired_token_is_refreshed_once_and_throttling_is_waited_out(
        scripted: list[Scripted], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """As botocore does: a 403 ExpiredToken gets the credentials again and the request
    once more (a second one is the error), a 503 SlowDown is retried after a pause."""
    expired = (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 40\r\n\r\n"
               b"<Error><Code>ExpiredToken</Code></Error>")
    slow = (b"HTTP/1.1 503 Slow Down\r\nContent-Length: 36\r\n\r\n"
            b"<Error><Code>SlowDown</Code></Error>")
    server = Scripted([expired, slow, ok(b"body", 'ETag: "e"\r\n'), expired, expired])
    scripted.append(server)
    monkeypatch.setattr(s3get.time, "sleep", lambda _: None)
    fs = _fs(server)
    refreshed: list[bool] = []
    getter = s3get._getter(fs)
    assert getter is not None
    real = getter.credentials

    def counting(refresh: bool = False) -> object:
        refreshed.append(refresh)
        return real(refresh)

    monkeypatch.setattr(getter, "credentials", counting)
    assert s3get.get(fs, "b", "k", '"e"') == b"body"
    assert refreshed.count(True) == 1
    with pytest.raises(OSError, match="ExpiredToken"):
        s3get.get(fs, "b", "k", '"e"')
    assert len(server.requests) == 5
