"""Small objects S3 -> local disk: one GET If-Match per object, against real servers.

The task function runs in-process against moto and ``rclone serve s3`` so a botocore
hook can count the requests and an object can be overwritten between listing and
copy; the CLI run checks a whole tree (bytes, mtimes) and that a rerun copies 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

import fsspec.asyn
import pytest

import distcp
from distcp.copying.task import TaskSpec, copy_file, run_work_unit
from distcp.model import CopyableFile, WorkUnit
from distcp.storage import filesystems as fsutil
from distcp.storage.s3 import inflight
from distcp.storage.s3 import lean as s3get
from distcp.storage.s3 import ops as s3api
from tests.conftest import run_cli
from tests.e2e.test_folder_publish import renamed  # noqa: F401 - fixture
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    LoggedS3Server,
    S3Server,
    moto_logged_server,
    moto_server,
    rclone_server,
    s3_any,
)

pytestmark = pytest.mark.e2e


def _put(s3: S3Server, objects: dict[str, bytes]) -> None:
    client = s3.client()
    for key, data in objects.items():
        client.put_object(Bucket="src", Key=key, Body=data)


def _listed(s3: S3Server, prefix: str, tmp: Path) -> list[CopyableFile]:
    fs, path = fsutil.filesystem(f"s3://src/{prefix}", s3.options)
    fs.invalidate_cache()
    return [CopyableFile(origin=fsutil.status(fs, info), dataset_urn="d", file_set="",
                         destination=str(tmp / "out" / name.rsplit("/", 1)[1]))
            for name, info in sorted(fs.find(path, detail=True).items())]


def _count_requests(s3: S3Server) -> list[str]:
    """Every request the task's s3fs client sends, by operation name."""
    fs, _ = fsutil.filesystem("s3://src/", s3.options)
    fsspec.asyn.sync(fs.loop, fs.set_session)
    seen: list[str] = []

    def hook(request: Any, **_: Any) -> None:
        seen.append(request.method)

    fs.s3.meta.events.register("before-send.s3", hook)
    return seen


