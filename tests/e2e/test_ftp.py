"""FTP with the server in the URL, secrets from an options file, ordinary errors,
atomic state writes and kept mtimes; against the real pyftpdlib fixture.

Sizes are tiny: the machine has 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.ftp_server import (  # noqa: F401 - fixtures
    CANARY,
    LOCKED,
    PASSWORD,
    FTPServer,
    assert_no_canary,
    ftp,
    ftp_server,
    scan_tree_for_canary,
)
from tests.fixtures.processes import CmdlineWatcher

pytestmark = pytest.mark.e2e
STAMP = 1_700_000_000  # whole seconds: what FTP (MFMT, MLSD) can hold
#: Sources carry sub-second mtimes; the server keeps STAMP, and a rerun must still skip.
SOURCE_STAMP = STAMP + 0.625


def copy(src: str, dst: str, tmp: Path, name: str, *flags: str) -> dict:
    """One CLI run; its summary (if written) with returncode, stdout and stderr."""
    r = run_cli("copy", src, dst, "--no-progress", "--master", "local[2]",
                "--log-dir", str(tmp / "logs"), *flags, "--summary-json", str(tmp / name))
    summary = json.loads((tmp / name).read_text()) if (tmp / name).exists() else {}
    return {**summary, "returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr}


def make_tree(root: Path) -> dict[str, bytes]:
    tree = {"a.txt": b"alpha\n", "d/b.bin": os.urandom(5000), "d/e/c.txt": b""}
    for rel, data in tree.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        os.utime(root / rel, (SOURCE_STAMP, SOURCE_STAMP))
    return tree


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def test_copy_to_user_at_host_port_url_with_password_in_a_file_then_rerun_copies_nothing(
        ftp: FTPServer, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "src"
    tree = make_tree(src)
    secrets = ftp.options_file(tmp_path)
    dst = ftp.user_url("dir")
    with CmdlineWatcher() as watcher:
        first = copy(str(src), dst, tmp_path, "1.json", "--dst-options-file", str(secrets),
                     "--copying", "spark")  # Spark's processes and logs are checked too
        again = copy(str(src), dst, tmp_path, "2.json", "--dst-options-file", str(secrets))
    assert first["returncode"] == 0, first["stderr"]
    assert files_under(ftp.root / "dir") == tree
    # mtimes kept with MFMT, so the rerun with the default --preserve pt skips all
    assert {int((ftp.root / "dir" / rel).stat().st_mtime) for rel in tree} == {STAMP}
    assert again["returncode"] == 0, again["stderr"]
    assert (again["files_copied"], again["files_skipped"]) == (0, len(tree)), again
    assert not any("mtimes were not kept" in n for n in first["notes"])
    # the password leaks nowhere: no process's argv (pydistcp's own included), no output
    assert any(b"pydistcp" in c or b"distcp" in c for c in watcher.seen.values())
    assert len(watcher.seen) > 2, "the watcher saw no Spark process"
    assert_no_canary(*watcher.seen.values())
    assert_no_canary(*(r[k] for r in (first, again) for k in ("stdout", "stderr")))
    assert_no_canary((tmp_path / "1.json").read_text(), (tmp_path / "2.json").read_text())
    assert scan_tree_for_canary(tmp_path / "logs") > 0
    assert scan_tree_for_canary(ftp.root / "dir" / ".pydistcp") > 0
    assert CANARY in PASSWORD  # the checks above checked something

    # status reaches the same server from the URL and the options file
    status = run_cli("status", dst, "--json", "--dst-options-file", str(secrets))
    assert status.returncode == 0, status.stderr
    assert_no_canary(status.stdout, status.stderr)


def test_a_password_in_the_url_is_refused_before_anything_runs(
        ftp: FTPServer, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "src"
    make_tree(src)
    url = f"ftp://distcp:{PASSWORD}@127.0.0.1:{ftp.port}/dir"
    r = run_cli("copy", str(src), url, "--no-progress")
    assert r.returncode == 2, r.stderr
    assert "password" in r.stderr and "--dst-options-file" in r.stderr
    assert_no_canary(r.stdout, r.stderr)
    assert not (ftp.root / "dir").exists(), "a refused run wrote to the destination"
    status = run_cli("status", url)
    assert status.returncode == 2, status.stderr
    assert_no_canary(status.stdout, status.stderr)


def test_publish_into_a_path_the_server_refuses_is_an_ordinary_error_naming_it(
        ftp: FTPServer, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "src"
    make_tree(src)
    (ftp.root / LOCKED / "dst").mkdir()
    secrets = ftp.options_file(tmp_path)
    r = copy(str(src), ftp.user_url(f"{LOCKED}/dst"), tmp_path, "s.json",
             "--dst-options-file", str(secrets), "--state-dir", ftp.user_url("state"))
    assert r["returncode"] == 1, r["stderr"]
    assert "internal error" not in r["stderr"]
    assert f"/{LOCKED}/dst" in r["stderr"], r["stderr"]  # "[Errno 13] 550 ...: '/locked/dst/d'"
    assert "privileges" in r["stderr"].lower() or "permission" in r["stderr"].lower()
    assert not files_under(ftp.root / LOCKED / "dst")
    assert_no_canary(r["stdout"], r["stderr"])


_WRITER = r"""
import json, os, sys
from distcp.state import store as state
from distcp.storage.fsspec.ftp import TranslatingFTPFile

