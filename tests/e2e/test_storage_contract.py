"""One storage contract, run on every backend: local disk, the S3 server (moto) and FTP.

As fsspec's abstract suites and rclone's backend tests do, each test states what
any ``distcp.storage`` backend must do, and checks it with means other than the
storage itself (the disk, boto3, the FTP server's root on disk): bytes and paths.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distcp.storage import Staged, StagedKind, parse_staged, spec_for, storage_for
from tests.fixtures.ftp_server import FTPServer, ftp, ftp_server  # noqa: F401 - fixtures
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Place:
    """A root URL on one backend, its options, and a reader that is not our code."""

    kind: str
    root: str
    options: dict[str, Any]
    backend: str
    read: Callable[[str], bytes | None]  # relative path -> bytes, None when absent
    names: Callable[[str], list[str]]  # relative folder -> names in it (not our code)

    def url(self, rel: str) -> str:
        return f"{self.root}/{rel}"


def _disk_reader(base: Path) -> Callable[[str], bytes | None]:
    def read(rel: str) -> bytes | None:
        p = base / rel
        return p.read_bytes() if p.is_file() else None
    return read


def _disk_names(base: Path) -> Callable[[str], list[str]]:
    def names(rel: str) -> list[str]:
        p = base / rel
        return sorted(e.name for e in p.iterdir()) if p.is_dir() else []
    return names


@pytest.fixture(params=["local", "s3", "ftp"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "local":
        base = tmp_path / "root"
        base.mkdir()
        yield Place("local", str(base), {}, "local", _disk_reader(base), _disk_names(base))
    elif request.param == "s3":
        server: S3Server = request.getfixturevalue("s3")

        def read(rel: str) -> bytes | None:
            return server.objects("dst", "c/").get(f"c/{rel}")

        def names(rel: str) -> list[str]:
            prefix = f"c/{rel}/"
            return sorted({k[len(prefix):].split("/")[0]
                           for k in server.objects("dst", prefix)})
        yield Place("s3", "s3://dst/c", server.options, "object", read, names)
    else:
        server_ftp: FTPServer = request.getfixturevalue("ftp")
        base = server_ftp.root / "c"
        base.mkdir()
        yield Place("ftp", server_ftp.url("c"), server_ftp.options, "fsspec",
                    _disk_reader(base), _disk_names(base))


def test_the_backend_is_chosen_once_per_url_and_travels_as_a_picklable_spec(
        place: Place) -> None:
    spec = spec_for(place.root, place.options)
    assert spec.backend == place.backend
    again = pickle.loads(pickle.dumps(spec))
    assert (again.root, again.backend, again.options) == (spec.root, spec.backend,
                                                          spec.options)
    assert again.open() is spec.open() is storage_for(place.url("x"), place.options)
    assert place.options == {} or "secret" not in repr(spec) and "password" not in repr(spec)


def test_write_atomic_replaces_a_document_whole_and_leaves_no_temporary(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("state"))
    storage.write_atomic(place.url("state/doc.json"), b'{"v": 1}')
    storage.write_atomic(place.url("state/doc.json"), b'{"v": 2, "more": true}')
    assert place.read("state/doc.json") == b'{"v": 2, "more": true}'
    assert place.names("state") == ["doc.json"]
    assert storage.read_bytes(place.url("state/doc.json"), "doc") == b'{"v": 2, "more": true}'
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(place.url("state/none.json"), "doc")


def test_exists_isdir_and_entry_size_describe_what_is_there(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("d/e"))
    storage.write_atomic(place.url("d/e/f.bin"), b"12345")
    assert storage.exists(place.url("d/e/f.bin"))
    assert not storage.exists(place.url("d/e/g.bin"))
    assert storage.isdir(place.url("d/e"))
    assert not storage.isdir(place.url("d/e/f.bin"))
    assert storage.entry_size(place.url("d/e/f.bin")) == 5
    with pytest.raises(FileNotFoundError):
        storage.entry_size(place.url("d/e/g.bin"))


def test_a_staged_file_is_invisible_until_published_then_whole(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    caps = storage.capabilities
    storage.prepare_folder(place.url("staging"))
    if caps.directories:
        storage.makedirs(place.url("out"))
    body = b"staged bytes " * 1000
    staged, parts = storage.stage(body, place.url("out/a.bin"), place.url("staging/a.bin"))
    assert staged.kind is (StagedKind.UPLOAD if caps.multipart else StagedKind.PATH)
    assert parse_staged(staged.text) == staged  # the logged form reads back as the value
    assert place.read("out/a.bin") is None  # invisible before the publish
    assert not storage.is_published(staged, place.url("out/a.bin"), len(body))
    storage.publish(staged, place.url("out/a.bin"), parts)
    assert place.read("out/a.bin") == body
    assert storage.is_published(staged, place.url("out/a.bin"), len(body))
    assert not storage.is_published(staged, place.url("out/a.bin"), len(body) + 1)
    assert place.read("staging/a.bin") is None  # nothing left behind in staging


def test_an_empty_file_stages_and_publishes_as_zero_bytes(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("staging"))
    if storage.capabilities.directories:
        storage.makedirs(place.url("out"))
    staged, parts = storage.stage(b"", place.url("out/empty"), place.url("staging/empty"))
    storage.publish(staged, place.url("out/empty"), parts)
    assert place.read("out/empty") == b""
    assert storage.is_published(staged, place.url("out/empty"), 0)


def test_a_discarded_staged_file_leaves_nothing_and_discarding_twice_is_harmless(
        place: Place, request: pytest.FixtureRequest) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("staging"))
    staged, _ = storage.stage(b"x" * 100, place.url("out/b.bin"), place.url("staging/b.bin"))
    storage.discard(staged)
    storage.discard(staged)
    assert place.read("out/b.bin") is None and place.read("staging/b.bin") is None
    if storage.capabilities.multipart:
        assert request.getfixturevalue("s3").pending_uploads() == []


def test_remove_takes_a_tree_away(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("tree/sub"))
    storage.write_atomic(place.url("tree/sub/one"), b"1")
    storage.write_atomic(place.url("tree/two"), b"2")
    storage.remove(place.url("tree"))
    storage.remove(place.url("tree"))  # gone already: fine
    assert place.read("tree/two") is None and place.read("tree/sub/one") is None
    assert not storage.exists(place.url("tree/two"))


def test_sweep_orphans_aborts_only_unreferenced_old_uploads(
        place: Place, request: pytest.FixtureRequest) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("staging"))
    kept, _ = storage.stage(b"k" * 10, place.url("o/kept"), place.url("staging/kept"))
    lost, _ = storage.stage(b"l" * 10, place.url("o/lost"), place.url("staging/lost"))
    # (moto dates every upload 2010-11-10: "not old enough" needs centuries here)
    assert storage.sweep_orphans(place.root, {kept.upload_id}, older_than=1e11) == 0
    swept = storage.sweep_orphans(place.root, {kept.upload_id}, dry_run=True)
    if not storage.capabilities.multipart:
        assert swept == 0  # files in staging are not uploads: the run's cleanup owns them
        assert place.read("staging/kept") == b"k" * 10
        return
    pending = request.getfixturevalue("s3").pending_uploads
    assert swept == 1 and len(pending()) == 2  # a dry run aborts nothing
    assert storage.sweep_orphans(place.root, {kept.upload_id}) == 1
    assert [u["UploadId"] for u in pending()] == [kept.upload_id]
    assert storage.uploaded_parts(lost) is None


def test_staged_text_forms_of_earlier_versions_still_parse() -> None:
    """The commit log of a previous version holds these strings: replay must read them."""
    assert parse_staged("s3-upload:abc:def:s3://b/k/x.bin") == Staged.upload(
        "abc:def", "s3://b/k/x.bin")
    assert parse_staged("s3-empty:s3://b/e") == Staged.empty("s3://b/e")
    assert parse_staged("s3-published:s3://b/p").is_published
    assert parse_staged("/tmp/st/u1-a/0-0").needs_rename
    for value in (Staged.upload("id", "s3://b/k"), Staged.empty("s3://b/e"),
                  Staged.published("s3://b/p"), Staged.path("ftp://h:21/st/x")):
        assert parse_staged(value.text) == value
    with pytest.raises(ValueError, match="not a staged upload"):
        parse_staged("s3-upload:no-final-url")


def test_importing_pydistcp_leaves_fsspecs_ftp_class_alone() -> None:
    """A user's own ``fsspec.filesystem("ftp")`` keeps fsspec's class after any use of us."""
    code = ("import fsspec, distcp, distcp.storage.filesystems, distcp.cli, distcp.storage\n"
            "from distcp.storage.filesystems import filesystem_class\n"
            "assert filesystem_class('ftp').__module__ == 'distcp.storage.ftp'\n"
            "cls = fsspec.get_filesystem_class('ftp')\n"
            "print(cls.__module__ + '.' + cls.__name__)\n"
            "print(fsspec.registry['ftp'].__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["fsspec.implementations.ftp.FTPFileSystem", "FTPFileSystem"]


def test_pydistcp_opens_ftp_urls_with_its_own_class(ftp: FTPServer) -> None:  # noqa: F811
    import fsspec

    from distcp.storage import filesystems as fsutil

    fs, path = fsutil.filesystem(ftp.url("x/y"), ftp.options)
    assert type(fs).__name__ == "ListingFTPFileSystem" and path == "/x/y"
    assert fsspec.get_filesystem_class("ftp").__name__ == "FTPFileSystem"
    (ftp.root / "x").mkdir()
    (ftp.root / "x" / "y").write_bytes(b"z")
    assert fs.ls("/x", detail=False) == ["/x/y"]  # full paths: our class, not fsspec's