def test_one_get_per_small_object_and_a_changed_source_stages_nothing(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    s3 = s3_any
    rng = random.Random(9)
    objects = {f"small/f{i:03d}.bin": rng.randbytes(64) for i in range(40)}
    _put(s3, objects)
    files = _listed(s3, "small", tmp_path)
    assert len(files) == 40 and all(f.origin.etag for f in files)
    staging = tmp_path / "staging"
    spec = TaskSpec(job_id="j", staging_root=str(staging), progress_root=str(tmp_path / "p"),
                    src_options=s3.options)
    seen = _count_requests(s3)
    lean = s3get.requests_sent()
    results = run_work_unit(WorkUnit(unit_id=0, files=tuple(files)), spec, "a0")
    assert [r.status for r in results] == ["ok"] * 40, [r.message for r in results]
    # one GET each on the lean path; none through botocore: no HEAD before (size, ETag)
    # nor after (recheck)
    assert s3get.requests_sent() - lean == 40 and seen == []
    for f, r in zip(files, results):
        assert Path(r.staging).read_bytes() == objects[f"small/{Path(f.origin.url).name}"]
        assert os.stat(r.staging).st_mtime == pytest.approx(f.origin.mtime, abs=1e-3)

    # overwritten between listing and copy: the If-Match GET refuses, nothing staged
    s3.client().put_object(Bucket="src", Key="small/f007.bin", Body=b"new" * 30)
    changed = tmp_path / "changed"
    changed.mkdir()
    [failed] = copy_file(files[7], 0, "a1", str(changed), 0, spec, bytearray(1 << 16))
    assert failed.status == "failed" and failed.error_type == "SourceReadError"
    assert "source changed while copying: s3://src/small/f007.bin" in failed.message
    assert list(changed.iterdir()) == []
    # the same size: rclone serve s3 answers the new bytes (it ignores If-Match), whose
    # ETag is not the listed one: refused too, never staged as the listed version
    s3.client().put_object(Bucket="src", Key="small/f008.bin", Body=b"n" * 64)
    assert files[8].origin.url.endswith("/f008.bin") and files[8].origin.size == 64
    [failed] = copy_file(files[8], 0, "a2", str(changed), 0, spec, bytearray(1 << 16))
    assert failed.status == "failed" and failed.error_type == "SourceReadError"
    assert "source changed while copying: s3://src/small/f008.bin" in failed.message
    assert list(changed.iterdir()) == []


def test_a_unit_of_small_objects_is_read_from_one_thread_and_a_changed_one_fails_alone(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    s3 = s3_any
    rng = random.Random(10)
    objects = {f"unit/f{i:03d}.bin": rng.randbytes(64) for i in range(40)}
    _put(s3, objects)
    files = _listed(s3, "unit", tmp_path)
    # changed after the listing: moto refuses the GET If-Match (412), rclone serve s3
    # answers the new bytes, which are not the listed size: a changed source either way
    s3.client().put_object(Bucket="src", Key="unit/f007.bin", Body=b"new" * 30)
    calls: list[int] = []
    fetch = inflight.fetch

    def counted(getter: Any, wanted: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(wanted))
        return fetch(getter, wanted, *args, **kwargs)

    monkeypatch.setattr(inflight, "fetch", counted)
    spec = TaskSpec(job_id="j", staging_root=str(tmp_path / "staging"),
                    progress_root=str(tmp_path / "p"), src_options=s3.options)
    seen = _count_requests(s3)
    lean = s3get.requests_sent()
    results = run_work_unit(WorkUnit(unit_id=0, files=tuple(files)), spec, "a0")
    assert calls == [40]  # the whole unit read at once, from the task's own thread
    assert [r.origin for r in results] == [f.origin.url for f in files]  # the unit's order
    [failed] = [r for r in results if r.status != "ok"]
    assert failed.origin == "s3://src/unit/f007.bin" and failed.error_type == "SourceReadError"
    assert "source changed while copying: s3://src/unit/f007.bin" in failed.message
    # staged under its final name, in the unit's folder for its final folder (Folders)
    assert not failed.staging and not (tmp_path / "staging" / "u0-a0" / "d0" / "f007.bin").exists()
    for f, r in zip(files, results):
        if r.status == "ok":
            assert Path(r.staging) == tmp_path / "staging" / "u0-a0" / "d0" / Path(f.destination).name
            assert Path(r.staging).read_bytes() == objects[f"unit/{Path(f.origin.url).name}"]
            assert os.stat(r.staging).st_mtime == pytest.approx(f.origin.mtime, abs=1e-3)
    # one GET each; the changed one (refused by moto; answered by rclone serve s3 with
    # an ETag that is not the one asked for) read once more its usual way, to say why
    assert s3get.requests_sent() - lean == 41 and seen == []


def test_a_small_object_in_hand_is_staged_by_one_call_as_the_writer_stages_it(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A body read by ``read_together`` is staged by ``Storage.stage_small_body`` (no
    stream, no writer): the same results, bytes, mode and mtime as the general way; an
    empty object and one given an owner take the general way."""
    from dataclasses import replace

    from distcp.copying import task
    from distcp.storage.local.storage import LocalStorage

    s3 = s3_any
    rng = random.Random(11)
    objects = {f"hand/f{i:02d}.bin": rng.randbytes(10 + i) for i in range(12)}
    objects["hand/empty"] = b""
    _put(s3, objects)
    files = [replace(f, mode=0o640) for f in _listed(s3, "hand", tmp_path)]
    owned = files[3].destination
    files[3] = replace(files[3], owner=str(os.getuid()))
    in_one_call: list[str] = []
    real = LocalStorage.stage_small_body

    def spy(self: LocalStorage, data: bytes, url: str, **kw: Any) -> Any:
        done = real(self, data, url, **kw)
        if done is not None:
            in_one_call.append(Path(url).name)
        return done

    monkeypatch.setattr(LocalStorage, "stage_small_body", spy)
    runs = {}
    for way in ("in-hand", "writer"):
        if way == "writer":
            monkeypatch.setattr(task, "_copy_body", lambda *args: None)
        spec = TaskSpec(job_id="j", staging_root=str(tmp_path / way),
                        progress_root=str(tmp_path / "p"), src_options=s3.options,
                        verify="digest")
        runs[way] = {r.destination: r for r in run_work_unit(
            WorkUnit(unit_id=0, files=tuple(files)), spec, "a0")}
    assert sorted(in_one_call) == sorted(
        Path(f.destination).name for f in files if f.origin.size and f.destination != owned)
    for f in files:
        a, b = runs["in-hand"][f.destination], runs["writer"][f.destination]
        assert a.ok and b.ok, (a.message, b.message)
        assert replace(a, staging="") == replace(b, staging="")
        sa, sb = os.stat(a.staging), os.stat(b.staging)
        assert Path(a.staging).read_bytes() == Path(b.staging).read_bytes() == \
            objects[f"hand/{Path(f.origin.url).name}"]
        assert (sa.st_mode & 0o7777, sa.st_mtime_ns) == (sb.st_mode & 0o7777, sb.st_mtime_ns)
        assert sa.st_mode & 0o7777 == 0o640
        assert sa.st_mtime == pytest.approx(f.origin.mtime, abs=1e-3)


def test_the_folders_of_an_s3_source_are_published_by_one_rename_each(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        renamed: list[str]) -> None:  # noqa: F811
    """Objects are staged under their final names, a staging folder per final folder,
    so that a folder the run creates is published by one rename, as a local source's
    (an S3 -> local copy of 40,000 objects published in 0.44-0.51 s instead of 0.92 s)."""
    s3 = s3_any
    objects = {f"fold/d{d}/o{n:02d}.bin": b"%d-%d" % (d, n) for d in range(3) for n in range(20)}
    _put(s3, objects)
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    dst = tmp_path / "dst"
    s = distcp.copy("s3://src/fold", str(dst), progress=False)
    assert s.ok and s.files_copied == 60, s.failures
    assert sorted(renamed) == ["d0", "d1", "d2"]
    got = {p.relative_to(dst).as_posix(): p.read_bytes() for p in dst.rglob("*")
           if p.is_file() and ".pydistcp" not in p.parts}
    assert got == {k.removeprefix("fold/"): v for k, v in objects.items()}


TRICKY = ["plain.txt", "sp ace/a+b=c&d.txt", "ünï/çødé~x.bin", "pct%41y", "q?x#y;z",
          "a*b(c)!'.txt"]


def test_lean_get_signs_every_key_like_botocore_and_maps_answers(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    s3 = s3_any
    objects = {f"k/{name}": os.urandom(50) for name in TRICKY}
    _put(s3, objects)
    fs, _ = fsutil.filesystem("s3://src/", s3.options)
    listed = {f.origin.url: f.origin for f in _listed(s3, "k", tmp_path)}
    before = s3get.requests_sent()
    for key, data in objects.items():
        origin = listed[f"s3://src/{key}"]
        assert origin.etag and s3api.get_if_match(fs, origin.url, origin.etag) == data, key
    assert s3get.requests_sent() - before == len(objects)  # none fell back to s3fs
    url, etag = "s3://src/k/plain.txt", listed["s3://src/k/plain.txt"].etag
    # rclone serve s3 (v1.75) ignores If-Match on GET (PITFALLS.md): its answer's ETag,
    # not the one asked for, is refused as moto refuses the request
    with pytest.raises(OSError) as changed:
        s3api.get_if_match(fs, url, '"0123456789abcdef0123456789abcdef"')
    assert s3api.precondition_failed(changed.value)  # sources._get_listed: "changed"
    with pytest.raises(FileNotFoundError):
        s3api.get_if_match(fs, "s3://src/k/missing", etag)
    if s3.kind == "rclone":  # moto's server mode does not check signatures
        wrong = {**s3.options, "secret": "not-the-secret"}
        bad_fs, _ = fsutil.filesystem("s3://src/", wrong)
        with pytest.raises(PermissionError):
            s3api.get_if_match(bad_fs, url, etag)


def test_a_proxy_in_the_environment_keeps_gets_on_s3fs(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    s3 = s3_any
    _put(s3, {"proxied/a.bin": b"through botocore"})
    [listed] = _listed(s3, "proxied", tmp_path)
    # botocore honours the variables (and NO_PROXY lets it reach the loopback server);
    # the lean wire does not speak to proxies, so it must not take the request
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    fs, _ = fsutil.filesystem("s3://src/", {**s3.options, "default_block_size": 3 << 20})
    before = s3get.requests_sent()
    assert listed.origin.etag
    assert s3api.get_if_match(fs, listed.origin.url, listed.origin.etag) == b"through botocore"
    assert s3get.requests_sent() == before


def test_lean_listing_pages_and_find_answer_as_botocore_and_s3fs_do(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    from distcp.storage.s3 import listing as s3list

    s3 = s3_any
    objects = {f"lp/{name}": os.urandom(9) for name in [*TRICKY, "a+b c", "d/e/f.txt",
                                                        "pct%2Bz", "x/y"]}
    _put(s3, objects)
    fs, _ = fsutil.filesystem("s3://src/", s3.options)
    before = s3get.requests_sent()
    after, lean_pages = None, []
    while True:  # pages of 3: StartAfter paging, keys decoded
        page = s3list.list_page(fs, "src", "lp/", after, 3)
        assert page is not None
        lean_pages.append(page)
        if not page["IsTruncated"]:
            break
        after = page["Contents"][-1]["Key"]
    sent = s3get.requests_sent() - before
    botocore_pages, after = [], None
    while True:
        kwargs = {"Bucket": "src", "Prefix": "lp/", "MaxKeys": 3}
        answer = fs.call_s3("list_objects_v2", **kwargs, **({"StartAfter": after} if after
                                                           else {}))
        botocore_pages.append({"Contents": answer.get("Contents", []),
                               "IsTruncated": answer["IsTruncated"]})
        if not answer["IsTruncated"]:
            break
        after = answer["Contents"][-1]["Key"]
    assert lean_pages == botocore_pages and sent == len(lean_pages) >= 4
    assert sorted(c["Key"] for p in lean_pages for c in p["Contents"]) == sorted(objects)

    # a range ending inside the second page: no third page is asked for
    keys, before = sorted(objects), s3get.requests_sent()
    stream = s3list.page_stream(fs, "src", "lp/", None, 3, beyond=lambda k: k > keys[4])
    assert stream is not None
    assert [c["Key"] for p in stream for c in p["Contents"]] == keys[:6]
    assert s3get.requests_sent() - before == 2

    fs.invalidate_cache()
    assert s3list.find_keys(fs, "s3://src/lp") == fs.find("s3://src/lp", detail=True)
    assert s3list.find_keys(fs, "s3://src/lp/a+b c") is None  # an object: s3fs says
    assert s3list.find_keys(fs, "s3://src/none-here") is None


def test_signatures_match_botocore_for_awkward_keys() -> None:
    import datetime
    from unittest import mock
    from urllib.parse import quote

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", "session-token")
    when = datetime.datetime(2026, 11, 23, 12, 0, 0)
    for key in TRICKY:
        url = f"http://s3.example.test/bucket/{quote(key, safe='/~')}"
        request = AWSRequest(method="GET", url=url, headers={"If-Match": '"e"'})
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            S3SigV4Auth(credentials, "s3", "eu-west-1").add_auth(request)
        mine = s3get.sign("GET", "s3.example.test", url.split("s3.example.test", 1)[1],
                          {"If-Match": '"e"'}, credentials, "eu-west-1",
                          now=when.replace(tzinfo=datetime.UTC).timestamp())
        assert mine["authorization"] == request.headers["Authorization"], key
        assert mine["x-amz-security-token"] == "session-token"
        # a bucket listing: the query signed as botocore signs it
        params = {"list-type": "2", "prefix": f"p/{key}", "start-after": key, "max-keys": "7"}
        query = s3get.canonical_query(params)
        request = AWSRequest(method="GET", url=f"http://s3.example.test/bucket?{query}")
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            S3SigV4Auth(credentials, "s3", "eu-west-1").add_auth(request)
        mine = s3get.sign("GET", "s3.example.test", "/bucket", {}, credentials, "eu-west-1",
                          now=when.replace(tzinfo=datetime.UTC).timestamp(), query=query)
        assert mine["authorization"] == request.headers["Authorization"], key
        # an UploadPart: the method, the query and the body's SHA-256 are signed
        body = f"part of {key}".encode()
        query = s3get.canonical_query({"partNumber": "3", "uploadId": "u/1+2=="})
        request = AWSRequest(method="PUT", url=url + f"?{query}", data=body,
                             headers={"Content-MD5": "bWQ1"})
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            S3SigV4Auth(credentials, "s3", "eu-west-1").add_auth(request)
        mine = s3get.sign("PUT", "s3.example.test", url.split("s3.example.test", 1)[1],
                          {"Content-MD5": "bWQ1"}, credentials, "eu-west-1",
                          now=when.replace(tzinfo=datetime.UTC).timestamp(), query=query,
                          payload=hashlib.sha256(body).hexdigest())
        assert mine["x-amz-content-sha256"] == request.headers["X-Amz-Content-SHA256"]
        assert mine["authorization"] == request.headers["Authorization"], key


def test_small_objects_tree_to_local_is_identical_with_mtimes_and_rerun_copies_none(
        s3_any: S3Server, tmp_path: Path, warm_engine_local2: dict[str, str]) -> None:  # noqa: F811
    s3 = s3_any
    rng = random.Random(11)
    objects = {f"tree/d{i % 5}/o{i:03d}.bin": rng.randbytes(rng.randrange(0, 300))
               for i in range(500)}
    _put(s3, objects)
    listed = {s: s.origin.mtime for s in _listed(s3, "tree", tmp_path)}
    mtimes = {f.origin.url.removeprefix("s3://src/tree/"): m for f, m in listed.items()}
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    args = ("copy", "s3://src/tree", str(dst), "--no-progress", "--master", "local[2]",
            "--log-dir", str(tmp_path / "logs"), "--summary-json", str(sj))
    first = run_cli(*args, env={**s3.env, **warm_engine_local2})
    assert first.returncode == 0, first.stderr
    assert json.loads(sj.read_text())["files_copied"] == 500
    got = {p.relative_to(dst).as_posix(): p for p in dst.rglob("*")
           if p.is_file() and ".pydistcp" not in p.parts}
    assert {k: p.read_bytes() for k, p in got.items()} == {
        k.removeprefix("tree/"): v for k, v in objects.items()}
    for rel, p in got.items():
        assert p.stat().st_mtime == pytest.approx(mtimes[rel], abs=1e-3), rel
    again = run_cli(*args, env={**s3.env, **warm_engine_local2})
    assert again.returncode == 0, again.stderr
    s = json.loads(sj.read_text())
    assert (s["files_copied"], s["files_skipped"]) == (0, 500)


def test_a_buckets_remembered_client_follows_the_environment_to_another_server(
        moto_server: S3Server, moto_logged_server: LoggedS3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage remembers each bucket's filesystem only while fsspec holds it: when a
    process's AWS variables move to another server and its clients are dropped (the
    warm engine's workers do so for each run, ``forget_environment_clients``; so does an
    API caller's process), the next small read goes to the new server, not the old."""
    from distcp.storage import storage_for
    from distcp.storage.spec import forget_environment_clients

    servers = (moto_server, moto_logged_server.server)
    for server, body in zip(servers, (b"on the first", b"on the second"), strict=True):
        server.reset()
        server.client().put_object(Bucket="src", Key="k.bin", Body=body)
    url, got = "s3://src/k.bin", []
    storage = storage_for(url, {})
    try:
        for server in servers:
            for key, value in server.env.items():
                monkeypatch.setenv(key, value)
            forget_environment_clients()
            got.append(storage.read_version(url, storage.stat(url).etag or ""))
    finally:
        forget_environment_clients()
    assert got == [b"on the first", b"on the second"]
