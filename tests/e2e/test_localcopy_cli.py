"""Local to local through the real CLI: kernel copies keep bytes, attributes and holes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distcp.checksum import Digest
from tests.conftest import run_cli, tree
from tests.fixtures.trees import sparse_file

pytestmark = pytest.mark.e2e

MIB = 1 << 20


def _sparse(path: Path, size: int, regions: dict[int, int]) -> None:
    """``size`` bytes with random data of the given lengths at the given offsets."""
    sparse_file(path, size, {offset: os.urandom(n) for offset, n in regions.items()})


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def _digest(path: Path) -> str:
    d = Digest()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MIB):
            d.update(chunk)
    return d.hexdigest()


def test_tree_with_sparse_and_big_file_arrives_identical_and_sparse(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "s.json"
    (src / "d").mkdir(parents=True)
    _sparse(src / "d" / "sparse.img", 64 * MIB, {3 * MIB: MIB, 40 * MIB + 512: MIB})
    if _allocated(src / "d" / "sparse.img") >= 64 * MIB:
        pytest.skip("this filesystem does not keep holes")
    (src / "big.bin").write_bytes(os.urandom(40 * MIB + 17))
    (src / "small.txt").write_text("hello\n")
    (src / "small.txt").chmod(0o640)
    (src / "d" / "sparse.img").chmod(0o600)
    for i, p in enumerate(sorted(src.rglob("*"), reverse=True)):
        os.utime(p, (1_600_000_000 + i, 1_600_000_000 + i))

    r = run_cli("copy", str(src), str(dst), "--summary-json", str(sj), "--no-progress",
                env=warm_engine)
    assert r.returncode == 0, r.stderr
    assert tree(dst) == tree(src)  # bytes, modes and mtimes
    assert _allocated(dst / "d" / "sparse.img") <= 4 * MIB  # 2 MiB of data, not 64 MiB
    assert (dst / "d" / "sparse.img").stat().st_size == 64 * MIB
    assert json.loads(sj.read_text())["files_copied"] == 3


def test_split_sparse_file_keeps_holes_and_digest(tmp_path: Path,
                                                  warm_engine: dict[str, str]) -> None:
    """Four 8 MiB ranges: one all hole, one ending in a hole (the file's last range)."""
    src, dst, sj = tmp_path / "src", tmp_path / "dst", tmp_path / "s.json"
    src.mkdir()
    _sparse(src / "disk.img", 32 * MIB, {MIB: 2 * MIB, 20 * MIB: 4096, 24 * MIB: 100})
    if _allocated(src / "disk.img") >= 32 * MIB:
        pytest.skip("this filesystem does not keep holes")

    r = run_cli("copy", str(src), str(dst), "--split-size", "8M", "--summary-json", str(sj),
                "--no-progress", env=warm_engine)
    assert r.returncode == 0, r.stderr
    out = dst / "disk.img"
    assert out.read_bytes() == (src / "disk.img").read_bytes()
    assert out.stat().st_size == 32 * MIB
    assert _allocated(out) <= 3 * MIB  # 2 MiB + two small regions + the last range's byte
    assert _digest(out) == _digest(src / "disk.img")
