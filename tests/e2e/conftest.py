"""End-to-end fixtures: the Spark daemons, and the suite's class-data-sharing archive
built in the background from the first end-to-end test on."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import suppress

import pytest

from tests.conftest import CDS_DIR
from tests.fixtures.processes import children
from tests.fixtures.spark_cluster import (  # noqa: F401
    spark_connect_server,
    spark_standalone,
    spark_two_workers,
)


@pytest.fixture(scope="session", autouse=True)
def _cds_archive_in_the_background() -> Iterator[None]:
    """Start the suite's CDS archive (``PYDISTCP_CDS_DIR``) building now, detached and
    niced, as a cold run's end would: the first ``engine start`` (the warm engine
    fixtures) otherwise builds it in the foreground, about 33 s in which no test runs.
    A builder still running when the session ends is stopped (its process group)."""
    from distcp.spark import cds
    from distcp.spark.jvm import check_java

    with suppress(Exception):  # no Java: the tests that need it say so
        cds.start_background_build(check_java())
    yield
    pid = cds.builder_pid(CDS_DIR)
    if pid:
        with suppress(OSError):
            os.killpg(pid, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _no_run_outlives_its_test() -> Iterator[None]:
    """A ``pydistcp`` run a test started and did not end (a check failed before the test
    stopped it: a continuous copy runs until stopped) is killed when the test ends, with
    its process group when it leads one, or it would run beside every later test (seen:
    a continuous copy of encrypted archives polled for the rest of the suite)."""
    before = _runs_of_ours()
    yield
    for pid in _runs_of_ours() - before:
        with suppress(OSError):
            if os.getpgid(pid) == pid:  # started in a session of its own
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)


def _runs_of_ours() -> set[int]:
    """This test process's children that are ``python -m distcp`` runs."""
    return {p.pid for p in children(os.getpid()) if p.argv[1:3] == [b"-m", b"distcp"]}
