"""A range's S3 part replaced by a late request of an earlier attempt: sent again.

The range writer (``ObjectStorage.write_range``) is called in this process
against the moto server; a wrapper around ``s3.upload_part`` uploads another
body under the same part number right after ours, as a killed attempt's late
request would. No Spark: one part of 5 MiB.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from distcp.copying.ranges import RangeReader
from distcp.copying.writer import SourceReader
from distcp.errors import IntegrityError
from distcp.model import CopyableFile, FileStatus, Split
from distcp.storage import Staged, storage_for
from distcp.storage.s3 import ops as s3mod
from distcp.storage.staging import RangeAt
from distcp.storage.s3.uploads import PART_RESENDS
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e
PART = 5 << 20


def stage(server: S3Server, monkeypatch: pytest.MonkeyPatch, stale_times: int) -> tuple[Any, ...]:
    """Write part 1 of a fresh upload, the server's copy replaced ``stale_times`` times."""
    fs = server.filesystem()
    final = "s3://dst/big.bin"
    upload_id = s3mod.create(fs, final)
    real, sent = s3mod.upload_part, []

    def late_request_lands_after_ours(fs: Any, url: str, uid: str, number: int,
                                      data: Any) -> str:
        etag = real(fs, url, uid, number, data)
        sent.append(etag)
        if len(sent) <= stale_times:
            real(fs, url, uid, number, b"s" * PART)  # the stale body wins the race
        return etag

    monkeypatch.setattr(s3mod, "upload_part", late_request_lands_after_ours)
    body = bytes(range(256)) * (PART // 256)
    file = CopyableFile(FileStatus("/src/big.bin", PART, 1.0), final, "urn", "all")
    split = Split(0, 2, 0, PART, Staged.upload(upload_id, final).text, "")
    reader = RangeReader(SourceReader(io.BytesIO(body), "/src/big.bin"), file, split)
    storage = storage_for(final, server.options)
    try:
        written = storage.write_range(Staged.upload(upload_id, final), RangeAt(0, 0, PART),
                                      reader, bytearray(1 << 20), "digest", "", "a0")
        return (written.etag, written.blocks), sent, s3mod.list_parts(fs, final, upload_id)
    finally:
        s3mod.abort(fs, final, upload_id)


def test_a_part_replaced_by_a_late_request_is_sent_again(
        s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    (etag, blocks), sent, parts = stage(s3, monkeypatch, stale_times=1)
    assert len(sent) == 2, "the part was not sent again"
    assert parts == {1: (etag, PART)} and len(blocks) == 5 * 16


def test_a_part_that_keeps_being_replaced_fails_the_range(
        s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    with pytest.raises(IntegrityError, match=r"part 1 of s3://dst/big.bin holds .* 3 times"):
        stage(s3, monkeypatch, stale_times=1 + PART_RESENDS)
