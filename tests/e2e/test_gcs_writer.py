"""How a stream is staged on GCS, against fake-gcs-server: a stream up to one part in ONE
upload that carries its metadata, a longer one through gcsfs with its metadata after,
and a staging whose size the service contradicts removed and failed by name.

These call the backend's writer as a task does (``open_stage``, ``keep_attributes``
before the first byte, ``write``, ``commit``); a small file's staging is one upload
request where it was eight through gcsfs (the SDK's uploads counted).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from distcp.checksum import Digest
from distcp.errors import IntegrityError
from distcp.storage import writes
from distcp.storage.gcs import objects, uploads
from distcp.storage.gcs.storage import GcsStorage
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

PART = 1 << 20


def stage(body: bytes, name: str, size: int | None = None) -> None:
    """Stage ``body`` at gs://dst/<name> as a task would, mtime and mode kept."""
    writer = GcsStorage({}).open_stage(f"gs://dst/{name}", f"gs://dst/{name}",
                                       verify="digest", buffer_size=PART)
    assert writer.attributes_with_bytes and writer.keep_attributes(0o640, 1_600_000_000.5)
    digest = Digest()
    for i in range(0, len(body), 64 << 10):
        writer.write(memoryview(body[i:i + (64 << 10)]))
        digest.update(body[i:i + (64 << 10)])
    if size is not None:
        digest.size = size  # what the task says it read
    writer.commit(digest, bytearray(64 << 10))


@pytest.mark.parametrize("size", [0, 1000, PART, PART + 1, 3 * PART + 5])
def test_a_staged_stream_holds_its_bytes_and_metadata_whatever_its_size(
        gcs: GcsServer, size: int) -> None:  # noqa: F811
    body = os.urandom(size)
    stage(body, f"s{size}")
    assert gcs.objects("dst") == {f"s{size}": body}
    assert gcs.metadata("dst", f"s{size}") == {objects.MTIME_KEY: "1600000000",
                                               objects.MODE_KEY: "640"}


def _count_uploads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each upload sent: ``upload`` by the request written here (``gcs/uploads.py``),
    ``sdk upload`` by Google's SDK."""
    from google.cloud.storage import blob as sdk_blob

    sent: list[str] = []
    by_hand, by_sdk = uploads.by_hand, sdk_blob.Blob._do_multipart_upload

    def hand(*args: Any, **kwargs: Any) -> int | None:
        held = by_hand(*args, **kwargs)
        sent.append("upload" if held is not None else "not sent here")
        return held

    def sdk(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append("sdk upload")
        return by_sdk(self, *args, **kwargs)

    monkeypatch.setattr(uploads, "by_hand", hand)
    monkeypatch.setattr(sdk_blob.Blob, "_do_multipart_upload", sdk)
    return sent


def test_a_small_stream_is_one_upload_request(gcs: GcsServer,  # noqa: F811
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    client = gcs.client()
    before = {b.name for b in client.list_blobs("dst")}
    sent = _count_uploads(monkeypatch)
    stage(b"x" * 1000, "one")
    assert sent == ["upload"]
    assert {b.name for b in client.list_blobs("dst")} - before == {"one"}


def test_a_staging_whose_size_differs_from_what_was_read_is_removed_and_named(
        gcs: GcsServer) -> None:  # noqa: F811
    with pytest.raises(IntegrityError, match=r"size differs: read 999 bytes but staged 1000"
                       r" \(gs://dst/bad\)"):
        stage(b"x" * 1000, "bad", size=999)
    assert gcs.objects("dst") == {}


def test_a_held_stream_is_sent_once_to_its_final_name_with_its_mtime_and_mode(
        gcs: GcsServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``--visibility file``: a short stream held by the writer sends nothing; its
    publish is one upload to the final name carrying the mtime and mode; nothing is
    staged. A longer one is staged, and with write options nothing is held."""
    storage = GcsStorage({})
    writer = storage.open_stage("gs://dst/held/a.txt", "gs://dst/.staging/a.txt",
                                verify="digest", buffer_size=PART, hold_small=True)
    writer.write(memoryview(b"held bytes"))
    sent = _count_uploads(monkeypatch)
    digest = Digest()
    digest.update(b"held bytes")
    done = writer.commit(digest, bytearray(64 << 10))
    assert (done.staged, done.body, sent) == (None, b"held bytes", [])
    published = storage.publish_whole("gs://dst/held/a.txt", done.body,
                                      1_600_000_000_500_000_000, 0o640)
    assert sent == ["upload"] and published.is_published
    assert gcs.objects("dst") == {"held/a.txt": b"held bytes"}
    assert gcs.metadata("dst", "held/a.txt") == {objects.MTIME_KEY: "1600000000",
                                                 objects.MODE_KEY: "640"}
    optioned = GcsStorage({writes.KEY: writes.WriteOptions(storage_class="NEARLINE")})
    assert optioned.writes.for_objects
    kept = optioned.open_stage("gs://dst/held/b.txt", "gs://dst/.staging/b.txt",
                               verify="digest", buffer_size=PART, hold_small=True)
    kept.write(memoryview(b"b"))
    one = Digest()
    one.update(b"b")
    assert kept.commit(one, bytearray(64 << 10)).body is None  # staged: the rewrite sets it
    assert gcs.objects("dst", ".staging/") == {".staging/b.txt": b"b"}
