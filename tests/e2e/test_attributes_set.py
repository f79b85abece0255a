"""--chmod and --chown: what a run writes gets the user's attributes, not the source's."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path
from typing import Any

import pytest

import distcp

pytestmark = pytest.mark.e2e


def _source(root: Path) -> Path:
    src = root / "src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "a" / "one.txt").write_bytes(b"one")
    (src / "a" / "b" / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(src / "a" / "one.txt", 0o600)
    os.chmod(src / "a" / "b" / "run.sh", 0o700)
    os.chmod(src / "a", 0o700)
    return src


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_chmod_and_chown_set_files_and_directories(spark: Any, tmp_path: Path) -> None:
    src = _source(tmp_path)
    dst = tmp_path / "dst"
    s = distcp.copy(str(src), str(dst), chmod="D750,F640,Fu+x,o=", chown="4242:4343")
    assert s.ok and s.files_copied == 2
    assert (dst / "a" / "one.txt").read_bytes() == b"one"
    assert oct(_mode(dst / "a" / "one.txt")) == oct(0o740)
    assert oct(_mode(dst / "a" / "b" / "run.sh")) == oct(0o740)
    for d in ("", "a", "a/b", "empty"):
        assert oct(_mode(dst / d)) == oct(0o750), d
    for p in ("a/one.txt", "a/b/run.sh", "a", "a/b", "empty"):
        st = (dst / p).stat()
        assert (st.st_uid, st.st_gid) == (4242, 4343), p
    # the source keeps its own
    assert _mode(src / "a" / "one.txt") == 0o600 and (src / "a").stat().st_uid == os.getuid()


def test_without_chmod_the_source_mode_is_kept(spark: Any, tmp_path: Path) -> None:
    src = _source(tmp_path)
    s = distcp.copy(str(src), str(tmp_path / "dst"))
    assert s.ok
    assert _mode(tmp_path / "dst" / "a" / "one.txt") == 0o600
    assert _mode(tmp_path / "dst" / "a") == 0o700


def test_a_bad_chmod_is_refused_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    src = _source(tmp_path)
    with pytest.raises(distcp.ConfigurationError, match=r"^--chmod 'F64a': cannot read"):
        distcp.copy(str(src), str(tmp_path / "dst"), chmod="F64a")
    assert not (tmp_path / "dst").exists()


def test_chmod_applies_to_the_modes_archive_members_carry(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with tarfile.open(src / "t.tar", "w") as tar:
        d = tarfile.TarInfo("inner")
        d.type, d.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(d)
        f = tarfile.TarInfo("inner/x.txt")
        f.size, f.mode = 3, 0o600
        tar.addfile(f, io.BytesIO(b"xyz"))
    dst = tmp_path / "dst"
    s = distcp.copy(str(src), str(dst), convert=["untar"], chmod="Fg+r,Dg+rx")
    assert s.ok, s.failures
    [x] = [p for p in dst.rglob("x.txt")]
    assert x.read_bytes() == b"xyz"
    assert oct(_mode(x)) == oct(0o640)
    assert oct(_mode(x.parent)) == oct(0o750)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_chown_gives_a_copied_link_its_owner_not_its_target(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "target.txt").write_bytes(b"t")
    os.symlink("target.txt", src / "link")
    dst = tmp_path / "dst"
    s = distcp.copy(str(src), str(dst), links="copy", chown="4242:4343")
    assert s.ok, s.failures
    assert os.readlink(dst / "link") == "target.txt"
    link = (dst / "link").lstat()
    assert (link.st_uid, link.st_gid) == (4242, 4343)
