"""The local walk: links by policy, loops, dangling links and special files reported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.storage import filesystems as fsutil
from distcp.summary import Summary
from tests.fixtures.trees import wild_tree


@pytest.fixture()
def wild(tmp_path: Path) -> Path:
    return wild_tree(tmp_path)


def _walk(root: Path, links: str) -> tuple[dict[str, bool], dict[str, tuple[str, bool]]]:
    skipped: list[fsutil.Skipped] = []
    fs, path = fsutil.filesystem(str(root), {})
    seen = {fsutil.relpath(p, path): st.is_dir for p, st in fsutil.walk(fs, path, links, skipped)}
    return seen, {fsutil.relpath(s.path, path): (s.reason, s.failure) for s in skipped}


def test_skip_reports_every_link_and_special_file(wild: Path) -> None:
    seen, skipped = _walk(wild, "skip")
    assert seen == {"a": False, "d": True, "d/b": False}
    assert skipped == {
        "lin": ("symbolic link to a (--links skip)", False),
        "lout": ("symbolic link to ../outside (--links skip)", False),
        "dang": ("symbolic link to nowhere (--links skip)", False),
        "d/loop": ("symbolic link to .. (--links skip)", False),
        "fifo": ("special file (fifo)", False),
        "sock": ("special file (socket)", False),
    }


def test_follow_copies_targets_and_reports_loops_and_dangling_links(wild: Path) -> None:
    seen, skipped = _walk(wild, "follow")
    assert seen == {"a": False, "d": True, "d/b": False, "lin": False, "lout": False}
    assert skipped == {
        "dang": ("dangling symbolic link to nowhere", True),
        "d/loop": ("symbolic link loop (points to a directory above it)", True),
        "fifo": ("special file (fifo)", False),
        "sock": ("special file (socket)", False),
    }


def test_follow_enters_a_linked_directory_that_is_no_ancestor(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "x").write_bytes(b"x")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "lib").symlink_to("../lib")
    (tmp_path / "src" / "lib2").symlink_to("../lib")
    seen, skipped = _walk(tmp_path / "src", "follow")
    assert seen == {"lib": True, "lib/x": False, "lib2": True, "lib2/x": False}
    assert skipped == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_unreadable_directory_is_a_reported_failure(tmp_path: Path) -> None:
    (tmp_path / "locked").mkdir(mode=0)
    (tmp_path / "ok").write_bytes(b"ok")
    try:
        seen, skipped = _walk(tmp_path, "skip")
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert seen == {"ok": False}
    assert skipped == {"locked": ("unreadable directory (Permission denied)", True)}


def test_summary_counts_failures_but_not_policy_skips() -> None:
    s = Summary()
    s.add_skipped([fsutil.Skipped("/s/l", "symbolic link to a (--links skip)"),
                   fsutil.Skipped("/s/d", "dangling symbolic link to x", True)])
    assert [(f.path, f.error) for f in s.entries_skipped] == [
        ("/s/l", "symbolic link to a (--links skip)")]
    assert [f.error for f in s.failures] == ["/s/d: dangling symbolic link to x"]
    assert s.files_failed == 1 and not s.ok
    assert "  /s/l: symbolic link to a (--links skip)" in s.render().splitlines()


def test_links_setting_is_checked() -> None:
    assert CopyConfiguration(("a",), "b").links == "skip"
    assert CopyConfiguration(("a",), "b", links="copy").links == "copy"
    with pytest.raises(ConfigurationError,
                       match="--links must be skip, follow or copy, not 'hard'"):
        CopyConfiguration(("a",), "b", links="hard")


def test_copy_lists_every_link_as_itself_and_never_descends(wild: Path) -> None:
    (wild / "dl").symlink_to("d")
    skipped: list[fsutil.Skipped] = []
    fs, path = fsutil.filesystem(str(wild), {})
    found = {fsutil.relpath(p, path): st for p, st in fsutil.walk(fs, path, "copy", skipped)}
    assert {rel: st.link_target for rel, st in found.items()} == {
        "a": None, "d": None, "d/b": None, "d/loop": "..", "dang": "nowhere", "dl": "d",
        "lin": "a", "lout": "../outside"}
    lout = os.lstat(wild / "lout")
    assert (found["lout"].size, found["lout"].mtime_ns) == (len("../outside"), lout.st_mtime_ns)
    assert not found["dl"].is_dir and found["dl"].mode is None
    assert {s.reason for s in skipped} == {"special file (fifo)", "special file (socket)"}


def test_entry_size_is_a_links_own_size(wild: Path) -> None:
    fs, _ = fsutil.filesystem(str(wild), {})
    assert fsutil.entry_size(fs, str(wild / "lout")) == len("../outside")
    assert fsutil.entry_size(fs, str(wild / "a")) == len(b"inside")
    assert fsutil.holds_symlinks(fs)
    assert not fsutil.holds_symlinks(fsutil.filesystem("s3://bucket/x", {})[0])
    assert not fsutil.holds_symlinks(fsutil.filesystem("memory://x", {})[0])
