# ruff: noqa: F811 - the fixture `place` is imported, then named by each test
"""The storage seam's read and housekeeping side, run on every backend: local disk, the
S3 server (moto), FTP, Azure (Azurite) and GCS (fake-gcs-server).

What the state directory, sources and result files ask of a ``Storage`` besides staging
and publishing (stat, open for reading and writing, names and entries of a folder,
usage, removal, setting aside, streamed and piecewise documents), each checked with
means other than the storage itself where it writes.
"""

from __future__ import annotations

import pytest

from distcp.storage import storage_for
from distcp.storage.errors import VersionChanged
from tests.e2e.test_storage_contract import Place, place  # noqa: F401 - fixture
from tests.fixtures.azure_server import azure, azurite_server  # noqa: F401 - fixtures
from tests.fixtures.ftp_server import ftp, ftp_server  # noqa: F401 - fixtures
from tests.fixtures.gcs_server import fake_gcs_server, gcs  # noqa: F401 - fixtures
from tests.fixtures.s3_server import moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _put(place: Place, rel: str, data: bytes) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url(rel.rsplit("/", 1)[0]))
    storage.write_atomic(place.url(rel), data)


def _folder(place: Place, rel: str) -> None:
    """An empty folder where the storage holds folders: a file written, then removed."""
    _put(place, f"{rel}/.made", b"")
    storage_for(place.root, place.options).remove_file(place.url(f"{rel}/.made"))


def test_stat_gives_size_and_kind_and_a_missing_entry_is_file_not_found(place: Place) -> None:
    _put(place, "s/a.bin", b"123456")
    storage = storage_for(place.root, place.options)
    st = storage.stat(place.url("s/a.bin"))
    assert (st.size, st.is_dir) == (6, False)
    assert st.mtime > 0
    with pytest.raises(FileNotFoundError):
        storage.stat(place.url("s/none.bin"))


def test_open_write_makes_its_folder_and_open_read_reads_it_back(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    with storage.open_write(place.url("deep/er/out.bin")) as out:
        out.write(b"result rows")
    assert place.read("deep/er/out.bin") == b"result rows"
    with storage.open_read(place.url("deep/er/out.bin")) as f:
        assert f.read() == b"result rows"


def test_names_and_entries_list_one_level_sorted_with_sizes(place: Place) -> None:
    _put(place, "n/b.txt", b"bb")
    _put(place, "n/a.txt", b"a")
    _put(place, "n/sub/c.txt", b"ccc")
    storage = storage_for(place.root, place.options)
    assert storage.names(place.url("n")) == ["a.txt", "b.txt", "sub"]
    sizes = {e.url.rstrip("/").rsplit("/", 1)[-1]: (e.is_dir, e.size if not e.is_dir else None)
             for e in storage.entries(place.url("n"))}
    assert sizes == {"a.txt": (False, 1), "b.txt": (False, 2), "sub": (True, None)}
    assert storage.usage(place.url("n")) == 6


def test_remove_file_takes_one_file_and_a_second_removal_is_harmless(place: Place) -> None:
    _put(place, "r/x.bin", b"x")
    _put(place, "r/y.bin", b"y")
    storage = storage_for(place.root, place.options)
    storage.remove_file(place.url("r/x.bin"))
    storage.remove_file(place.url("r/x.bin"))
    assert place.read("r/x.bin") is None
    assert place.read("r/y.bin") == b"y"


def test_remove_empty_folder_keeps_a_folder_that_holds_a_file(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    if not storage.capabilities.directories:
        pytest.skip(f"{place.kind} holds no folders of its own")
    _put(place, "e/full/f.bin", b"f")
    _folder(place, "e/empty")
    with pytest.raises(OSError):
        storage.remove_empty_folder(place.url("e/full"))
    assert place.read("e/full/f.bin") == b"f"
    storage.remove_empty_folder(place.url("e/empty"))
    assert place.names("e") == ["full"]


def test_set_aside_moves_a_file_into_a_folder_it_makes(place: Place) -> None:
    _put(place, "c/commit.json", b"{}")
    storage = storage_for(place.root, place.options)
    storage.set_aside(place.url("c/commit.json"), place.url("aside/1/commit.json"))
    assert place.read("c/commit.json") is None
    assert place.read("aside/1/commit.json") == b"{}"


def test_write_streamed_writes_every_piece_and_counts_the_bytes(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    _folder(place, "j")
    pieces = [b"row %d\n" % i for i in range(1000)]
    assert storage.write_streamed(place.url("j/journal"), iter(pieces)) == len(b"".join(pieces))
    assert place.read("j/journal") == b"".join(pieces)
    assert place.names("j") == ["journal"]


def test_pieces_without_make_folder_never_bring_a_removed_folder_back(place: Place) -> None:
    storage = storage_for(place.root, place.options)
    storage.prepare_folder(place.url("p"))
    storage.write_atomic_pieces(place.url("p/doc"), [b"a", b"b"])
    assert place.read("p/doc") == b"ab"
    if not storage.capabilities.directories:
        return  # no folder to bring back: a key is written where it is named
    with pytest.raises(FileNotFoundError):
        storage.write_atomic_pieces(place.url("gone/doc"), [b"late"], make_folder=False)
    assert "gone" not in place.names("")


def test_a_read_pinned_to_the_listed_version_refuses_an_object_replaced_since(
        place: Place) -> None:
    """``read_version`` (stores with ``conditional_reads``: S3 GET If-Match, Azure
    If-Match, GCS ifGenerationMatch) reads the version the listing saw, and raises
    VersionChanged once the object was overwritten between the listing and the read."""
    storage = storage_for(place.root, place.options)
    _put(place, "v/f.bin", b"listed")
    if place.kind in ("local", "ftp"):  # files: sources open and recheck instead
        with pytest.raises(NotImplementedError):
            storage.read_version(place.url("v/f.bin"), "any")
        return
    assert storage.capabilities.conditional_reads, f"{place.kind} has no conditional reads"
    [(_, listed)] = [e for e in storage.listing(place.url("v")) if not e[1].is_dir]
    assert listed.etag, "the listing records no version to pin a read to"
    assert storage.read_version(place.url("v/f.bin"), listed.etag) == b"listed"
    _put(place, "v/f.bin", b"overwritten")
    with pytest.raises(VersionChanged):
        storage.read_version(place.url("v/f.bin"), listed.etag)
    # a missing object fails the read too (Azurite answers a conditional GET of a missing
    # blob with 412, not 404: either way nothing is read)
    with pytest.raises((FileNotFoundError, VersionChanged)):
        storage.read_version(place.url("v/none.bin"), listed.etag)
