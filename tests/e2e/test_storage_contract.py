"""One storage contract, run on every backend: local disk, the S3 server (moto), FTP,
Azure Blob Storage (Azurite) and Google Cloud Storage (fake-gcs-server).

As fsspec's abstract suites and rclone's backend tests do, each test states what
any ``distcp.storage`` backend must do, and checks it with means other than the
storage itself (the disk, boto3, the FTP server's root on disk): bytes and paths.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distcp.checksum import Digest, digest_of_bytes
from distcp.copying.ranges import RangeReader
from distcp.copying.writer import SourceReader, stage_stream
from distcp.errors import DestinationWriteError, SourceReadError
from distcp.model import CopyableFile, FileStatus, Split
from distcp.storage import Staged, StagedKind, parse_staged, spec_for, storage_for
from distcp.storage.base import Storage
from distcp.storage.staging import RangeAt, StagedFile
from tests.fixtures.azure_server import AzureServer, azure, azurite_server  # noqa: F401
from tests.fixtures.ftp_server import FTPServer, ftp, ftp_server  # noqa: F401 - fixtures
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401
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
    #: ids of the uploads staged and neither published nor discarded (not our code)
    pending: Callable[[], list[str]] = lambda: []

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


def _store_names(objects: Callable[[str], dict[str, bytes]]) -> Callable[[str], list[str]]:
    def names(rel: str) -> list[str]:
        prefix = f"c/{rel}/"
        return sorted({k[len(prefix):].split("/")[0] for k in objects(prefix)})
    return names


@pytest.fixture(params=["local", "s3", "ftp", "azure", "gcs"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "local":
        base = tmp_path / "root"
        base.mkdir()
        yield Place("local", str(base), {}, "local", _disk_reader(base), _disk_names(base))
    elif request.param == "s3":
        server: S3Server = request.getfixturevalue("s3")

        def read(rel: str) -> bytes | None:
            return server.objects("dst", "c/").get(f"c/{rel}")

        yield Place("s3", "s3://dst/c", server.options, "object", read,
                    _store_names(lambda p: server.objects("dst", p)),
                    lambda: [u["UploadId"] for u in server.pending_uploads()])
    elif request.param == "azure":
        server_az: AzureServer = request.getfixturevalue("azure")

        def read_blob(rel: str) -> bytes | None:
            return server_az.objects("dst", "c/").get(f"c/{rel}")

        # no options: Azure's standard environment (AZURE_STORAGE_CONNECTION_STRING)
        yield Place("azure", "az://dst/c", {}, "azure", read_blob,
                    _store_names(lambda p: server_az.objects("dst", p)),
                    server_az.pending_uploads)
    elif request.param == "gcs":
        server_gs: GcsServer = request.getfixturevalue("gcs")

        def read_object(rel: str) -> bytes | None:
            return server_gs.objects("dst", "c/").get(f"c/{rel}")

        # no options: Google's standard environment (STORAGE_EMULATOR_HOST)
        yield Place("gcs", "gs://dst/c", {}, "gcs", read_object,
                    _store_names(lambda p: server_gs.objects("dst", p)))
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


def test_create_new_writes_only_where_nothing_is_and_exclusively_where_it_says_so(
        place: Place) -> None:
    from concurrent.futures import ThreadPoolExecutor

    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("locks"))
    assert storage.create_new(place.url("locks/one"), b"first")
    assert not storage.create_new(place.url("locks/one"), b"second")
    assert place.read("locks/one") == b"first"
    if not storage.capabilities.exclusive_create:
        return  # two racing writers may both win: callers read the document back
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: storage.create_new(place.url("locks/race"),
                                                          f"writer {i}".encode()), range(8)))
    assert won.count(True) == 1
    assert place.read("locks/race") == f"writer {won.index(True)}".encode()


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
    assert place.pending() == []


def test_remove_takes_a_tree_away(place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the tree: names that begin as its name does, and names that would match it
    as a pattern, stay. Many keys go in batches (two a request here)."""
    from distcp.storage.s3 import storage as s3storage

    monkeypatch.setattr(s3storage, "DELETE_BATCH", 2)
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("tree/sub"))
    storage.prepare_folder(place.url("tree2"))
    for name in ("tree/sub/one", "tree/two", "tree/three", "tree/four", "tree2/kept",
                 "tree-kept", "trees", "file", "filed"):
        storage.write_atomic(place.url(name), name.encode())
    storage.remove(place.url("tree"))
    storage.remove(place.url("tree"))  # gone already: fine
    assert [place.read(n) for n in ("tree/two", "tree/sub/one", "tree/three", "tree/four")
            ] == [None] * 4
    assert not storage.exists(place.url("tree/two"))
    storage.remove(place.url("file"))
    assert place.read("file") is None
    for name in ("tree2/kept", "tree-kept", "trees", "filed"):
        assert place.read(name) == name.encode(), name


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
    assert swept == 1 and len(place.pending()) == 2  # a dry run aborts nothing
    assert storage.sweep_orphans(place.root, {kept.upload_id}) == 1
    assert place.pending() == [kept.upload_id]
    assert storage.uploaded_parts(lost) is None


