"""Shared fixtures: one real local Spark session per test session, and the CLI.

In-process tests call ``distcp.copy``, which reuses the active session; the
end-to-end tests run the real ``pydistcp`` command in a subprocess, which starts
its own Spark, so they are few and each checks several behaviours.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from distcp.spark.session import spark_session

    log = tmp_path_factory.mktemp("spark-log") / "spark.log"
    with spark_session("local[2]", {}, str(log)) as session:
        yield session


#: How tests start the command: the interpreter running the tests, so its packages.
PYDISTCP = [sys.executable, "-m", "distcp"]


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI run: Spark's logs out of the user's cache."""
    log_dir = os.environ.get("PYDISTCP_TEST_LOG_DIR", "/tmp/pydistcp-test-logs")
    return {**os.environ, "PYDISTCP_LOG_DIR": log_dir, **(env or {})}


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``pydistcp ARGS`` in a fresh process, as a user would."""
    return subprocess.run([*PYDISTCP, *args], capture_output=True, text=True, env=cli_env(env),
                          timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


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
