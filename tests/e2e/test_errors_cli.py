"""Bad input: one line naming the path and the cause, non-zero exit, nothing damaged."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli, tree

pytestmark = pytest.mark.e2e

#: Root ignores file modes; dropping these capabilities makes permissions bite again.
NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
          "--bounding-set=-dac_override,-dac_read_search", "--"]


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    return lines[-1]


def test_missing_source(tmp_path: Path) -> None:
    r = run_cli("copy", str(tmp_path / "nope"), str(tmp_path / "out"))
    assert r.returncode == 2
    assert one_error_line(r.stderr) == f"pydistcp: error: source not found: {tmp_path / 'nope'}"
    assert not (tmp_path / "out").exists()


def test_destination_inside_source(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    r = run_cli("copy", str(tmp_path / "src"), str(tmp_path / "src" / "copy"))
    assert r.returncode == 2
    assert "is inside source" in one_error_line(r.stderr)


def test_bad_flags(tmp_path: Path) -> None:
    r = run_cli("copy", str(tmp_path), str(tmp_path / "o"), "--preserve", "xq")
    assert r.returncode == 2 and "--preserve takes letters" in one_error_line(r.stderr)
    r = run_cli("copy", str(tmp_path), str(tmp_path / "o"), "--conf", "novalue")
    assert r.returncode == 2 and "--conf takes key=value" in one_error_line(r.stderr)
    r = run_cli("copy", str(tmp_path), str(tmp_path / "o"), "--bogus")
    assert r.returncode == 2 and "No such option '--bogus'" in r.stderr


def test_no_java_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    env = {"PATH": os.path.dirname(shutil.which("python3") or "/usr/bin"), "JAVA_HOME": ""}
    r = run_cli("copy", str(src), str(tmp_path / "o"), "--copying", "spark", env=env)
    assert r.returncode == 3
    assert one_error_line(r.stderr).startswith("pydistcp: error: pydistcp runs on Spark, which needs Java 17+")
    assert not (tmp_path / "o" / "f").exists()
    small = run_cli("copy", str(src), str(tmp_path / "o"), env=env)  # copied here: no Java
    assert small.returncode == 0, small.stderr
    assert (tmp_path / "o" / "f").read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root's setpriv")
def test_unreadable_file_is_named_and_the_rest_of_a_plain_copy_arrives(tmp_path: Path) -> None:
    """A plain tree copy publishes file by file, as rclone does (datasets of --dataset-glob
    stay whole or nothing: tests/e2e/test_policies_recovery.py)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    (src / "ok.txt").write_text("fine")
    (src / "sub" / "ok2.txt").write_text("fine too")
    (src / "secret.txt").write_text("no")
    (src / "secret.txt").chmod(0)
    r = _run_without_dac(src, dst)
    assert r.returncode == 1, r.stderr
    assert f"pydistcp: FAILED cannot read {src / 'secret.txt'}: permission denied" in r.stderr
    assert "Traceback" not in r.stderr
    assert {k: v[0] for k, v in tree(dst).items()} == {
        "ok.txt": b"fine", "sub": None, "sub/ok2.txt": b"fine too"}
    assert "copied 2 files" in r.stdout and "failed 1" in r.stdout


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root's setpriv")
def test_unreadable_directory_is_named_and_the_rest_arrives(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "locked").mkdir(parents=True)
    (src / "locked" / "x").write_text("x")
    (src / "ok.txt").write_text("fine")
    (src / "locked").chmod(0)
    try:
        r = _run_without_dac(src, dst)
    finally:
        (src / "locked").chmod(0o755)
    assert r.returncode == 1, r.stderr
    assert (f"pydistcp: FAILED {src / 'locked'}: unreadable directory (Permission denied)"
            in r.stderr)
    assert {k: v[0] for k, v in tree(dst).items()} == {"ok.txt": b"fine"}


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root's setpriv")
def test_unwritable_destination_damages_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "new.txt").write_text("new")
    dst.mkdir()
    (dst / "published.txt").write_text("before")
    before = tree(dst)
    dst.chmod(0o555)
    try:
        r = _run_without_dac(src, dst)
    finally:
        dst.chmod(0o755)
    assert r.returncode == 3, r.stderr  # the environment (permissions), not the command line
    assert one_error_line(r.stderr) == (f"pydistcp: error: cannot write to destination {dst}: "
                                        "Permission denied")
    assert tree(dst) == before


def _run_without_dac(src: Path, dst: Path):  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    env = {**os.environ, "PYDISTCP_LOG_DIR": str(dst.parent / "logs")}
    return subprocess.run([*NO_DAC, sys.executable, "-m", "distcp", "copy", str(src), str(dst),
                           "--no-progress"], capture_output=True, text=True, env=env,
                          timeout=300, stdin=subprocess.DEVNULL)