calls = [0]
upload = TranslatingFTPFile._upload_chunk

def killed_after_first_chunk(self, final=False):
    calls[0] += 1
    if calls[0] == 2:
        os._exit(137)  # like kill -9 in the middle of the document
    return upload(self, final)

TranslatingFTPFile._upload_chunk = killed_after_first_chunk
options = json.loads(os.environ["FTP_OPTIONS"])
state.write_atomic(sys.argv[1], b"[" + b"1," * 200_000 + b"2]", options)
"""


def test_a_kill_during_a_state_write_leaves_the_old_document_whole(
        ftp: FTPServer, tmp_path: Path) -> None:  # noqa: F811
    from distcp.state import store as state

    url = ftp.url("st/datasets/x.json")
    (ftp.root / "st" / "datasets").mkdir(parents=True)
    state.write_atomic(url, b'{"old": true}', ftp.options)
    env = {**os.environ, "FTP_OPTIONS": json.dumps(ftp.options)}
    r = subprocess.run([sys.executable, "-c", _WRITER, url], env=env, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 137, r.stderr
    folder = ftp.root / "st" / "datasets"
    assert json.loads((folder / "x.json").read_bytes()) == {"old": True}
    partial = [p for p in folder.iterdir() if p.name != "x.json"]
    assert partial and partial[0].stat().st_size > 0, "the kill came before any byte"

    # interrupted in-process: the temp is removed, the final name keeps the old bytes
    from distcp.storage.fsspec.ftp import TranslatingFTPFile

    def refuse(self: object, final: bool = False) -> bool:
        raise KeyboardInterrupt

    for p in partial:
        p.unlink()
    original = TranslatingFTPFile._upload_chunk
    TranslatingFTPFile._upload_chunk = refuse  # type: ignore[method-assign]
    try:
        with pytest.raises(KeyboardInterrupt):
            state.write_atomic(url, b'{"new": true}', ftp.options)
    finally:
        TranslatingFTPFile._upload_chunk = original  # type: ignore[method-assign]
    assert sorted(p.name for p in folder.iterdir()) == ["x.json"]
    state.write_atomic(url, b'{"new": true}', ftp.options)
    assert json.loads((folder / "x.json").read_bytes()) == {"new": True}
    assert sorted(p.name for p in folder.iterdir()) == ["x.json"]


def test_ftp_errors_reach_callers_as_oserrors_naming_the_path(
        ftp: FTPServer) -> None:  # noqa: F811
    from distcp.storage import filesystems as fsutil

    fs, _ = fsutil.filesystem(ftp.user_url("x"), {"password": PASSWORD})
    (ftp.root / LOCKED / "f.txt").write_bytes(b"f")
    with pytest.raises(FileNotFoundError, match="/nope/none.txt"):
        fs.cat_file("/nope/none.txt")
    with pytest.raises(PermissionError, match=f"/{LOCKED}/g.txt"):
        fs.pipe_file(f"/{LOCKED}/g.txt", b"g")
    with pytest.raises(PermissionError, match=f"/{LOCKED}/f.txt"):
        fs.mv(f"/{LOCKED}/f.txt", f"/{LOCKED}/h.txt")
    with pytest.raises(PermissionError):
        fs.set_mtime(f"/{LOCKED}/f.txt", STAMP)
    assert fsutil.to_url(fs, "/a/b") == f"ftp://distcp@127.0.0.1:{ftp.port}/a/b"


def test_delete_removes_the_files_and_folders_the_source_no_longer_has(
        ftp: FTPServer, tmp_path: Path) -> None:  # noqa: F811
    src = tmp_path / "src"
    make_tree(src)
    secrets = ftp.options_file(tmp_path)
    dst = ftp.user_url("del")
    first = copy(str(src), dst, tmp_path, "1.json", "--dst-options-file", str(secrets))
    assert first["returncode"] == 0, first["stderr"]
    (src / "a.txt").unlink()
    for rel in ("d/e/c.txt", "d/b.bin"):
        (src / rel).unlink()
    (src / "d" / "e").rmdir()
    (src / "d" / "keep.txt").write_bytes(b"k")
    r = copy(str(src), dst, tmp_path, "2.json", "--dst-options-file", str(secrets), "--delete")
    assert r["returncode"] == 0, r["stderr"]
    assert files_under(ftp.root / "del") == {"d/keep.txt": b"k"}
    assert not (ftp.root / "del" / "d" / "e").exists()
    assert r["files_deleted"] >= 3, r
