"""The warm engine acts as its caller: the caller's environment and paths reach the
tasks exactly as on a cold run, and an engine started by another identity (or files
planted to look like one's own) is refused, so no caller copies with rights it has not.

These runs use the suite's shared warm engines: only the refusals need a second user
(``nobody``, through ``setpriv``), and none starts an engine of its own."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import PYDISTCP, cli_env, run_cli
from tests.fixtures.archives import doc_tree, tar_of
from tests.fixtures.gpgkeys import PASSPHRASE, encrypt, keyring
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    ACCESS_KEY,
    SECRET_KEY,
    S3Server,
    moto_server,
    s3,
)

pytestmark = pytest.mark.e2e

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root's setpriv")


def _without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


def test_the_callers_home_and_relative_aws_files_reach_the_warm_engines_tasks(
        tmp_path: Path, s3: S3Server, warm_engine: dict[str, str]) -> None:  # noqa: F811
    """A caller whose credentials are in a relative ``AWS_SHARED_CREDENTIALS_FILE`` and
    whose keyring is ``~/.gnupg`` of its own ``HOME`` (not the engine's): the warm run
    decrypts and uploads as the cold one would (its tasks found no credentials and the
    engine's ``~/.gnupg`` before)."""
    ring = keyring()
    home, caller = tmp_path / "home", tmp_path / "deep" / "caller"
    shutil.copytree(ring.home, home / ".gnupg", ignore=shutil.ignore_patterns("S.*"))
    (caller / "src").mkdir(parents=True)
    (caller / "aws").mkdir()
    (caller / "aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    docs = doc_tree(tmp_path / "docs", packages=2)
    encrypt(ring, tar_of(docs, tmp_path / "d.tar.gz"), caller / "src" / "d.tar.gz.gpg")
    env = _without(cli_env({**warm_engine, "HOME": str(home), "PYDISTCP_COPYING": "spark",
                            "AWS_SHARED_CREDENTIALS_FILE": "aws/credentials",
                            "PYDISTCP_GPG_PASSPHRASE": PASSPHRASE}),
                   "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "GNUPGHOME")
    r = subprocess.run([*PYDISTCP, "copy", "src", "s3://dst/warm", "--convert", "decrypt,gunzip",
                        "--no-progress", "--summary-json", "s.json"], cwd=caller, env=env, check=False,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    uploaded = {k: v for k, v in s3.objects("dst", "warm/").items() if ".pydistcp" not in k}
    assert uploaded == {"warm/d.tar": _gunzipped(tmp_path / "d.tar.gz")}
    log = json.loads((caller / "s.json").read_text())["log_file"]
    assert "used the warm engine" in Path(log).read_text()
    assert PASSPHRASE not in Path(log).read_text() and PASSPHRASE not in r.stderr + r.stdout


def _gunzipped(path: Path) -> bytes:
    import gzip

    return gzip.decompress(path.read_bytes())


@pytest.fixture()
def reachable() -> Iterator[None]:
    """``nobody`` must run this checkout with this environment's Python. CI runs the
    suite from a clone in a private temporary folder (0700), where ``nobody`` finds
    neither (its interpreter falls back to the base one: "No module named 'distcp'"):
    each folder on the way that others cannot search gets their search bit for the
    test, and its own mode back after it."""
    changed: list[tuple[Path, int]] = []
    project = Path(__file__).resolve().parents[2]
    for target in (Path(sys.prefix), project):
        for folder in (target, *target.parents):
            mode = stat.S_IMODE(folder.stat().st_mode)
            if not mode & stat.S_IXOTH and folder not in dict(changed):
                folder.chmod(mode | stat.S_IXOTH)
                changed.append((folder, mode))
    try:
        yield
    finally:
        for folder, mode in reversed(changed):
            folder.chmod(mode)


@pytest.fixture()
def shared(reachable: None) -> Iterator[Path]:
    """A folder ``nobody`` can reach (pytest's own are root's, 0700), with ``engines``:
    an engine directory every user may write to, as /tmp is (sticky)."""
    root = Path(tempfile.mkdtemp(prefix="pydistcp-two-users-"))
    root.chmod(0o755)
    (root / "engines").mkdir()
    (root / "engines").chmod(0o1777)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _nobody_env(shared: Path, home: Path, **extra: str) -> dict[str, str]:
    return cli_env({"PYDISTCP_ENGINE_DIR": str(shared), "HOME": str(home),
                    "PYDISTCP_COPYING": "spark",  # on the engine: a plan this small is not
                    "PYDISTCP_LOG_DIR": str(home / "logs"), "PYDISTCP_CDS": "0",
                    "PYSPARK_PYTHON": sys.executable, **extra})


def _as_nobody(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AS_NOBODY, *args], env=env, capture_output=True, text=True, check=False,
                          timeout=300, stdin=subprocess.DEVNULL, cwd="/")


def _nobodys_engine_dir(env: dict[str, str]) -> Path:
    ask = ("from distcp.spark.session import engine_settings; "
           "print(engine_settings('local[2]', {})[0].dir)")
    out = _as_nobody([sys.executable, "-c", ask], env)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())


def _roots_engine_dir() -> Path:
    out = run_cli("engine", "status", "--json", "--master", "local[2]")
    assert out.returncode == 0, out.stderr
    return Path(next(e["directory"] for e in json.loads(out.stdout)
                     if e["current"] and e["running"]))


def _copied(dst: Path) -> list[str]:
    return sorted(p.name for p in dst.iterdir() if p.name != ".pydistcp")


@needs_root
def test_an_engine_of_another_identity_is_refused_and_copies_nothing(
        shared: Path, warm_engine_local2: dict[str, str]) -> None:
    """root's engine runs; its discovery file (the server's address and token) is planted
    where ``nobody``'s engine would be, in a shared engine directory. ``nobody`` asking
    for the warm engine is refused in one line, exit 3, and never gets root's 0600 file;
    with the automatic choice it runs cold, as itself."""
    src, dst, home = shared / "src", shared / "dst", shared / "home"
    src.mkdir()
    (src / "public.txt").write_text("anyone may read this")
    (src / "secret.txt").write_text("root only")
    (src / "secret.txt").chmod(0o600)
    for d in (dst, home):
        d.mkdir()
        shutil.chown(d, "nobody", "nogroup")
    env = _nobody_env(shared / "engines", home)
    planted, roots = _nobodys_engine_dir(env), _roots_engine_dir()
    assert planted != roots
    planted.mkdir()
    shutil.copy(roots / "connect-local.json", planted / "connect-local.json")
    (planted / "connect-local.json").chmod(0o644)
    copy = [*PYDISTCP, "copy", str(src), str(dst), "--master", "local[2]", "--no-progress"]

    refused = _as_nobody([*copy, "--engine", "warm"], env)
    assert refused.returncode == 3, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith(f"pydistcp: error: refusing the warm engine in {planted}: ")
    assert "is owned by uid 0, not by you" in last and "Traceback" not in refused.stderr
    assert _copied(dst) == []

    # Even files nobody owns do not help: the server behind them runs as root.
    shutil.chown(planted, "nobody", "nogroup")
    shutil.chown(planted / "connect-local.json", "nobody", "nogroup")
    planted.chmod(0o700)
    (planted / "connect-local.json").chmod(0o600)
    refused = _as_nobody([*copy, "--engine", "warm"], env)
    assert refused.returncode == 3, refused.stderr
    assert "its server (pid " in refused.stderr and "runs as uid 0" in refused.stderr
    assert _copied(dst) == []

    # The automatic choice runs cold, as nobody, and says why in one line. (Where the
    # interpreter lives in root's home, as here, nobody's own JVM cannot even start its
    # Python workers: the files fail, as they must, and nothing arrives.)
    cold = _as_nobody([*copy, "--engine", "auto"], env)
    assert cold.returncode == 1, cold.stderr
    assert f"pydistcp: warning: not using the warm engine in {planted}" in cold.stderr
    assert "secret.txt" not in _copied(dst)
