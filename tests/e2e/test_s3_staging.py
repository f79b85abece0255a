"""Staging on S3 as uncompleted multipart uploads, against a real S3 server (moto).

In-process (no Spark): each fsspec/s3fs pitfall of PITFALLS.md is a test here,
next to the behaviour we built instead of it.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from distcp.checksum import digest_of_bytes
from distcp.cli import main
from distcp.commit.publish import publish_plan
from distcp.commit.steps import CommitContext, CommitSequence
from distcp.commit.upload_steps import CompleteUploads
from distcp.configuration import CopyConfiguration
from distcp.copying.task import run_work_unit
from distcp.copying.writer import SourceReader, stage_stream
from distcp.errors import CopyError, DestinationNameError, DestinationWriteError
from distcp.model import WorkUnit
from distcp.planning.listing import plan_all
from distcp.run.branch import publishing, task_spec
from distcp.storage import Staged, storage_for, watchdog
from distcp.storage.s3 import ops as s3ops
from distcp.storage.staging import StagedFile, StagedStream
from distcp.summary import Summary
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    CANARY,
    S3Server,
    assert_no_canary,
    moto_server,
    rclone_server,
    s3,
    s3_any,
)

pytestmark = pytest.mark.e2e
MiB = 1 << 20


def stage_upload(stream: Any, url: str, options: dict[str, Any], buffer: bytearray,
                 size_hint: int) -> StagedStream:
    """What a task does with one output for an object store: the storage's writer."""
    writer = storage_for(url, options).open_stage(url, "", size_hint=size_hint,
                                                  buffer_size=len(buffer))
    return stage_stream(stream, writer, buffer)


class FailingSource(io.RawIOBase):
    """A source stream that fails after ``n`` bytes, as a dropped connection would."""

    def __init__(self, data: bytes, n: int) -> None:
        self.data, self.n, self.pos = data, n, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.pos >= self.n:
            raise ConnectionResetError("connection reset by peer")
        k = min(len(b), self.n - self.pos, len(self.data) - self.pos)
        b[:k] = self.data[self.pos:self.pos + k]
        self.pos += k
        return k


def nothing_left(s3srv: S3Server, key: str) -> None:
    assert key not in s3srv.objects("dst"), f"an object was published at {key}"
    assert s3srv.pending_uploads() == [], "an upload was left pending"


def test_fs_open_publishes_a_partial_object_on_exception_and_our_writer_does_not(
        s3: S3Server) -> None:  # noqa: F811
    fs = s3.filesystem()
    with pytest.raises(RuntimeError), fs.open("dst/pitfall.bin", "wb") as f:
        f.write(b"half of it")
        raise RuntimeError("the source failed")
    assert s3.objects("dst")["pitfall.bin"] == b"half of it"  # the pitfall, still there
    data = os.urandom(20 * MiB)
    reader = SourceReader(FailingSource(data, 9 * MiB), "/src/x.bin")  # >= one part sent
    with pytest.raises(CopyError, match="connection reset"):
        stage_upload(reader, "s3://dst/x.bin", s3.options, bytearray(8 * MiB), len(data))
    nothing_left(s3, "x.bin")


