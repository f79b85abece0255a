"""The continuous copy's stream source: a PySpark Python data source (driver).

Spark asks it for offsets and rows; ``Arrivals`` answers. The class is made per run,
with the run's configuration and the task variables (``copying.taskenv``) in its closure:
Spark pickles the class, by value, to the Python process that serves the source (which
has the JVM's environment, not ours), so the configuration and the storage options'
secrets never become data source options, which Spark shows in its plans.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Protocol

from distcp.configuration import CopyConfiguration
from distcp.copying.taskenv import applied_environment, task_environment
from distcp.planning import offsets
from distcp.planning.arrivals import SCHEMA, Arrivals


class Gone(Protocol):
    """The conducting process (``run.continuous.Client``)."""

    def gone(self) -> bool: ...


#: The format name a run's query reads: this, then the run's job id (a warm engine's
#: session keeps the source an earlier run registered under a name).
NAME = "pydistcp_arrivals"


def source_name(job_id: str) -> str:
    """The name one run's source is registered and read under."""
    return f"{NAME}_{''.join(c if c.isalnum() else '_' for c in job_id)}"


def arrivals_source(cfg: CopyConfiguration, known: frozenset[int], waiting_url: str,
                    state_url: str, name: str = NAME, client: Gone | None = None,
                    cwd: str | None = None) -> type:
    """The data source class of one continuous run (register it, then read ``name``);
    ``known``: the fingerprints of the files the catch-up's listing found; ``client``:
    the conducting process, whose end ends the query (on the warm engine it would
    outlive a client killed outright); ``cwd``: the client's folder, where the process
    serving the source resolves the run's relative paths."""
    from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

    env = task_environment()  # the Python process serving it has the JVM's, not ours

    class Reader(SimpleDataSourceStreamReader):
        def __init__(self) -> None:
            if cwd:
                os.chdir(cwd)
            self.arrivals = Arrivals(cfg, known, waiting_url, state_url)

        def initialOffset(self) -> dict[str, Any]:
            return offsets.initial()

        def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[str, ...]], dict[str, Any]]:
            if client is not None and client.gone():
                raise RuntimeError("Stopped: the continuous copy's client ended")
            try:
                with applied_environment(env):
                    batch, end = self.arrivals.read(start)
            except Exception as exc:
                self.arrivals.failed(exc)
                raise
            return iter([a.row() for a in batch]), end

        def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]
                               ) -> Iterator[tuple[str, ...]]:
            try:
                with applied_environment(env):
                    return iter([a.row() for a in self.arrivals.between(start, end)])
            except Exception as exc:
                self.arrivals.failed(exc)
                raise

        def commit(self, end: dict[str, Any]) -> None:
            """Nothing to forget: what was offered is known in memory, what was
            published is in the destination's state."""

    class ArrivalsSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> str:
            return SCHEMA

        def simpleStreamReader(self, schema: Any) -> Reader:
            return Reader()

    return ArrivalsSource
