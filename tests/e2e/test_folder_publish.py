"""A first copy publishes each new folder with one rename of its staging folder.

Copy tasks stage plain files under their final names, a staging folder per final folder
(``copying.task.Folders``); the publish renames such a folder over the empty final folder
the commit made (``storage.folders``). Real local Spark, shared by the tests: both the
collected path and the thin one (files kept on the executors), and a destination folder
that already holds a file, which must get each file on its own and keep its own file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.storage import folders
from tests.conftest import tree

pytestmark = pytest.mark.e2e


def _source(root: Path, dirs: int, per_dir: int) -> None:
    for d in range(dirs):
        (root / f"d{d}").mkdir(parents=True)
        for n in range(per_dir):
            (root / f"d{d}" / f"f{n}").write_bytes(b"%d/%d\n" % (d, n))


@pytest.fixture
def renamed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The final folders published by a folder rename in this process (the driver)."""
    done: list[str] = []
    real = folders._replace_folder

    def spy(staged: str, final: str, names: set[str]) -> bool:
        ok = real(staged, final, names)
        if ok:
            done.append(Path(final).name)
        return ok

    monkeypatch.setattr(folders, "_replace_folder", spy)
    return done


@pytest.mark.parametrize("listing", ["driver", "spark"])
def test_new_folders_are_renamed_whole_and_a_full_one_gets_each_file(
        spark: Any, tmp_path: Path, renamed: list[str], listing: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    # past treeplans.HELD on the driver's walk: the thin path, results kept in files
    _source(src, 3, 400 if listing == "driver" else 4)
    (dst / "d1").mkdir(parents=True)
    (dst / "d1" / "mine").write_bytes(b"not the source's")
    s = distcp.copy(str(src), str(dst), listing=listing, progress=False)
    assert s.ok, s.failures
    # d1 was not empty; on Spark the tiny units here cut a folder's files in two, the
    # first part renamed whole when it has 2 files or more (MIN_FILES), the rest into it
    if listing == "driver":
        assert sorted(renamed) == ["d0", "d2"]
    else:
        assert renamed and set(renamed) <= {"d0", "d2"}
    first = list(renamed)
    assert (dst / "d1" / "mine").read_bytes() == b"not the source's"
    got = tree(dst)
    del got["d1/mine"]
    assert got == tree(src)  # bytes, modes and mtimes, the folders' too
    assert not [p for p in (dst / ".pydistcp" / "staging").rglob("*") if p.is_file()]

    (src / "d0" / "f0").write_bytes(b"changed")  # an update goes into a full folder
    again = distcp.copy(str(src), str(dst), listing=listing, progress=False)
    assert (again.files_copied, again.ok) == (1, True)
    assert (dst / "d0" / "f0").read_bytes() == b"changed"
    assert renamed == first


def test_small_folders_of_a_collected_plan_are_each_renamed_whole(
        spark: Any, tmp_path: Path, renamed: list[str], monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """A plan the driver holds (under ``treeplans.HELD`` files) is packed into units
    a small folder's files at a time (``packing.FOLDER_SHARE``): each of the 40 is
    published by one rename, no file by its own, as when packing file by file cut a
    folder's files between units (the first part renamed whole, the rest one by one)."""
    from distcp.storage.local import storage as local

    alone: list[str] = []
    real = local.publish_folders

    def spy(files: Any, after_each: Any, os_path: Any) -> Any:
        rest = real(files, after_each, os_path)
        alone.extend(f.final for f in rest)
        return rest

    monkeypatch.setattr(local, "publish_folders", spy)
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 40, 3)
    s = distcp.copy(str(src), str(dst), listing="driver", progress=False)
    assert s.ok, s.failures
    assert sorted(renamed) == sorted(f"d{d}" for d in range(40))
    assert alone == []
    assert tree(dst) == tree(src)