# ---- staging a stream, a range; publishing a file set (issue 10) -------------------

MiB = 1 << 20
#: A body of two S3-sized parts (the first one full), with no repeating 4 KiB block.
BIG = b"".join(i.to_bytes(4, "big") * 1024 for i in range(1536))  # 6 MiB


def staged_stream(storage: Storage, place: Place, name: str, body: bytes,
                  hold_small: bool = False) -> Any:
    """Stage ``body`` as a task stages one output: the storage's writer, the engine's pump."""
    make_folders(storage, place)
    writer = storage.open_stage(place.url(f"out/{name}"), place.url(f"staging/{name}"),
                                verify="digest", size_hint=len(body), buffer_size=MiB,
                                hold_small=hold_small)
    return stage_stream(io.BytesIO(body), writer, bytearray(MiB))


def make_folders(storage: Storage, place: Place) -> None:
    """The task's staging folder and the final folder, where the storage has folders."""
    if storage.capabilities.directories:
        storage.makedirs(place.url("staging"))
        storage.makedirs(place.url("out"))


class Failing(io.RawIOBase):
    """A source that dies (EIO) after ``n`` bytes."""

    def __init__(self, body: bytes, n: int) -> None:
        self.inner, self.left = io.BytesIO(body), n

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.left <= 0:
            raise OSError(5, "Input/output error")
        chunk = self.inner.read(min(len(buffer), self.left))
        self.left -= len(chunk)
        buffer[:len(chunk)] = chunk
        return len(chunk)


