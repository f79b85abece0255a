"""A GCS tree listed once through the SDK, and small GCS objects read from one thread
with pydistcp's own requests, against fake-gcs-server on 127.0.0.1
(``GcsStorage.walk``, ``distcp.storage.gcs.reads``).

The walk gives what gcsfs's gave (the same statuses, folders derived from the names)
from one listing, and names an object that is also a folder's name. A unit's objects are read at once, each one GET of its listed generation: the bytes
staged are the listed ones; an object replaced after the listing is not read this way
(its generation is gone), goes the SDK's way and fails alone as a changed source; a
version that is an ETag, and an answer of another generation, are left to the SDK's
way. The OAuth token of the SDK's credentials goes on each request.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from distcp.copying.task import TaskSpec, run_work_unit
from distcp.model import CopyableFile, WorkUnit
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.gcs import endpoint, reads
from distcp.storage.http.wire import Answer
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures
from tests.fixtures.stores import put_tree

pytestmark = pytest.mark.e2e


def _listed(prefix: str, tmp: Path) -> list[CopyableFile]:
    fs, path = fsutil.filesystem(f"gs://src/{prefix}", {})
    fs.invalidate_cache()
    return [CopyableFile(origin=fsutil.status(fs, info), dataset_urn="d", file_set="",
                         destination=str(tmp / "out" / name.rsplit("/", 1)[1]))
            for name, info in sorted(fs.find(path, detail=True).items())]


def test_a_tree_is_listed_once_as_gcsfs_lists_it_and_a_key_that_is_a_folder_is_named(
        gcs: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from distcp.storage.gcs import objects

    put_tree(gcs, "src", "t/", {"a": b"1", "a/b": b"22", "c/d/e.bin": b"333", "f.bin": b"4"})
    put_tree(gcs, "src", "other/", {"x": b"not below"})
    calls: list[str] = []
    listed = objects.listed

    def counted(options: Any, fs: Any, path: str) -> Any:
        calls.append(path)
        return listed(options, fs, path)

    monkeypatch.setattr(objects, "listed", counted)
    storage = storage_for("gs://src/t", {})
    skipped: list[fsutil.Skipped] = []
    walked = dict(storage.walk("gs://src/t", skipped=skipped))
    assert calls == ["src/t"]  # one listing
    assert sorted(walked) == ["src/t/a", "src/t/a/b", "src/t/c", "src/t/c/d",
                              "src/t/c/d/e.bin", "src/t/f.bin"]
    assert [s.path for s in skipped] == ["gs://src/t/a"]  # a file and a folder of one name
    assert walked["src/t/a"].is_dir and walked["src/t/c/d"].is_dir
    fs, _ = fsutil.filesystem("gs://src/t", {})
    fs.invalidate_cache()
    for path in ("src/t/a/b", "src/t/c/d/e.bin", "src/t/f.bin"):
        assert walked[path] == fsutil.status(fs, fs.info(path))  # size, mtime, generation
    with pytest.raises(FileNotFoundError):
        list(storage_for("gs://nobucket/t", {}).walk("gs://nobucket/t"))


def test_a_unit_of_small_objects_is_read_from_one_thread_and_a_replaced_one_fails_alone(
        gcs: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    rng = random.Random(39)
    objects = {f"f{i:03d}.bin": rng.randbytes(64 + i) for i in range(40)}
    put_tree(gcs, "src", "unit/", objects)
    files = _listed("unit", tmp_path)
    assert all(f.origin.etag and f.origin.etag.isdigit() for f in files)  # generations
    put_tree(gcs, "src", "unit/", {"f007.bin": b"replaced" * 9})  # a new generation
    calls: list[int] = []
    answered: list[int] = []
    fetch = reads.fetch

    def counted(options: Any, wanted: Any) -> Any:
        calls.append(len(wanted))
        got = fetch(options, wanted)
        assert got is not None
        for index, body in got:
            if body is not None:
                answered.append(index)
            yield index, body

    monkeypatch.setattr(reads, "fetch", counted)
    spec = TaskSpec(job_id="j", staging_root=str(tmp_path / "staging"),
                    progress_root=str(tmp_path / "p"), src_options={})
    results = run_work_unit(WorkUnit(unit_id=0, files=tuple(files)), spec, "a0")
    assert calls == [40]  # the whole unit at once, from the task's own thread
    assert sorted(answered) == [i for i in range(40) if i != 7]  # the replaced one: SDK's way
    assert [r.origin for r in results] == [f.origin.url for f in files]
    [failed] = [r for r in results if r.status != "ok"]
    assert failed.origin == "gs://src/unit/f007.bin" and failed.error_type == "SourceReadError"
    assert "source changed while copying: gs://src/unit/f007.bin" in failed.message
    for f, r in zip(files, results):
        if r.status == "ok":
            assert Path(r.staging).read_bytes() == objects[Path(f.origin.url).name]
            assert os.stat(r.staging).st_mtime == pytest.approx(f.origin.mtime, abs=1e-3)


def test_only_the_listed_generation_is_taken_and_an_etag_goes_the_usual_way(
        gcs: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A version that is not a generation (a manifest's ETag, or anything a listing
    could hold, a line break included) is never written into a request."""
    put_tree(gcs, "src", "g/", {"a.bin": b"alpha", "b.bin": b"beta"})
    a, b = _listed("g", tmp_path)
    assert a.origin.etag is not None and b.origin.etag is not None
    sent: list[bytes] = []
    made = reads.request

    def kept(*args: Any) -> bytes:
        sent.append(made(*args))
        return sent[-1]

    monkeypatch.setattr(reads, "request", kept)
    storage = storage_for(a.origin.url, {})
    wanted = [(a.origin.url, a.origin.etag), (b.origin.url, str(int(b.origin.etag) + 1)),
              (b.origin.url, "CJ3v4bXx"), (b.origin.url, "7\r\nx-injected: 1"),
              (b.origin.url, b.origin.etag)]
    got = storage.read_versions(wanted)
    assert got is not None
    assert sorted(got, key=lambda pair: pair[0]) == [(0, b"alpha"), (1, None), (2, None),
                                                     (3, None), (4, b"beta")]
    assert len(sent) == 3 and not any(b"CJ3v4bXx" in r or b"injected" in r for r in sent)
    assert storage.read_versions([]) is None


