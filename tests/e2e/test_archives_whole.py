"""Archives fail whole, before anything of them is published (issue 38, point 3).

A member whose name the destination cannot hold is found while staging, not at publish
after the archive's other members appeared; two archives that would expand into one
folder are refused at planning, and two that share a member under
``--expand-into-parent`` are failed by name, never merged with one member lost; a failed
archive never blocks the reruns that follow. The real CLI on the suite's warm engine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli, tree
from tests.fixtures.archives import tgz_of

pytestmark = pytest.mark.e2e

#: A name component longer than the 255 bytes local filesystems hold.
LONG = "x" * 300 + ".txt"


def _copy(src: Path, dst: Path, env: dict[str, str], *more: str):  # type: ignore[no-untyped-def]
    return run_cli("copy", str(src), str(dst), "--convert", "untar", "--no-progress",
                   "--summary-json", str(dst.parent / f"{dst.name}.json"), *more, env=env)


def _failures(dst: Path) -> list[dict[str, str]]:
    return json.loads((dst.parent / f"{dst.name}.json").read_text())["failures"]  # type: ignore[no-any-return]


def test_a_member_the_destination_cannot_hold_fails_its_archive_before_any_member_appears(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    tgz_of(src / "long.tar.gz", [("ok1.txt", b"one"), (f"d/{LONG}", b"two"), ("zz.txt", b"3")])
    tgz_of(src / "good.tar.gz", [("g.txt", b"good")])
    r = _copy(src, dst, warm_engine)
    assert r.returncode == 1, r.stderr
    assert tree(dst) == {"good": (None, 0o755, tree(dst)["good"][2]),
                         "good/g.txt": (b"good", 0o644, 1_700_000_000_000_000)}
    [failure] = _failures(dst)
    assert failure["path"] == str(src / "long.tar.gz")
    assert "a name in its path is 304 bytes, and the destination holds at most 255 per " \
           "name; rename it at the source" in failure["error"]
    assert "pending commits: 0" in run_cli("status", str(dst), env=warm_engine).stdout
    # the archive fixed at the source: the next run publishes it whole, nothing blocks it
    tgz_of(src / "long.tar.gz", [("ok1.txt", b"one"), ("d/short.txt", b"two"), ("zz.txt", b"3")])
    r = _copy(src, dst, warm_engine)
    assert r.returncode == 0, r.stderr
    assert {k: v[0] for k, v in tree(dst).items() if v[0] is not None} == {
        "good/g.txt": b"good", "long/ok1.txt": b"one", "long/d/short.txt": b"two",
        "long/zz.txt": b"3"}


def test_two_archives_expanding_into_one_folder_are_refused_at_planning(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    tgz_of(src / "x.tar.gz", [("a.txt", b"from tar.gz")])
    tgz_of(src / "x.tgz", [("a.txt", b"from tgz")])
    r = _copy(src, dst, warm_engine)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"pydistcp: error: two archives expand into the one folder {dst}/x/: "
        f"{src}/x.tar.gz and {src}/x.tgz; rename one at the source")
    assert tree(dst) == {}


def test_archives_sharing_a_member_in_their_parent_both_fail_by_name_and_others_publish(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """``--expand-into-parent``: two archives may share the folder, not a file."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    tgz_of(src / "p.tar.gz", [("same.txt", b"p"), ("p-only.txt", b"p2")])
    tgz_of(src / "q.tar.gz", [("same.txt", b"q")])
    tgz_of(src / "r.tar.gz", [("r.txt", b"r")])
    r = _copy(src, dst, warm_engine, "--expand-into-parent")
    assert r.returncode == 1, r.stderr
    assert {k: v[0] for k, v in tree(dst).items()} == {"r.txt": b"r"}
    errors = {f["path"]: f["error"] for f in _failures(dst)}
    assert errors == {
        str(src / "p.tar.gz"): f"cannot publish {src}/p.tar.gz: {src}/q.tar.gz also writes "
        f"{dst}/same.txt, and neither is published; rename one at the source, or expand the "
        "archive into its own folder",
        str(src / "q.tar.gz"): f"cannot publish {src}/q.tar.gz: {src}/p.tar.gz also writes "
        f"{dst}/same.txt, and neither is published; rename one at the source, or expand the "
        "archive into its own folder"}


def test_a_failed_archive_sharing_its_parent_publishes_on_the_rerun(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    """``--expand-into-parent``: p failed beside q and r published; q removed at the
    source, p must publish whole on the next run, however close its mtime is to r's."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    tgz_of(src / "p.tar.gz", [("same.txt", b"p"), ("p-only.txt", b"p2")])
    tgz_of(src / "q.tar.gz", [("same.txt", b"q")])
    tgz_of(src / "r.tar.gz", [("r.txt", b"r")])
    for name in ("p", "q", "r"):
        os.utime(src / f"{name}.tar.gz", (1_700_000_000, 1_700_000_000))
    assert _copy(src, dst, warm_engine, "--expand-into-parent").returncode == 1
    (src / "q.tar.gz").unlink()
    r = _copy(src, dst, warm_engine, "--expand-into-parent")
    assert r.returncode == 0, r.stderr
    assert {k: v[0] for k, v in tree(dst).items()} == {
        "r.txt": b"r", "same.txt": b"p", "p-only.txt": b"p2"}
