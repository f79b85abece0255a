"""The real ``pydistcp copy --convert`` in a subprocess, on local Spark.

Each run costs a Spark start, so one run ingests many archives, good and bad,
and the test checks each archive's outcome.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, tree
from tests.fixtures.archives import doc_tree, flip_byte, hostile_tar, snapshot, tar_member, tar_of
from tests.fixtures.gpgkeys import CAROL, PASSPHRASE, Keyring, encrypt, keyring

pytestmark = pytest.mark.e2e

#: Workers must run this interpreter; Spark's gateway honours the variable, not the conf.
ENV = {"PYSPARK_PYTHON": sys.executable}


@pytest.fixture(scope="module")
def ring() -> Keyring:
    return keyring()


def _stored_tgz_corrupted(docs: Path, out: Path) -> Path:
    """A .tgz whose corruption zlib cannot see (stored blocks): only the CRC can."""
    import tarfile

    with tarfile.open(out, "w:gz", compresslevel=0) as tar:
        for p in sorted(docs.rglob("*")):
            tar.add(p, arcname=p.relative_to(docs).as_posix(), recursive=False)
    flip_byte(out, out.stat().st_size // 2)
    return out


def _bad_archives(ring: Keyring, docs: Path, work: Path, src: Path) -> dict[str, str]:
    """name -> the cause its error line must give."""
    encrypt(ring, hostile_tar(work / "e.tar.gz", tar_member("../../escape"), b"x"),
            src / "evil.tar.gz.gpg")
    encrypt(ring, hostile_tar(work / "l.tar.gz", tar_member("etc", b"2", "/etc")),
            src / "link.tar.gz.gpg")
    encrypt(ring, _stored_tgz_corrupted(docs, work / "c.tar.gz"), src / "crc.tar.gz.gpg")
    encrypt(ring, tar_of(docs, work / "t.tar.gz"), src / "tampered.tar.gz.gpg")
    flip_byte(src / "tampered.tar.gz.gpg", -50)
    encrypt(ring, tar_of(docs, work / "w.tar.gz"), src / "wrongkey.tar.gz.gpg", to=CAROL)
    return {"evil": "entry '../../escape' contains '..'",
            "link": "entry 'etc' is a symbolic link to '/etc'",
            "crc": "CRC check failed",
            "tampered": "integrity check (MDC) failed",
            "wrongkey": "no secret key for"}


def test_decrypt_gunzip_untar_good_and_bad_archives_in_one_run(ring: Keyring,
                                                               tmp_path: Path) -> None:
    work, src, dst = tmp_path / "work", tmp_path / "src", tmp_path / "dst"
    work.mkdir()
    src.mkdir()
    goods = {"docs-a": doc_tree(work / "a", packages=8),
             "docs-b": doc_tree(work / "b", packages=6, skip=20)}
    for name, docs in goods.items():
        encrypt(ring, tar_of(docs, work / f"{name}.tar.gz"), src / f"{name}.tar.gz.gpg")
    bad = _bad_archives(ring, goods["docs-b"], work, src)
    (work / "pass").write_text(PASSPHRASE + "\n")
    before = snapshot(tmp_path)
    args = ["copy", str(src), str(dst), "--convert", "decrypt,gunzip,untar",
            "--gpg-home", ring.home, "--gpg-passphrase-file", str(work / "pass"),
            "--summary-json", str(work / "s.json"), "--no-progress", "--master", "local[2]"]
    r = run_cli(*args, env=ENV)

    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == len(bad), r.stderr  # one line per bad archive, nothing else
    for name, cause in bad.items():
        [line] = [x for x in lines if f"{src / name}.tar.gz.gpg" in x]
        assert line.startswith("pydistcp: FAILED ") and cause in line, line
        assert not (dst / name).exists()  # nothing of it published
    for name, docs in goods.items():
        assert tree(dst / name) == tree(docs)  # bytes, modes, mtimes; directories too
    assert sorted(p.name for p in dst.iterdir()) == [".pydistcp", "docs-a", "docs-b"]
    assert all(p.startswith("dst") for p in snapshot(tmp_path) - before - {"work/s.json"})
    summary = json.loads((work / "s.json").read_text())
    assert summary["files_failed"] == len(bad) and len(summary["failures"]) == len(bad)
    assert PASSPHRASE not in r.stdout + r.stderr + (work / "s.json").read_text()
    assert not list((dst / ".pydistcp").rglob("staging/*/*"))  # staging cleaned

    again = run_cli(*args, "--dry-run", env=ENV)  # plans only: no Spark
    assert "skip   " in again.stdout and f"{dst / 'docs-a'}/  (converted copy" in again.stdout
    assert f"copy   {dst / 'evil'}/  (new)" in again.stdout


def test_gzip_encrypt_then_decrypt_gunzip_round_trip(ring: Keyring, tmp_path: Path) -> None:
    docs = doc_tree(tmp_path / "docs", packages=5, skip=40)
    sealed, back = tmp_path / "sealed", tmp_path / "back"
    r = run_cli("copy", str(docs), str(sealed), "--convert", "gzip,encrypt", "--gpg-home",
                ring.home, "--gpg-recipient", "alice@example.org", "--no-progress",
                "--master", "local[2]", env=ENV)
    assert r.returncode == 0, r.stderr
    names = sorted(p.relative_to(sealed).as_posix() for p in sealed.rglob("*") if p.is_file()
                   and ".pydistcp" not in p.parts)
    expected = sorted(p.relative_to(docs).as_posix() + ".gz.gpg" for p in docs.rglob("*")
                      if p.is_file())
    assert names == expected
    some = next(p for p in docs.rglob("*") if p.is_file() and p.stat().st_size > 100)
    cipher = (sealed / some.relative_to(docs)).with_name(some.name + ".gz.gpg").read_bytes()
    assert some.read_bytes()[:64] not in cipher

    r = run_cli("copy", str(sealed), str(back), "--convert", "decrypt,gunzip", "--gpg-home",
                ring.home, "--no-progress", "--master", "local[2]",
                env={**ENV, "PYDISTCP_GPG_PASSPHRASE": PASSPHRASE})
    assert r.returncode == 0, r.stderr
    assert tree(back) == tree(docs)
    logs = Path(os.environ.get("PYDISTCP_TEST_LOG_DIR", "/tmp/pydistcp-test-logs"))
    for log in logs.glob("*.log"):
        assert PASSPHRASE not in log.read_text(errors="replace")


@pytest.mark.parametrize("given", ["--gpg-home", "GNUPGHOME"])
def test_a_relative_gpg_home_is_the_callers_on_the_warm_engine(ring: Keyring, tmp_path: Path,
                                                              given: str) -> None:
    """The warm engine's tasks run in its own folder: a relative ``--gpg-home`` or
    ``GNUPGHOME`` must be read as the caller sees it, as on a cold run."""
    docs = doc_tree(tmp_path / "docs", packages=3)
    caller = tmp_path / "deep" / "er" / "caller"  # never the folder the engine runs in
    (caller / "src").mkdir(parents=True)
    encrypt(ring, tar_of(docs, tmp_path / "d.tar.gz"), caller / "src" / "d.tar.gz.gpg")
    (caller / "pass").write_text(PASSPHRASE + "\n")
    started = run_cli("engine", "start", env=ENV, cwd=tmp_path)  # or the one running
    assert started.returncode == 0, started.stderr
    home = os.path.relpath(ring.home, caller)
    flags = ["--gpg-home", home] if given == "--gpg-home" else []
    env = {**ENV, "PYDISTCP_ENGINE": "warm", **({"GNUPGHOME": home} if not flags else {})}
    r = run_cli("copy", "src", "dst", "--convert", "decrypt,gunzip,untar", *flags,
                "--gpg-passphrase-file", "pass", "--no-progress", "--summary-json", "s.json",
                "--copying", "spark", env=env, cwd=caller)  # on the engine, not here
    assert r.returncode == 0, r.stderr
    assert tree(caller / "dst" / "d") == tree(docs)
    log = json.loads((caller / "s.json").read_text())["log_file"]
    assert "used the warm engine" in Path(log).read_text()
