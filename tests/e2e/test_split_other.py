"""FTP as the "other" filesystem: plain copies both ways, and split files as part
files joined by Spark tasks, resumed after a killed task.

A real pyftpdlib server in its own process (tests/fixtures/ftp_server.py),
reached through fsspec's built-in ``ftp://`` with --src-option/--dst-option.
Sizes are small (a 24 MiB file in 6 ranges of 4 MiB): the machine has 2 cores.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distcp.checksum import Digest
from distcp.state.store import StateStore
from tests.conftest import PYDISTCP, one_error_line, run_cli
from tests.fixtures.ftp_server import (  # noqa: F401 - fixtures
    CANARY,
    FTPServer,
    assert_no_canary,
    ftp,
    ftp_server,
    scan_tree_for_canary,
)
from tests.fixtures.processes import CmdlineWatcher

pytestmark = pytest.mark.e2e
MiB = 1 << 20
BIG = 24 * MiB
RANGE = 4 * MiB


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A directory with one 24 MiB file and one small one; the big file's digest."""
    src = tmp_path_factory.mktemp("split-ftp") / "src"
    src.mkdir()
    data = os.urandom(BIG)
    (src / "big.bin").write_bytes(data)
    (src / "small.txt").write_bytes(b"small\n")
    digest = Digest()
    digest.update(data)
    return src, digest.hexdigest()


