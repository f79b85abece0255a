"""Per-file visibility on S3 (``--visibility file``), against a real S3 server.

In-process (no Spark): a task given ``publish_now`` files makes each object appear,
whole, as soon as its source is checked; a small file costs one PutObject, a big one
its multipart upload completed at once. The CLI runs are in test_s3_visibility_cli.py.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distcp.checksum import digest_of_bytes
from distcp.commit.publish import publish_plan
from distcp.configuration import CopyConfiguration
from distcp.copying.task import TaskSpec, run_work_unit
from distcp.errors import DestinationWriteError, IntegrityError
from distcp.model import CopyableFile, TaskResult, WorkUnit
from distcp.planning.listing import plan_all
from distcp.run.branch import publishing, task_spec
from distcp.storage import parse_staged, storage_for
from distcp.storage.http import wire as httpwire
from distcp.storage.s3 import inflight
from distcp.storage.s3 import lean as s3get
from distcp.storage.s3 import ops as s3ops
from distcp.summary import Summary
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    S3Server,
    _clean,
    moto_server,
    rclone_server,
    s3,
    s3_any,
)

pytestmark = pytest.mark.e2e
MiB = 1 << 20
ROOT = "s3://dst/vis/.pydistcp"


def make_tree(src: Path, sizes: dict[str, int]) -> dict[str, bytes]:
    src.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, size in sizes.items():
        out[name] = os.urandom(size)
        (src / name).write_bytes(out[name])
    return out


def planned(src: Path, s3srv: S3Server, **options: Any
            ) -> tuple[CopyConfiguration, TaskSpec, list[CopyableFile], Any]:
    cfg = CopyConfiguration.build([str(src)], "s3://dst/vis", dst_options=s3srv.options,
                                  **options)
    plan = plan_all(cfg, lambda m: None).plan
    return cfg, task_spec(cfg, "job1", ROOT), plan.files_to_copy, plan


def visible(s3srv: S3Server) -> dict[str, bytes]:
    return {k.removeprefix("vis/"): v for k, v in s3srv.objects("dst", "vis/").items()
            if "/.pydistcp/" not in k}


def requests_of(results: list[TaskResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        for kind, n in r.requests:
            out[kind] = out.get(kind, 0) + n
    return out


def test_small_files_appear_after_one_put_each_as_soon_as_the_task_copied_them(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    s3 = s3_any  # noqa: F811 - the parametrised server, under the usual name
    files = make_tree(tmp_path / "src", {"a.bin": 100_000, "b.txt": 10, "empty": 0,
                                         "almost.bin": 8 * MiB - 1})
    _, spec, todo, _ = planned(tmp_path / "src", s3)
    unit = WorkUnit(0, tuple(todo), publish_now=tuple(f.guid for f in todo))
    lean = s3get.requests_sent()
    results = run_work_unit(unit, spec, "a0")
    assert all(r.ok for r in results), [r.message for r in results]
    # each PUT on the lean wire (the task's own counts below say it sent these 4 and
    # nothing else; the process-wide counter may also see a request an earlier test's
    # abandoned thread finishes meanwhile: test_s3_timeouts stalls some on purpose)
    assert s3get.requests_sent() - lean >= len(files)
    assert visible(s3) == files  # before any publish step ran
    assert s3.pending_uploads() == []
    assert all(parse_staged(r.staging).is_published for r in results)
    for r in results:
        assert r.checksum == digest_of_bytes(files[r.destination.rsplit("/", 1)[1]])
    counts = requests_of(results)
    assert counts.pop("put") == len(files)  # the empty file too: one PUT, as before
    assert set(counts) <= {"progress"}, counts  # no create, part, complete, head or get


def test_a_unit_of_small_files_is_sent_from_one_thread_and_a_changed_one_fails_alone(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """40 small files, one changed after planning: the other 39 are each written with
    one PutObject from the task's own thread (``Storage.publish_wholes``), checked
    before it is sent, and the results come in the unit's order."""
    s3 = s3_any  # noqa: F811 - the parametrised server, under the usual name
    sizes = {f"f{n:02d}.bin": 1 + n * 1000 for n in range(39)}
    files = make_tree(tmp_path / "src", {**sizes, "empty": 0})
    _, spec, todo, _ = planned(tmp_path / "src", s3)
    (tmp_path / "src" / "f07.bin").write_bytes(b"changed")
    calls: list[int] = []
    put = inflight.put

    def counted(getter: Any, wanted: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(wanted))
        return put(getter, wanted, *args, **kwargs)

    monkeypatch.setattr(inflight, "put", counted)
    unit = WorkUnit(0, tuple(todo), publish_now=tuple(f.guid for f in todo))
    results = run_work_unit(unit, spec, "a0")
    assert calls == [40]  # the whole unit at once
    assert [r.origin for r in results] == [f.origin.url for f in todo]  # the unit's order
    [failed] = [r for r in results if not r.ok]
    assert failed.destination.endswith("/f07.bin") and failed.error_type == "SourceReadError"
    assert "source changed while copying" in failed.message
    del files["f07.bin"]
    assert visible(s3) == files  # the changed one never appeared
    assert s3.pending_uploads() == []
    assert all(parse_staged(r.staging).is_published for r in results if r.ok)
    for r in results:
        if r.ok:
            assert r.checksum == digest_of_bytes(files[r.destination.rsplit("/", 1)[1]])
            assert dict(r.requests).get("put") == 1, r.requests
    counts = requests_of(results)
    assert counts.pop("put") == 39
    assert set(counts) <= {"progress"}, counts


