"""``status``/``recover``/``cleanup`` find the state root a ``copy`` uses (one rule)."""

from __future__ import annotations

from pathlib import Path

from distcp.commit.status import resolve_state_root
from distcp.configuration import CopyConfiguration
from distcp.planning.listing import find_datasets, state_root


def _copy_root(src: Path, dst: Path) -> str:
    cfg = CopyConfiguration.build([str(src)], str(dst))
    return state_root(cfg, find_datasets(cfg))


def test_a_tree_copy_and_status_use_dst_dot_pydistcp(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a").write_bytes(b"a")
    (tmp_path / "dst").mkdir()
    root = _copy_root(tmp_path / "src", tmp_path / "dst")
    assert root.removeprefix("file://") == str(tmp_path / "dst" / ".pydistcp")
    assert resolve_state_root(str(tmp_path / "dst"), None, {}) == root
    assert resolve_state_root(str(tmp_path / "dst") + "/", None, {}) == root


def test_status_of_a_copied_single_file_finds_the_state_beside_it(tmp_path: Path) -> None:
    (tmp_path / "f.bin").write_bytes(b"x")
    (tmp_path / "out").mkdir()
    root = _copy_root(tmp_path / "f.bin", tmp_path / "out" / "g.bin")
    assert root.removeprefix("file://") == str(tmp_path / "out" / ".pydistcp")
    (tmp_path / "out" / "g.bin").write_bytes(b"x")  # as the copy leaves it
    assert resolve_state_root(str(tmp_path / "out" / "g.bin"), None, {}) == root


def test_state_dir_wins_for_both(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    cfg = CopyConfiguration.build([str(tmp_path / "src")], str(tmp_path / "dst"),
                                  state_dir=str(tmp_path / "st") + "/")
    assert state_root(cfg, []) == resolve_state_root(None, str(tmp_path / "st"), {})