def test_a_proxy_in_the_environment_leaves_every_object_to_the_sdk(
        gcs: GcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The wire speaks to no proxy: where one is named, the SDK (which honours it) reads."""
    put_tree(gcs, "src", "p/", {"a.bin": b"alpha"})
    [a] = _listed("p", tmp_path)
    assert a.origin.etag is not None
    storage = storage_for(a.origin.url, {})
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:1")
    assert storage.read_versions([(a.origin.url, a.origin.etag)]) is None
    monkeypatch.delenv("HTTPS_PROXY")
    assert list(storage.read_versions([(a.origin.url, a.origin.etag)]) or []) == [(0, b"alpha")]


def test_an_answer_of_another_generation_or_transcoded_is_not_taken() -> None:
    plain = {"x-goog-generation": "12", "x-goog-stored-content-encoding": "identity"}
    assert reads._stored(Answer(200, plain, b"x"), "12")
    assert not reads._stored(Answer(200, plain, b"x"), "13")
    assert not reads._stored(Answer(404, plain, b""), "12")
    assert not reads._stored(Answer(200, {**plain, "x-goog-stored-content-encoding": "gzip"},
                                    b"x"), "12")
    assert not reads._stored(Answer(200, {**plain, "content-encoding": "gzip"}, b"x"), "12")
    assert not reads._stored(Answer(200, {}, b"x"), "12")


def test_the_sdk_credentials_token_goes_on_each_request_and_anonymous_sends_none() -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.oauth2.credentials import Credentials

    class Client:
        def __init__(self, credentials: Any) -> None:
            self._credentials = credentials

    signed = endpoint.authorization(Client(Credentials(token="t0ken")))
    assert signed is not None and signed["authorization"] == "Bearer t0ken"
    assert endpoint.authorization(Client(AnonymousCredentials())) == {}  # type: ignore[no-untyped-call]
    assert endpoint.authorization(Client(None)) == {}
