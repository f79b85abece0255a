"""``opens_cheaply``: ``--listing auto`` lists a big local tree on Spark only when the
run's session costs little to open, since a JVM of the run's own costs more than the
driver's walk saves (and a no-op run planned by the driver never starts Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from distcp.spark import engine
from distcp.spark.session import opens_cheaply


@pytest.fixture
def no_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No session active in this process, and an engine folder of the test's own."""
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    monkeypatch.setenv(engine.DIR_ENV, str(tmp_path / "engines"))
    return tmp_path


@pytest.mark.parametrize(("master", "mode", "cheap"), [
    ("local[2]", "cold", False),
    ("local[2]", "auto", False),  # no warm engine runs (one that runs: test_engine.py)
    ("local[2]", "warm", True),   # started for the run: the user asked for it
    ("local", "cold", False),
    ("spark://127.0.0.1:7077", "cold", True),
    ("sc://127.0.0.1:15002", "auto", True),
])
def test_masters_and_engines(no_session: Path, master: str, mode: str, cheap: bool) -> None:
    assert opens_cheaply(master, {}, mode) is cheap


def test_an_active_session_is_cheap(no_session: Path, monkeypatch: pytest.MonkeyPatch
                                    ) -> None:
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: object()))
    assert opens_cheaply("local[2]", {}, "cold")