def test_a_put_refused_from_the_one_thread_is_written_its_usual_way(
        rclone_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body changed on the way is refused (BadDigest): that file is copied again its
    usual way, which writes the right bytes; a server's other answers go the same way."""
    files = make_tree(tmp_path / "src", {f"g{n}.bin": 100 + n for n in range(6)})
    _, spec, todo, _ = planned(tmp_path / "src", rclone_s3)
    real = inflight.request

    def flipping(method: str, host: str, path: str, headers: Any, body: bytes = b"") -> bytes:
        if path.endswith("/g3.bin"):
            body = body[:-1] + bytes([body[-1] ^ 1])
        return real(method, host, path, headers, body)

    monkeypatch.setattr(inflight, "request", flipping)
    results = run_work_unit(WorkUnit(0, tuple(todo), publish_now=tuple(f.guid for f in todo)),
                            spec, "a0")
    assert all(r.ok for r in results), [r.message for r in results]
    assert visible(rclone_s3) == files and rclone_s3.pending_uploads() == []
    assert requests_of(results)["put"] == 6  # g3's own, through the usual way


@pytest.mark.parametrize("files", [1, 3])
def test_a_copy_to_s3_makes_no_folder_on_the_local_disk(
        s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        files: int) -> None:
    """Staging folders per final folder are a local disk's (``Folders``, made with
    ``os``): a unit bound for an object store, of one file or several, makes none,
    not even in the working directory (an ``s3:`` folder there, once)."""
    make_tree(tmp_path / "src", {f"f{n}.bin": 10 + n for n in range(files)})
    _, spec, todo, _ = planned(tmp_path / "src", s3)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    results = run_work_unit(WorkUnit(0, tuple(todo)), spec, "a0")
    assert all(r.ok for r in results), [r.message for r in results]
    assert list(cwd.iterdir()) == []


def test_a_big_file_keeps_multipart_but_is_completed_by_its_task(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    s3 = s3_any  # noqa: F811 - the parametrised server, under the usual name
    files = make_tree(tmp_path / "src", {"big.bin": 13 * MiB})
    _, spec, todo, _ = planned(tmp_path / "src", s3)
    lean = s3get.requests_sent()
    [r] = run_work_unit(WorkUnit(0, tuple(todo), publish_now=(todo[0].guid,)), spec, "a0")
    assert r.ok, r.message
    assert s3get.requests_sent() - lean >= 4  # create, 2 parts, complete: the lean wire (its counts below: exactly these)
    assert visible(s3) == files and s3.pending_uploads() == []
    counts = dict(r.requests)
    assert (counts["create"], counts["part"], counts["complete"]) == (1, 2, 1)
    assert "put" not in counts


def test_a_source_that_changed_is_never_published_not_even_for_a_moment(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """The check of the source comes before the PUT (or the complete): no object, ever."""
    make_tree(tmp_path / "src", {"small.bin": 1000, "big.bin": 9 * MiB})
    _, spec, todo, _ = planned(tmp_path / "src", s3)
    (tmp_path / "src" / "small.bin").write_bytes(b"changed")
    (tmp_path / "src" / "big.bin").write_bytes(os.urandom(9 * MiB + 1))
    results = run_work_unit(WorkUnit(0, tuple(todo), publish_now=tuple(f.guid for f in todo)),
                            spec, "a0")
    assert [r.ok for r in results] == [False, False]
    assert all("source changed while copying" in r.message for r in results)
    assert visible(s3) == {} and s3.pending_uploads() == []
    assert requests_of(results).get("put", 0) == 0


def test_a_put_the_server_stored_differently_is_removed_and_fails(
        s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """moto ignores Content-MD5 (S3 answers BadDigest): the answer's ETag still tells."""
    def garbling(fs: Any, url: str, data: bytes, extra: Any = None,
                 digest: bytes | None = None) -> str:  # a body cut short
        out = s3ops.call(fs, "put_object", Bucket="dst", Key=url.split("/", 3)[3],
                         Body=data[:-1])
        return str(out["ETag"])

    monkeypatch.setattr(s3ops, "put", garbling)
    with pytest.raises(IntegrityError, match="other bytes than the 5 sent"):
        storage_for("s3://dst/vis/g.txt", s3.options).publish_whole("s3://dst/vis/g.txt",
                                                                    b"hello")
    assert visible(s3) == {}


@pytest.fixture()
def rclone_s3(rclone_server: S3Server, monkeypatch: pytest.MonkeyPatch  # noqa: F811
              ) -> Iterator[S3Server]:
    yield from _clean(rclone_server, monkeypatch)


def test_a_body_altered_after_signing_is_refused_and_nothing_is_stored(
        rclone_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean PutObject carries its Content-MD5: a byte changed on the way is refused
    by a server that checks it (moto does not), and no object is left. Every lean PUT,
    an UploadPart too, signs its body's SHA-256, which S3 itself checks (neither local
    server does)."""
    real = httpwire.Wire.request
    signed: list[tuple[str, str]] = []

    def flipping(self: Any, method: str, target: str, headers: Any, body: Any = b"") -> Any:
        if method == "PUT" and body:
            signed.append((headers["x-amz-content-sha256"], hashlib.sha256(body).hexdigest()))
            body = bytes(body[:-1]) + bytes([body[-1] ^ 1])
        return real(self, method, target, headers, body)

    monkeypatch.setattr(httpwire.Wire, "request", flipping)
    url = "s3://dst/vis/flipped.bin"
    with pytest.raises(DestinationWriteError, match=r"flipped\.bin: .*HTTP 400 BadDigest"):
        storage_for(url, rclone_s3.options).publish_whole(url, os.urandom(1000))
    fs = rclone_s3.filesystem()
    upload_id = s3ops.create(fs, url)
    s3ops.upload_part(fs, url, upload_id, 1, os.urandom(1000))
    s3ops.abort(fs, url, upload_id)
    assert visible(rclone_s3) == {} and rclone_s3.pending_uploads() == []
    assert len(signed) == 2 and all(mine == body for mine, body in signed), signed


def test_publish_has_nothing_left_to_do_and_counts_published_files_even_in_a_failed_set(
        s3: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """--commit-policy full and one file failing: the set is not published, but the
    objects published as they were copied stay (each whole) and count as copied."""
    files = make_tree(tmp_path / "src", {"a.bin": 1000, "b.bin": 6 * MiB, "c.bin": 10})
    cfg, spec, todo, plan = planned(tmp_path / "src", s3, commit_policy="full",
                                    visibility="file")
    (tmp_path / "src" / "c.bin").write_bytes(b"changed!")  # c.bin fails
    results = run_work_unit(WorkUnit(0, tuple(todo), publish_now=tuple(f.guid for f in todo)),
                            spec, "a0")
    summary = Summary()
    summary.add(publish_plan(plan, results, publishing(cfg, "job1", ROOT)))
    assert visible(s3) == {"a.bin": files["a.bin"], "b.bin": files["b.bin"]}
    assert s3.pending_uploads() == []
    assert (summary.files_copied, summary.files_failed, summary.files_not_published) == (2, 1, 0)
    assert summary.bytes_copied == 1000 + 6 * MiB


def test_a_server_side_copy_is_completed_by_its_task_under_visibility_file(
        s3: S3Server) -> None:  # noqa: F811
    """S3 -> S3 on one endpoint: UploadPartCopy, then the task completes the upload."""
    client = s3.client()
    files = {"x.bin": os.urandom(3000), "y.bin": os.urandom(6 * MiB)}
    for name, data in files.items():
        client.put_object(Bucket="src", Key=f"in/{name}", Body=data)
    cfg = CopyConfiguration.build(["s3://src/in"], "s3://dst/vis", dst_options=s3.options,
                                  src_options=s3.options, visibility="file")
    todo = plan_all(cfg, lambda m: None).plan.files_to_copy
    spec = task_spec(cfg, "job1", ROOT)
    assert spec.server_side
    results = run_work_unit(WorkUnit(0, tuple(todo), publish_now=tuple(f.guid for f in todo)),
                            spec, "a0")
    assert all(r.ok and parse_staged(r.staging).is_published for r in results), results
    assert visible(s3) == files and s3.pending_uploads() == []
    counts = requests_of(results)
    assert (counts["create"], counts["part_copy"], counts["complete"]) == (2, 2, 2), counts
    assert counts["head"] == 2  # the sources' recheck after the copy
    assert "put" not in counts and "part" not in counts