def test_writer_failing_at_its_last_part_leaves_no_object_and_no_upload(
        s3_any: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    s3 = s3_any  # noqa: F811 - the parametrised server, under the usual name
    """The last part is sent when the stream ends: the S3 writer's close()."""
    real = s3ops.upload_part
    sent: list[int] = []

    def flaky(fs: Any, url: str, upload_id: str, number: int, data: Any) -> str:
        sent.append(number)
        if number == 2:
            raise OSError(5, "connection lost while closing")
        return real(fs, url, upload_id, number, data)

    monkeypatch.setattr(s3ops, "upload_part", flaky)
    data = os.urandom(12 * MiB)
    with pytest.raises(DestinationWriteError, match="closing"):
        stage_upload(io.BytesIO(data), "s3://dst/y.bin", s3.options, bytearray(8 * MiB), len(data))
    assert sent == [1, 2]
    nothing_left(s3, "y.bin")


def test_staged_upload_is_invisible_until_completed_and_replay_is_idempotent(
        s3_any: S3Server) -> None:  # noqa: F811
    s3 = s3_any  # noqa: F811 - the parametrised server, under the usual name
    data = os.urandom(13 * MiB)
    up = stage_upload(io.BytesIO(data), "s3://dst/z.bin", s3.options, bytearray(8 * MiB),
                      len(data))
    assert up.checksum == digest_of_bytes(data) and [p[2] for p in up.parts] == [8 * MiB, 5 * MiB]
    client = s3.client()
    assert client.list_objects_v2(Bucket="dst").get("Contents", []) == []
    with pytest.raises(client.exceptions.ClientError):
        client.head_object(Bucket="dst", Key="z.bin")
    step = CompleteUploads(((up.text, "s3://dst/z.bin", up.size, up.parts),))
    seq = CommitSequence("urn", "fs", (step,), "id")
    ctx = CommitContext(dst_options=s3.options)
    assert not step.verify(ctx)
    again = CommitSequence.from_dict(seq.to_dict())  # as a replay reads it from the log
    seq.run(ctx)
    assert step.verify(ctx)
    again.run(ctx)  # verified done: nothing executed twice
    assert s3.objects("dst")["z.bin"] == data
    assert s3.pending_uploads() == []


def test_a_stat_sees_objects_published_after_their_folder_was_listed(
        s3: S3Server) -> None:  # noqa: F811
    """s3fs answers ``info`` from a folder's cached listing once one was taken (a
    destination's ``isdir`` takes one) and forgets it only on its own writes: objects
    published by our requests (completed uploads, PUTs) must be forgotten too, or a
    stat calls them missing and a continuous copy's batch copied them again (issue 40)."""
    s3.client().put_object(Bucket="dst", Key="landed/first.bin", Body=b"first")
    storage = storage_for("s3://dst/landed", s3.options)
    assert storage.isdir("s3://dst/landed")  # the folder's listing, cached by s3fs
    data = os.urandom(MiB)
    up = stage_upload(io.BytesIO(data), "s3://dst/landed/big.bin", s3.options,
                      bytearray(8 * MiB), len(data))
    assert up.staged is not None
    storage.publish_all([StagedFile(up.staged, "s3://dst/landed/big.bin", up.size, up.parts)])
    storage.publish_whole("s3://dst/landed/small.bin", b"small")
    storage.publish_checked(Staged.empty("s3://dst/landed/empty.bin"), 0, ())
    for name, size in (("big.bin", MiB), ("small.bin", 5), ("empty.bin", 0)):
        assert storage.stat(f"s3://dst/landed/{name}").size == size
        assert storage.exists(f"s3://dst/landed/{name}")


def test_failed_file_set_leaves_no_object_and_no_pending_upload(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """moto only: rclone serve s3 v1.75 exits after errors aborting uploads (a known gap)."""
    src = tmp_path / "src"
    src.mkdir()
    for name, size in [("a.bin", 6 * MiB), ("b.bin", 1000), ("c.bin", 0), ("d.bin", 10)]:
        (src / name).write_bytes(os.urandom(size))
    # --commit-policy full: nothing of the run is published when a file fails (a plain
    # tree copy otherwise publishes the files that arrived, as rclone does).
    cfg = CopyConfiguration.build([str(src)], "s3://dst/set", dst_options=s3.options,
                                  commit_policy="full")
    plan = plan_all(cfg, lambda m: None).plan
    spec = task_spec(cfg, "job1", "s3://dst/set/.pydistcp")
    assert spec.dst.capabilities.multipart  # staged as multipart uploads
    files = plan.files_to_copy
    (src / "d.bin").write_bytes(b"changed!")  # d.bin fails: its source changed after listing
    results = run_work_unit(WorkUnit(0, tuple(files)), spec, "a0")
    assert [r.ok for r in sorted(results, key=lambda r: r.destination)] == [True] * 3 + [False]
    assert len(s3.pending_uploads()) == 2  # a.bin and b.bin staged; c.bin is a 0-byte PUT later
    summary = Summary()
    summary.add(publish_plan(plan, results, publishing(cfg, "job1", "s3://dst/set/.pydistcp")))
    assert summary.files_failed == 1 and summary.files_copied == 0
    assert {k for k in s3.objects("dst") if "/.pydistcp/" not in k} == set()
    assert s3.pending_uploads() == []


def test_merge_neither_aborts_nor_checks_part_sizes_so_we_size_parts_ourselves(
        s3: S3Server) -> None:  # noqa: F811
    fs = s3.filesystem()
    fs.pipe_file("dst/p1", b"a" * MiB)
    fs.pipe_file("dst/p2", b"b" * MiB)
    with pytest.raises(OSError):
        fs.merge("dst/merged", ["dst/p1", "dst/p2"])  # non-last part < 5 MiB
    assert len(s3.pending_uploads()) == 1  # s3fs left its upload behind: the pitfall
    for size in (1, 5 * MiB, 6 * MiB + 1, 80 * (1 << 30), 5 * (1 << 40)):
        part = s3ops.part_size_for(size, 8 * MiB)
        assert part >= s3ops.MIN_PART and part % MiB == 0
        assert -(-size // part) <= s3ops.MAX_PARTS


def test_keys_a_server_may_hang_on_are_refused_before_any_request(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    for key in ("a//b", "a/./b", "a/../b", "/lead", "x" * 1025):
        assert s3ops.key_problem(key), key
    assert s3ops.key_problem("ok/sp ace+plus=%2F&ü.txt") is None
    (tmp_path / "f").write_bytes(b"x")
    cfg = CopyConfiguration.build([str(tmp_path / "f")], "s3://dst/a//b", dst_options=s3.options)
    spec = task_spec(cfg, "j", "s3://dst/a/.pydistcp")
    [file] = plan_all(cfg, lambda m: None).plan.files_to_copy
    with pytest.raises(DestinationNameError, match="empty"):  # the file fails, not the run
        spec.refuse_protected(file.origin.url, file.destination)


def test_a_hung_request_is_abandoned_by_the_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that accepts the connection and never answers (s3fs would wait forever)."""
    import s3fs

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True).start()
    port = silent.getsockname()[1]
    monkeypatch.setenv(watchdog.TIMEOUT_ENV, "2")
    fs = s3fs.S3FileSystem(key="k", secret="s", skip_instance_cache=True,
                           endpoint_url=f"http://127.0.0.1:{port}",
                           config_kwargs={"read_timeout": 3600, "retries": {"max_attempts": 1}})
    t = time.monotonic()
    with pytest.raises(Exception) as info:
        s3ops.create(fs, "s3://dst/hang.bin")
    assert "Timeout" in type(info.value).__name__ and time.monotonic() - t < 30
    silent.close()


def test_storage_options_hold_the_secret_but_nothing_we_print_or_store_does(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    fs = s3.filesystem()
    assert CANARY in repr(fs.storage_options)  # the pitfall: plain text in fsspec
    cfg = CopyConfiguration.build([str(tmp_path)], "s3://dst/o", dst_options=s3.options,
                                  src_options=s3.options)
    spec = task_spec(cfg, "j", "s3://dst/o/.pydistcp")
    ctx = CommitContext(dst_options=s3.options)
    assert_no_canary(repr(cfg), repr(spec), repr(ctx), Summary().to_json())


def test_cleanup_aborts_orphans_but_keeps_uploads_a_pending_commit_needs(
        s3_any: S3Server) -> None:  # noqa: F811
    s3 = s3_any  # noqa: F811 - the parametrised server, under the usual name
    fs = s3.filesystem()
    orphan = s3ops.create(fs, "s3://dst/c/orphan.bin")
    other = s3ops.create(fs, "s3://dst/elsewhere.bin")  # not under DST: not ours
    needed = s3ops.create(fs, "s3://dst/c/needed.bin")
    from distcp.commit.log import CommitStepStore

    step = CompleteUploads(((Staged.upload(needed, "s3://dst/c/needed.bin").text,
                             "s3://dst/c/needed.bin", 0, ()),))
    CommitStepStore("s3://dst/c/.pydistcp", s3.options).persist(
        CommitSequence("urn", "fs", (step,), "seq1"), "job0")
    r = CliRunner().invoke(main, ["cleanup", "s3://dst/c", "--older-than", "0s"])
    assert r.exit_code == 0, r.output
    assert "1 orphaned multipart upload(s)" in r.output
    left = {u["UploadId"] for u in s3.pending_uploads()}
    assert left == {other, needed} and orphan not in left
