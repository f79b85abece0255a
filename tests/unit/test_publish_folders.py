"""A final folder published by renaming its staging folder, on the local disk: only over
an empty folder made for it, only with exactly its files; everything else file by file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcp.storage import Staged, storage_for
from distcp.storage.staging import StagedFile


def _staged(root: Path, folder: str, names: dict[str, bytes]) -> list[StagedFile]:
    """``names`` staged in ``root/stage/<folder>``, bound for ``root/dst/<folder>``."""
    (root / "stage" / folder).mkdir(parents=True)
    (root / "dst" / folder).mkdir(parents=True, exist_ok=True)
    files = []
    for name, data in names.items():
        (root / "stage" / folder / name).write_bytes(data)
        files.append(StagedFile(Staged.path(str(root / "stage" / folder / name)),
                                str(root / "dst" / folder / name), len(data)))
    return files


def _publish(files: list[StagedFile]) -> list[str]:
    seen: list[str] = []
    storage = storage_for(files[0].final)
    storage.publish_all(files, lambda f: seen.append(f.final))
    assert storage.all_published(files)
    assert sorted(seen) == sorted(f.final for f in files)  # each file's crash point ran
    return seen


def test_an_empty_final_folder_takes_the_staging_folder_whole(tmp_path: Path) -> None:
    files = _staged(tmp_path, "a", {"x": b"1", "y": b"22", "z": b""})
    os.chmod(tmp_path / "dst" / "a", 0o750)
    made = (tmp_path / "stage" / "a").stat().st_ino
    _publish(files)
    final = tmp_path / "dst" / "a"
    assert final.stat().st_ino == made  # one rename of the folder, not three of files
    assert {p.name: p.read_bytes() for p in final.iterdir()} == {"x": b"1", "y": b"22", "z": b""}
    assert final.stat().st_mode & 0o777 == 0o750  # the final folder's mode stays
    assert not (tmp_path / "stage" / "a").exists()


def test_a_final_folder_that_holds_anything_gets_each_file(tmp_path: Path) -> None:
    files = _staged(tmp_path, "a", {"x": b"new", "y": b"2"})
    (tmp_path / "dst" / "a" / "old").write_bytes(b"keep")
    (tmp_path / "dst" / "a" / "x").write_bytes(b"was")
    _publish(files)
    final = tmp_path / "dst" / "a"
    assert {p.name: p.read_bytes() for p in final.iterdir()} == {
        "old": b"keep", "x": b"new", "y": b"2"}
    assert (tmp_path / "stage" / "a").is_dir()  # emptied by the renames, kept


def test_a_staging_folder_with_an_entry_not_published_is_never_renamed(tmp_path: Path) -> None:
    # a file that failed left its staged copy behind: it must not appear at the destination
    files = _staged(tmp_path, "a", {"x": b"1", "y": b"2", "failed": b"half"})
    _publish(files[:2])
    assert sorted(p.name for p in (tmp_path / "dst" / "a").iterdir()) == ["x", "y"]
    assert (tmp_path / "stage" / "a" / "failed").read_bytes() == b"half"


def test_a_folder_with_extended_attributes_keeps_its_inode(tmp_path: Path) -> None:
    # a default ACL or a security label lives in xattrs: the user's folder must stay
    files = _staged(tmp_path, "a", {"x": b"1", "y": b"2"})
    final = tmp_path / "dst" / "a"
    try:
        os.setxattr(final, "user.pydistcp-test", b"kept")
    except OSError:
        pytest.skip("no user extended attributes on this filesystem")
    inode = final.stat().st_ino
    _publish(files)
    assert final.stat().st_ino == inode
    assert os.getxattr(final, "user.pydistcp-test") == b"kept"
    assert sorted(p.name for p in final.iterdir()) == ["x", "y"]


def test_a_link_to_a_folder_is_not_replaced(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "a").symlink_to(elsewhere)
    files = _staged(tmp_path, "a", {"x": b"1", "y": b"2"})
    _publish(files)
    assert (tmp_path / "dst" / "a").is_symlink()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x", "y"]


def test_a_replay_after_the_folder_rename_finds_it_done(tmp_path: Path) -> None:
    files = _staged(tmp_path, "a", {"x": b"1", "y": b"2"}) + _staged(tmp_path, "b", {"z": b"3"})
    _publish(files)
    _publish(files)  # the staging copies are gone: each file is found published
    assert (tmp_path / "dst" / "a" / "y").read_bytes() == b"2"
    assert (tmp_path / "dst" / "b" / "z").read_bytes() == b"3"


def test_files_whose_staged_name_is_not_their_final_name_go_one_by_one(tmp_path: Path) -> None:
    (tmp_path / "stage").mkdir()
    (tmp_path / "dst" / "a").mkdir(parents=True)
    files = []
    for n in range(3):  # the flat layout: "<index>-0" in the attempt's folder
        (tmp_path / "stage" / f"{n}-0").write_bytes(b"%d" % n)
        files.append(StagedFile(Staged.path(str(tmp_path / "stage" / f"{n}-0")),
                                str(tmp_path / "dst" / "a" / f"f{n}"), 1))
    _publish(files)
    assert [(tmp_path / "dst" / "a" / f"f{n}").read_bytes() for n in range(3)] == [b"0", b"1", b"2"]
    assert (tmp_path / "stage").is_dir()
