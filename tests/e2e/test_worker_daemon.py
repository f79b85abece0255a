"""A local session's Python workers come from pydistcp's daemon and import PySpark from
its installed package, with its bytecode, not from Spark's zip (``distcp.spark.daemon``):
0.5 s of each cold run's first job here."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from distcp.spark import daemon
from distcp.spark.arrow import run_pickled

pytestmark = pytest.mark.e2e


def _where(attempt: str) -> Callable[[list[Any]], Iterator[Iterator[tuple[str, str]]]]:
    def run(items: list[Any]) -> Iterator[Iterator[tuple[str, str]]]:
        import pyspark

        for _ in items:
            yield iter([(pyspark.__file__ or "", sys.argv[0])])
    return run


def test_local_workers_import_pyspark_from_its_package(spark: Any) -> None:
    import pyspark

    got = set(run_pickled(spark, [(n, None) for n in range(2)], _where))
    assert got == {(pyspark.__file__, daemon.__file__)}


def _forked(attempt: str) -> Callable[[list[Any]], Iterator[Iterator[tuple[Any, int]]]]:
    def run(items: list[Any]) -> Iterator[Iterator[tuple[Any, int]]]:
        daemon_threads = len(os.listdir(f"/proc/{os.getppid()}/task"))
        for _ in items:
            yield iter([(getattr(sys.modules["__main__"], "preloaded", None), daemon_threads)])
    return run


def test_a_cold_sessions_daemon_forks_without_preloading(spark: Any) -> None:
    # it starts inside the run's first job: importing before the fork would make that
    # job longer (the warm engine's daemon preloads: tests/e2e/test_engine.py)
    got = set(run_pickled(spark, [(n, None) for n in range(2)], _forked))
    assert got == {((), 1)}


def _sockets(attempt: str) -> Callable[[list[Any]], Iterator[Iterator[tuple[str, ...]]]]:
    def run(items: list[Any]) -> Iterator[Iterator[tuple[str, ...]]]:
        inodes = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])

        def listed(table: str, column: int) -> set[str]:
            try:
                with open(f"/proc/self/net/{table}") as f:
                    return {line.split()[column] for line in list(f)[1:] if line.split()}
            except OSError:
                return set()
        unix = inodes & listed("unix", 6)
        tcp = inodes & (listed("tcp", 9) | listed("tcp6", 9))
        for _ in items:
            yield iter([("unix" if unix else "", "tcp" if tcp else "")])
    return run


@pytest.mark.skipif(not os.path.exists("/proc/self/net/unix"), reason="Linux /proc")
def test_local_workers_talk_to_the_jvm_over_unix_sockets(spark: Any) -> None:
    # over loopback TCP each task's input waited ~40 ms for Nagle's algorithm
    # (distcp.spark.jvm.base_conf)
    assert set(run_pickled(spark, [(n, None) for n in range(2)], _sockets)) == {("unix", "")}
