"""A server that sheds load: throttled requests wait and retry, a refusal is explained.

``rclone serve s3`` answers SlowDown to every CreateMultipartUpload once 1,000 uploads
are pending. pydistcp stages each file of a file set as a pending upload until the
set publishes, so on such a server a big file set cannot be staged: the file must
fail with that explanation, and the files after it must fail at once rather than
each waiting out the throttle retries. The explanation's way out, ``--visibility file``
(a small file is one PutObject), must then copy on that same server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distcp.storage import filesystems as fsutil
from distcp.storage.s3 import ops as s3ops
from distcp.storage.s3 import settings as s3settings
from tests.conftest import run_cli
from tests.fixtures.s3_server import S3Server, rclone_server  # noqa: F401 - fixture

pytestmark = pytest.mark.e2e


@pytest.fixture()
def capped(rclone_server: S3Server, monkeypatch: pytest.MonkeyPatch  # noqa: F811
           ) -> Iterator[S3Server]:
    """An rclone server already holding the 1,000 pending uploads it allows."""
    rclone_server.reset()
    for key, value in rclone_server.env.items():
        monkeypatch.setenv(key, value)
    client = rclone_server.client()
    for i in range(1000):
        client.create_multipart_upload(Bucket="dst", Key=f"held/{i}")
    monkeypatch.setattr(s3settings, "THROTTLE_RETRIES", 0)
    yield rclone_server
    s3ops._refused.clear()


def test_a_server_capping_pending_uploads_fails_the_file_with_the_cause_then_fast(
        capped: S3Server) -> None:
    fs, _ = fsutil.filesystem("s3://dst/new.bin", {})
    with pytest.raises(OSError, match="caps pending uploads .*rclone serve s3 allows 1,000.*"
                                      r"\(--visibility file: a small file is one PutObject"):
        s3ops.create(fs, "s3://dst/new.bin")
    t = time.monotonic()
    with pytest.raises(OSError, match="kept refusing new multipart uploads in bucket 'dst'"):
        s3ops.create(fs, "s3://dst/next.bin")
    assert time.monotonic() - t < 1.0  # remembered: not waited out again
    assert len(capped.pending_uploads()) == 1000  # nothing of ours was left pending


def test_per_file_visibility_copies_where_pending_uploads_are_capped(
        capped: S3Server, tmp_path: Path) -> None:
    """What the refusal advises works: with ``--visibility file`` a small file is one
    PutObject, never a pending upload, so the same capped server takes the whole copy
    (and the run's own state) while it still holds its 1,000 pending uploads."""
    src = tmp_path / "src"
    src.mkdir()
    files = {"a.txt": b"alpha\n", "b.bin": bytes(range(256)) * 40, "empty": b""}
    for name, data in files.items():
        (src / name).write_bytes(data)
    r = run_cli("copy", str(src), "s3://dst/put", "--no-progress", "--master", "local[2]",
                "--visibility", "file", env=capped.env)
    assert r.returncode == 0, r.stderr
    assert {k.removeprefix("put/"): v for k, v in capped.objects("dst", "put/").items()
            if "/.pydistcp/" not in k} == files
    assert len(capped.pending_uploads()) == 1000