def test_a_staged_stream_is_checked_invisible_then_published_whole(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    done = staged_stream(storage, place, "s.bin", BIG)
    assert (done.size, done.checksum) == (len(BIG), digest_of_bytes(BIG))
    assert parse_staged(done.text) == done.staged
    assert done.staged.kind is (StagedKind.UPLOAD if storage.capabilities.multipart
                                else StagedKind.PATH)
    assert [p[2] for p in done.parts] == ([5 * MiB, MiB] if storage.capabilities.multipart
                                          else [])
    assert place.read("out/s.bin") is None
    storage.publish(done.staged, place.url("out/s.bin"), done.parts)
    assert place.read("out/s.bin") == BIG
    assert storage.is_published(done.staged, place.url("out/s.bin"), len(BIG))


def test_a_stream_whose_source_fails_leaves_nothing_staged(
        place: Place, request: pytest.FixtureRequest) -> None:
    storage = storage_for(place.root, place.options)
    make_folders(storage, place)
    writer = storage.open_stage(place.url("out/f.bin"), place.url("staging/f.bin"),
                                size_hint=len(BIG), buffer_size=MiB)
    reader = SourceReader(Failing(BIG, 5 * MiB + 10), "/src/f.bin")  # type: ignore[arg-type]
    with pytest.raises(SourceReadError, match="^cannot read /src/f.bin: .*Input/output"):
        stage_stream(reader, writer, bytearray(MiB))
    assert place.names("staging") == [] and place.read("out/f.bin") is None
    assert place.pending() == []


def test_an_unwritable_staging_is_a_destination_error_naming_it(place: Place) -> None:
    """Where staging is a file, a file in the way of its folder fails the write; an
    object store has no folders to be in the way (S3 and Azure stage on the final key,
    GCS writes ``blocker/x`` beside an object ``blocker``)."""
    storage = storage_for(place.root, place.options)
    if storage.capabilities.multipart or not storage.capabilities.directories:
        pytest.skip("object stores have no folders: nothing can be in a staging's way")
    storage.write_atomic(place.url("blocker"), b"a file where a folder must be")
    writer = storage.open_stage(place.url("out/x"), place.url("blocker/x"))
    with pytest.raises(DestinationWriteError, match="^cannot write staging copy .*blocker/x: "):
        stage_stream(io.BytesIO(b"data"), writer, bytearray(MiB))
    assert place.read("blocker") == b"a file where a folder must be"


def test_an_empty_stream_stages_and_publishes_zero_bytes(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    done = staged_stream(storage, place, "e", b"")
    assert done.size == 0 and done.staged is not None
    storage.publish(done.staged, place.url("out/e"), done.parts)
    assert place.read("out/e") == b""


def test_a_small_stream_is_held_for_one_put_where_files_publish_one_by_one(
        place: Place) -> None:
    storage = storage_for(place.root, place.options)
    done = staged_stream(storage, place, "h.txt", b"hello", hold_small=True)
    if not storage.capabilities.file_visibility:
        assert done.body is None and place.read("staging/h.txt") == b"hello"
        with pytest.raises(NotImplementedError):
            storage.publish_whole(place.url("out/h.txt"), b"hello")
        return
    assert (done.staged, done.body, place.read("out/h.txt")) == (None, b"hello", None)
    published = storage.publish_whole(place.url("out/h.txt"), done.body)
    assert published.is_published and place.read("out/h.txt") == b"hello"
    big = staged_stream(storage, place, "big.bin", BIG, hold_small=True)
    assert big.body is None and place.read("out/big.bin") is None
    assert storage.publish_checked(big.staged, big.size, big.parts,
                                   place.url("out/big.bin")).is_published
    assert place.read("out/big.bin") == BIG


def test_a_file_set_is_published_once_and_publishing_it_again_is_harmless(
        place: Place) -> None:
    storage = storage_for(place.root, place.options)
    bodies = {"a": b"A" * 10, "b": BIG, "c": b""}
    files = []
    for name, body in bodies.items():
        done = staged_stream(storage, place, name, body)
        files.append(StagedFile(done.staged, place.url(f"out/{name}"), done.size, done.parts))
    assert not storage.all_published(files)
    seen: list[str] = []
    storage.publish_all(files, lambda f: seen.append(f.final))
    assert sorted(seen) == sorted(f.final for f in files)
    assert {n: place.read(f"out/{n}") for n in bodies} == bodies
    assert storage.all_published(files)
    storage.publish_all(files)  # a replay after a crash past the publish
    assert {n: place.read(f"out/{n}") for n in bodies} == bodies
    assert storage.all_published(())


def test_digest_of_reads_a_file_back(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("d"))
    storage.write_atomic(place.url("d/f"), BIG)
    assert storage.digest_of(place.url("d/f"), bytearray(MiB)).hexdigest() == \
        digest_of_bytes(BIG)


def test_ranges_of_a_split_file_are_staged_each_its_way_and_checked(place: Place) -> None:
    """Ranges staged out of order land where the storage keeps them: at their offsets
    (local disk), as parts of one upload (object stores), as part files (the rest)."""
    storage = storage_for(place.root, place.options)
    caps = storage.capabilities
    storage.prepare_folder(place.url("splits/g"))
    staged = storage.stage_split(place.url("out/big.bin"), place.url("splits/g"), "data")
    size = 5 * MiB if caps.multipart else 3 * MiB  # S3: parts of 5 MiB at least
    body = (BIG * 2)[:2 * size]
    file = CopyableFile(FileStatus("/src/big.bin", len(body), 1.0), place.url("out/big.bin"),
                        "urn", "all")
    written = {}
    for index in (1, 0):
        split = Split(index, 2, index * size, size, staged.text, place.url("splits/g"))
        src = io.BytesIO(body)
        src.seek(split.offset)
        reader = RangeReader(SourceReader(src, "/src/big.bin"), file, split)  # type: ignore[arg-type]
        written[index] = storage.write_range(staged, RangeAt(index, split.offset, size),
                                             reader, bytearray(MiB), "digest",
                                             place.url("splits/g"), "a0")
    for index, w in written.items():
        want = Digest()
        want.update(body[index * size:(index + 1) * size])
        assert w.blocks == want.blocks()
    if caps.multipart:
        parts = tuple((i + 1, written[i].etag, size) for i in (0, 1))
        assert storage.uploaded_parts(staged) == {n: (e, s) for n, e, s in parts}
        storage.publish(staged, place.url("out/big.bin"), parts)
        assert place.read("out/big.bin") == body
    elif caps.offset_writes:
        assert all(w.part == "" for w in written.values())
        assert place.read("splits/g/data") == body
    else:
        assert [w.part for w in (written[0], written[1])] == ["p0-a0", "p1-a0"]
        assert place.read("splits/g/p0-a0") == body[:size]
        assert place.read("splits/g/p1-a0") == body[size:]


def test_a_range_whose_source_ends_early_is_a_source_error(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("splits/s"))
    staged = storage.stage_split(place.url("out/short.bin"), place.url("splits/s"), "data")
    file = CopyableFile(FileStatus("/src/short.bin", 10 * MiB, 1.0),
                        place.url("out/short.bin"), "urn", "all")
    split = Split(0, 2, 0, 5 * MiB, staged.text, place.url("splits/s"))
    reader = RangeReader(SourceReader(io.BytesIO(b"x" * MiB), "/src/short.bin"),  # type: ignore[arg-type]
                         file, split)
    with pytest.raises(SourceReadError, match="short.bin"):
        storage.write_range(staged, RangeAt(0, 0, 5 * MiB), reader, bytearray(MiB), "size",
                            place.url("splits/s"), "a0")
    assert "p0-a0" not in place.names("splits/s")
    storage.discard(staged)


def test_staged_attributes_are_kept_where_the_storage_keeps_them(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("staging"))
    staged, _ = storage.stage(b"attrs", place.url("out/m"), place.url("staging/m"))
    note = storage.set_staged_attributes(place.url("staging/m"), mode=0o640,
                                         mtime=1_600_000_000_000_000_000, owner=None,
                                         group=None)
    assert note is None or "mtimes were not kept" in note
    if storage.capabilities.mtimes:
        assert storage.has_attributes(place.url("staging/m"), 0o640,
                                      1_600_000_000_000_000_000)
    storage.discard(staged)


def test_staged_text_forms_of_earlier_versions_still_parse() -> None:
    """The commit log of a previous version holds these strings: replay must read them."""
    assert parse_staged("s3-upload:abc:def:s3://b/k/x.bin") == Staged.upload(
        "abc:def", "s3://b/k/x.bin")
    assert parse_staged("s3-empty:s3://b/e") == Staged.empty("s3://b/e")
    assert parse_staged("s3-published:s3://b/p").is_published
    assert parse_staged("/tmp/st/u1-a/0-0").needs_rename
    for value in (Staged.upload("id", "s3://b/k"), Staged.empty("s3://b/e"),
                  Staged.upload("0f3a", "abfs://c/k:v/x"), Staged.empty("abfs://c/e"),
                  Staged.published("s3://b/p"), Staged.path("ftp://h:21/st/x")):
        assert parse_staged(value.text) == value
    with pytest.raises(ValueError, match="not a staged upload"):
        parse_staged("s3-upload:no-final-url")


def test_importing_pydistcp_leaves_fsspecs_ftp_class_alone() -> None:
    """A user's own ``fsspec.filesystem("ftp")`` keeps fsspec's class after any use of us."""
    code = ("import fsspec, distcp, distcp.storage.filesystems, distcp.cli, distcp.storage\n"
            "from distcp.storage.filesystems import filesystem_class\n"
            "assert filesystem_class('ftp').__module__ == 'distcp.storage.fsspec.ftp'\n"
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


def _listed_tree(place: Place) -> Storage:
    storage = storage_for(place.root, place.options)
    for rel in ("t/a.txt", "t/e/f.bin", "t/g/h/i", "t/.pydistcp/state"):
        storage.prepare_folder(place.url(rel).rsplit("/", 1)[0])
        storage.write_atomic(place.url(rel), rel.encode())
    return storage


def test_a_walk_gives_every_entry_below_a_root_by_the_backends_own_paths(
        place: Place) -> None:
    storage = _listed_tree(place)
    tree = storage.tree(place.url("t"))
    assert storage.tree(tree.url).path == tree.path  # a tree's URL leads back to it
    skipped: list[Any] = []
    walked = {p[len(tree.path.rstrip("/")) + 1:]: st
              for p, st in storage.walk(place.url("t"), "follow", skipped)}
    assert sorted(walked) == ["a.txt", "e", "e/f.bin", "g", "g/h", "g/h/i"]
    assert [rel for rel, st in walked.items() if st.is_dir] == ["e", "g", "g/h"]
    assert walked["e/f.bin"].size == len(b"t/e/f.bin")
    assert walked["e/f.bin"].url == tree.url_of(f"{tree.path.rstrip('/')}/e/f.bin")
    assert [s.reason.split(":")[0] for s in skipped] == ["not copied"]  # the state dir


def test_names_are_a_folders_files_and_subfolders_and_documents_read_back_whole(
        place: Place) -> None:
    """The state directory's reads: ``names`` of a folder (files and subfolders, sorted,
    names with spaces, ``+`` and non-ASCII letters as written), FileNotFoundError for a
    folder with nothing in it; ``read_bytes`` of each document, FileNotFoundError for
    one that is not there."""
    storage = storage_for(place.root, place.options)
    docs = {"n/b.json": b"1", "n/a b+c.json": b"22", "n/\u00fc.json": b"333",
            "n/sub/x.json": b"4444"}
    for folder in ("n", "n/sub"):
        storage.prepare_folder(place.url(folder))
    for rel, data in docs.items():
        storage.write_atomic(place.url(rel), data)
    assert storage.names(place.url("n")) == sorted(["a b+c.json", "b.json", "sub",
                                                    "\u00fc.json"])
    assert storage.names(place.url("n/sub")) == ["x.json"]
    for rel, data in docs.items():
        assert storage.read_bytes(place.url(rel), "document") == data
    with pytest.raises(FileNotFoundError):
        storage.names(place.url("none"))
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(place.url("n/none.json"), "document")


def test_an_s3_folders_names_come_page_by_page(s3: S3Server) -> None:  # noqa: F811
    """Pages of ``max-keys`` entries, files and subfolders mixed, follow S3's
    continuation token to the last one."""
    from distcp.storage.s3 import listing

    storage = storage_for("s3://dst/p", s3.options)
    for name in ("a", "b/x", "c", "d/y", "e"):
        storage.write_atomic(f"s3://dst/p/{name}", b".")
    fs = storage.fs("s3://dst/p")[0]
    assert listing.folder_names(fs, "dst", "p/", max_keys=2) == ["a", "b", "c", "d", "e"]
    assert listing.folder_names(fs, "dst", "none/", max_keys=2) == []


def test_glob_and_one_level_listings_name_folders_and_files(place: Place) -> None:
    storage = _listed_tree(place)
    tree = storage.tree(place.url("t"))
    root = tree.path.rstrip("/")
    level = storage.listing(place.url("t"))
    assert [(p.rstrip("/")[len(root) + 1:], st.is_dir) for p, st in level] == [
        (".pydistcp", True), ("a.txt", False), ("e", True), ("g", True)]
    matched = storage.glob(tree.url_of(f"{root}/[eg]"))
    assert [p.rstrip("/")[len(root) + 1:] for p, st in matched if st.is_dir] == ["e", "g"]
    with pytest.raises(FileNotFoundError):
        storage.listing(place.url("none"))


def test_a_tree_says_how_its_listing_is_cut_and_what_lies_inside_it(place: Place) -> None:
    storage = _listed_tree(place)
    tree, inner = storage.tree(place.url("t")), storage.tree(place.url("t/e"))
    assert tree.kind == {"local": "tree", "s3": "keys", "ftp": None, "azure": None,
                         "gcs": None}[place.kind]
    assert tree.holds(inner) and tree.holds(tree) and not inner.holds(tree)
    assert not tree.holds(storage.tree(place.url("t2")))