def copy(src: str, dst: str, ftp: FTPServer, tmp: Path, name: str, *flags: str,
         side: str = "--dst-option", env: dict[str, str] | None = None) -> dict:
    """One CLI run; its summary (if written) with returncode, stdout and stderr."""
    r = run_cli("copy", src, dst, "--no-progress", "--master", "local[2]",
                "--log-dir", str(tmp / "logs"), *ftp.cli_options(side), *flags,
                "--summary-json", str(tmp / name), env=env)
    summary = json.loads((tmp / name).read_text()) if (tmp / name).exists() else {}
    return {**summary, "returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr}


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def manifest_digest(state_root: Path, name: str) -> str:
    """The digest the dataset state recorded for the published file ``name``."""
    [state] = StateStore(str(state_root), {}).all()
    return next(entry[2] for dest, entry in state.manifest.items() if dest.endswith(name))


def test_tree_goes_local_to_ftp_and_back_identical_and_the_password_leaks_nowhere(
        ftp: FTPServer, tmp_path: Path) -> None:  # noqa: F811
    src, back = tmp_path / "src", tmp_path / "back"
    tree = {"a.bin": os.urandom(300_000), "empty.txt": b"", "d/e/f.txt": b"hello\n",
            "d/g.txt": b"x" * 70_000}
    for rel, data in tree.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (src / "emptydir").mkdir()
    os.chmod(src / "a.bin", 0o640)  # a mode FTP cannot set: must not fail the copy
    watcher = CmdlineWatcher(skip="\0".join(PYDISTCP).encode())
    watcher.start()
    try:
        up = copy(str(src), ftp.url("tree"), ftp, tmp_path, "up.json", "--copying", "spark")
        assert up["returncode"] == 0, up["stderr"]
        assert files_under(ftp.root / "tree") == tree
        assert (ftp.root / "tree" / "emptydir").is_dir()
        assert not list((ftp.root / "tree" / ".pydistcp" / "staging").rglob("*")), \
            "staging left behind"
        down = copy(ftp.url("tree"), str(back), ftp, tmp_path, "down.json",
                    side="--src-option")
        assert down["returncode"] == 0, down["stderr"]
        assert files_under(back) == tree
    finally:
        watcher.stop.set()
        watcher.join()
    # FTP listings give mtimes (MLSD "modify", whole seconds, UTC): kept on the way back,
    # so a rerun finds every file up to date.
    for rel in tree:
        assert int((back / rel).stat().st_mtime) == int((ftp.root / "tree" / rel).stat().st_mtime)
    again = copy(ftp.url("tree"), str(back), ftp, tmp_path, "again.json", "--dry-run",
                 side="--src-option")
    assert {a["action"] for a in again["plan"]} == {"skip"}, again["plan"]
    assert_no_canary(*(r[k] for r in (up, down, again) for k in ("stdout", "stderr")))
    for name in ("up.json", "down.json", "again.json"):
        assert_no_canary((tmp_path / name).read_text())
    assert scan_tree_for_canary(tmp_path / "logs") > 0
    assert scan_tree_for_canary(ftp.root / "tree" / ".pydistcp") > 0
    assert scan_tree_for_canary(back / ".pydistcp") > 0
    assert len(watcher.seen) > 2, "the watcher saw no Spark process"
    assert_no_canary(*watcher.seen.values())
    assert CANARY in ftp.options["password"]  # the check above checked something


def test_split_file_is_joined_on_ftp_unseen_before_publish_with_the_whole_file_digest(
        ftp: FTPServer, tmp_path: Path, source: tuple[Path, str]) -> None:  # noqa: F811
    src, digest = source
    # FTP keeps whole-second mtimes only (and a joined file gets none): --preserve p, so
    # the rerun after the crash finds the published file up to date instead of copying it.
    split = ["--split-size", "4M", "--preserve", "p"]
    crashed = copy(str(src), ftp.url("split"), ftp, tmp_path, "1.json", *split,
                   env={"DISTCP_CRASH_AT": "before_step:1"})
    assert crashed["returncode"] == 137, crashed["stderr"]
    dst = ftp.root / "split"
    assert not (dst / "big.bin").exists(), "a reader saw the file before it was published"
    staged = list((dst / ".pydistcp" / "splits").glob("*/data"))
    assert [p.stat().st_size for p in staged] == [BIG], "the join did not stage the file"
    assert not list((dst / ".pydistcp" / "splits").glob("*/p*")), "part files left behind"
    assert (src / "big.bin").read_bytes() == staged[0].read_bytes()

    replayed = copy(str(src), ftp.url("split"), ftp, tmp_path, "2.json", *split)
    assert replayed["returncode"] == 0, replayed["stderr"]
    assert (dst / "big.bin").read_bytes() == (src / "big.bin").read_bytes()
    assert (dst / "small.txt").read_bytes() == b"small\n"
    assert not list((dst / ".pydistcp" / "splits").glob("*")), "split staging left behind"

    whole = copy(str(src), ftp.url("whole"), ftp, tmp_path, "3.json", "--preserve", "p")
    assert whole["returncode"] == 0, whole["stderr"]
    assert manifest_digest(dst / ".pydistcp", "big.bin") == digest
    assert manifest_digest(ftp.root / "whole" / ".pydistcp", "big.bin") == digest


def test_killed_range_task_then_rerun_sends_only_the_missing_ranges_to_ftp(
        ftp: FTPServer, tmp_path: Path, source: tuple[Path, str]) -> None:  # noqa: F811
    src, digest = source
    dst = ftp.root / "big"
    first = copy(str(src), ftp.url("big"), ftp, tmp_path, "1.json", "--split-size", "4M",
                 env={"DISTCP_CRASH_AT": "after_range:2"})
    records = list((dst / ".pydistcp" / "splits").glob("*/r*.json"))
    parts = list((dst / ".pydistcp" / "splits").glob("*/p*"))
    assert first["returncode"] == 1, first["stderr"]
    assert 2 <= len(records) < BIG // RANGE, "the kill should leave some ranges done, some not"
    assert len(parts) >= len(records)
    assert not (dst / "big.bin").exists()

    second = copy(str(src), ftp.url("big"), ftp, tmp_path, "2.json", "--split-size", "4M")
    assert second["returncode"] == 0, second["stderr"]
    assert second["ranges_resumed"] == len(records)
    assert second["bytes_resumed"] == len(records) * RANGE
    assert second["bytes_read"] == BIG - len(records) * RANGE + len(b"small\n")
    assert (dst / "big.bin").read_bytes() == (src / "big.bin").read_bytes()
    assert not list((dst / ".pydistcp" / "splits").glob("*")), "split staging left behind"
    assert manifest_digest(dst / ".pydistcp", "big.bin") == digest


def test_split_size_copied_by_this_process_is_refused_for_ftp_before_anything(
        ftp: FTPServer, tmp_path: Path, source: tuple[Path, str]) -> None:  # noqa: F811
    """``--copying driver`` splits only between local trees (ranges written at their
    offsets); FTP's parts need a join task, which only Spark runs."""
    src, _ = source
    r = run_cli("copy", str(src), ftp.url("here"), "--no-progress", "--copying", "driver",
                "--split-size", "4M", *ftp.cli_options("--dst-option"))
    assert r.returncode == 2, r.stderr
    assert one_error_line(r.stderr) == (
        "pydistcp: error: --copying driver splits files (--split-size) only between local "
        "trees, whose ranges are written at their offsets: elsewhere ranges are Spark tasks; "
        "use --copying auto or spark")
    assert not (ftp.root / "here").exists(), "a refused run wrote to the destination"
    assert_no_canary(r.stdout, r.stderr)


def test_split_size_with_a_converter_is_refused_on_ftp(
        ftp: FTPServer, tmp_path: Path, source: tuple[Path, str]) -> None:  # noqa: F811
    src, _ = source
    r = run_cli("copy", str(src), ftp.url("conv"), "--no-progress", "--convert", "gzip",
                "--split-size", "4M", *ftp.cli_options("--dst-option"))
    assert r.returncode == 2, r.stderr
    assert "--split-size cannot be used with --convert" in r.stderr
    assert not (ftp.root / "conv").exists(), "a refused run wrote to the destination"
    assert_no_canary(r.stdout, r.stderr)
