"""End-to-end fixtures: the Spark daemons, and the suite's class-data-sharing archive
built in the background from the first end-to-end test on."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import suppress

import pytest

from tests.conftest import CDS_DIR
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
