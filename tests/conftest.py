"""Shared fixtures: one real local Spark session per test session, and the CLI.

In-process tests call ``distcp.copy``, which reuses the active session; the
end-to-end tests run the real ``pydistcp`` command in a subprocess, which starts
its own Spark, so they are few and each checks several behaviours.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Write pydistcp's bytecode once. Where the environment sets PYTHONDONTWRITEBYTECODE
    (this project's CI does), every CLI run, Spark daemon and Python worker the suite
    starts would compile the package from source again: 0.15 s a process here, for
    hundreds of processes. An installed pydistcp has its bytecode, so runs are measured
    as users get them."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "distcp"), quiet=1)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from distcp.spark.session import spark_session

    log = tmp_path_factory.mktemp("spark-log") / "spark.log"
    with spark_session("local[2]", {}, str(log)) as session:
        yield session


#: How tests start the command: the interpreter running the tests, so its packages.
PYDISTCP = [sys.executable, "-m", "distcp"]


#: The suite's warm engines live in a directory of their own, never the user's cache;
#: CLI runs are cold unless a test asks for ``--engine warm`` (tests/e2e/test_engine.py).
def _own_dir(variable: str, prefix: str) -> str:
    """The folder ``variable`` names, made here (and removed when the suite ends) unless
    the environment names one: a suite's archive is 150 MiB, and /tmp filled with them."""
    if variable not in os.environ:
        os.environ[variable] = tempfile.mkdtemp(prefix=prefix)
        _OWN_DIRS.append(os.environ[variable])
    return os.environ[variable]


#: The folders ``_own_dir`` made, removed at the suite's end (``_stop_warm_engines``).
_OWN_DIRS: list[str] = []
ENGINE_DIR = _own_dir("PYDISTCP_ENGINE_DIR", "pydistcp-test-engines-")
#: Every process the tests start runs cold unless it says otherwise: a test that drops
#: privileges or kills a run's process group must not land on a warm engine that
#: another test left running (its tasks would run as the engine, outside the group).
os.environ.setdefault("PYDISTCP_ENGINE", "cold")
#: Likewise the class-data-sharing archive: built once per test session, in the background.
CDS_DIR = _own_dir("PYDISTCP_CDS_DIR", "pydistcp-test-cds-")
#: Its first builder is announced on the run's stderr, whichever test's run starts it:
#: only tests/e2e/test_cds.py, with a folder of its own, sees the announcement.
Path(CDS_DIR, "build.log").touch()


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI run: Spark's logs out of the user's cache, the engine
    cold unless the test says otherwise."""
    log_dir = os.environ.get("PYDISTCP_TEST_LOG_DIR", "/tmp/pydistcp-test-logs")
    return {**os.environ, "PYDISTCP_LOG_DIR": log_dir, "PYDISTCP_ENGINE": "cold",
            **(env or {})}


@pytest.fixture(scope="session", autouse=True)
def _stop_warm_engines() -> Iterator[None]:
    """Whatever warm engine a test started is stopped when the suite ends, and the
    folders the suite made for engines and the archive are removed."""
    yield
    subprocess.run([*PYDISTCP, "engine", "stop", "--all"], env=cli_env(), timeout=120,
                   capture_output=True, check=False)
    for folder in _OWN_DIRS:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def warm_engine() -> dict[str, str]:
    """The environment of a CLI run on the suite's one warm engine (the one
    ``--engine warm`` runs elsewhere in the suite share), started here once so that no
    test's output carries its announcement. For the runs whose point is not the cold
    start: a run that is killed, drops privileges, sets ``--conf`` or another master, reads
    its own Spark log or checks its own JVM stays cold. Stopped with the others when the
    suite ends."""
    return _warm("local[*]")


@pytest.fixture(scope="session")
def warm_engine_local2() -> dict[str, str]:
    """As ``warm_engine``, for the runs that say ``--master local[2]`` (an engine serves
    one master: a run with another would start an engine of its own)."""
    return _warm("local[2]")


def _warm(master: str) -> dict[str, str]:
    env = {"PYDISTCP_ENGINE": "warm"}
    started = run_cli("engine", "start", "--master", master, "--idle-timeout", "2h", env=env)
    assert started.returncode == 0, started.stderr
    return env


def one_error_line(stderr: str) -> str:
    """The only non-blank stderr line, checked to be one of ours."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert lines[0].startswith("pydistcp: error: "), stderr
    return lines[0]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``pydistcp ARGS`` in a fresh process, as a user would."""
    return subprocess.run([*PYDISTCP, *args], capture_output=True, text=True, env=cli_env(env),
                          timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def traced_cli(*args: str, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    """``run_cli`` under ``python -X importtime`` (``imported_by`` reads its stderr)."""
    return subprocess.run([*PYDISTCP[:1], "-X", "importtime", *PYDISTCP[1:], *args],
                          capture_output=True, text=True, env=cli_env(env), timeout=300,
                          stdin=subprocess.DEVNULL, check=False)


def imported_by(out: subprocess.CompletedProcess[str]) -> set[str]:
    """The modules a ``traced_cli`` run imported."""
    return {line.split("|")[2].strip() for line in out.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2}


def reported(out: str) -> dict[str, str]:
    """``pydistcp check``'s lines of differences: path -> symbol."""
    return {line[2:].split("  (")[0]: line[0] for line in out.splitlines()
            if line[:2] in ("- ", "+ ", "* ", "! ")}


def announced(dst: Path) -> list[str]:
    """The file sets announced (OpenLineage COMPLETE events kept in the state), in order."""
    lines = (dst / ".pydistcp" / "events" / "events.jsonl").read_text().splitlines()
    facets = [json.loads(line)["run"]["facets"] for line in lines]
    return [f["pydistcp_copy"]["file_set"] for f in facets if "pydistcp_copy" in f]


def tree(root: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """relative path -> (bytes or None for dirs, mode, mtime_ns // 1000) below ``root``,
    ignoring the state directory."""
    out: dict[str, tuple[bytes | None, int, int]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] == ".pydistcp":
            continue
        st = path.lstat()
        data = None if path.is_dir() else path.read_bytes()
        out[rel] = (data, st.st_mode & 0o7777, st.st_mtime_ns // 1000)
    return out
