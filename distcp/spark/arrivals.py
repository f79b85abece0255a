"""The continuous copy's stream source: a PySpark Python data source (driver).

Spark asks it for offsets and rows; ``Arrivals`` answers. The class is made per run,
with the run's configuration and the task variables (``copying.taskenv``) in its closure:
Spark pickles the class, by value, to the Python process that serves the source (which
has the JVM's environment, not ours), so the configuration and the storage options'
secrets never become data source options, which Spark shows in its plans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from distcp.configuration import CopyConfiguration
from distcp.copying.taskenv import applied_environment, task_environment
from distcp.planning import offsets
from distcp.planning.arrivals import SCHEMA, Arrivals

#: The format name the run's query reads.
NAME = "pydistcp_arrivals"


def arrivals_source(cfg: CopyConfiguration, known: frozenset[int], waiting_url: str,
                    state_url: str) -> type:
    """The data source class of one continuous run (register it, then read ``NAME``);
    ``known``: the fingerprints of the files the catch-up's listing found."""
    from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

    env = task_environment()  # the Python process serving it has the JVM's, not ours

    class Reader(SimpleDataSourceStreamReader):
        def __init__(self) -> None:
            self.arrivals = Arrivals(cfg, known, waiting_url, state_url)

        def initialOffset(self) -> dict[str, Any]:
            return offsets.initial()

        def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[str, ...]], dict[str, Any]]:
            with applied_environment(env):
                batch, end = self.arrivals.read(start)
            return iter([a.row() for a in batch]), end

        def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]
                               ) -> Iterator[tuple[str, ...]]:
            with applied_environment(env):
                return iter([a.row() for a in self.arrivals.between(start, end)])

        def commit(self, end: dict[str, Any]) -> None:
            """Nothing to forget: what was offered is known in memory, what was
            published is in the destination's state."""

    class ArrivalsSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return NAME

        def schema(self) -> str:
            return SCHEMA

        def simpleStreamReader(self, schema: Any) -> Reader:
            return Reader()

    return ArrivalsSource
