"""Catalog registration: each published partition added to a Spark/Hive table (driver).

``--catalog-table DB.TABLE`` appends one ``RegisterPartitions`` step, last, to every
file set's commit sequence: after the data, its manifest, watermark and event, so a
metastore that is down never holds the data back. The step issues
``ALTER TABLE ... ADD IF NOT EXISTS PARTITION (...) LOCATION '...'`` in batches
(never ``MSCK REPAIR``, which lists the whole table), through the run's Spark
session, opened lazily (a replay at startup with nothing to copy opens it only when
a registration is pending). A failure raises ``CatalogError``: the data stays
published, the sequence stays in the commit log and the next run registers again.

Partition values come from the directory segments of each published file's path
below its dataset's destination root: ``key=value`` segments (Hive's layout) by
default, or a pattern (``--catalog-partitions 'dt={0}-{1}-{2}/hr={3}'``) whose
``{N}`` is the N-th directory segment (0-based), for ``yyyy/MM/dd/HH`` folders.
The planning here is pure; only the step talks to the catalog.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, ClassVar
from urllib.parse import unquote

from distcp.commit.steps import CommitContext, CommitSequence, CommitStep
from distcp.errors import CatalogError
from distcp.state.bounds import DESTINATION

#: Partitions per ALTER TABLE statement: one metastore call adds them all, and a
#: statement stays far below the metastore's limits on a long backlog.
BATCH = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_VALUE = re.compile(r"([^=/]+)=([^/]*)")

#: (column, value) pairs, in the table's partition column order, and the location URL.
Partition = tuple[tuple[tuple[str, str], ...], str]


@dataclass(frozen=True)
class CatalogTarget:
    """Where and how published partitions are registered (validated at configuration)."""

    table: str
    #: ``col={0}-{1}/col2={2}``; empty: ``key=value`` directory segments.
    pattern: str = ""


def table_problem(table: str | None) -> str | None:
    """Why ``--catalog-table`` is not ``DB.TABLE`` (or ``TABLE``), or None."""
    if table is None or all(_NAME.fullmatch(p) for p in table.split(".")) and \
            table.count(".") <= 1:
        return None
    return f"--catalog-table: not DB.TABLE: {table!r}"


def pattern_problem(pattern: str | None) -> str | None:
    """Why ``--catalog-partitions`` is not ``col=template/...`` with ``{N}`` fields, or None."""
    if not pattern:
        return None
    where = f"--catalog-partitions {pattern!r}"
    fields = 0
    for part in pattern.split("/"):
        column, eq, template = part.partition("=")
        if not eq or not _NAME.fullmatch(column):
            return f"{where}: each '/' part must be COLUMN=TEMPLATE, not {part!r}"
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError as exc:
            return f"{where}: {exc}"
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if not name.isdigit() or spec or conversion:
                return f"{where}: fields are directory numbers like {{0}}, not {{{name}}}"
            fields += 1
    return None if fields else f"{where}: no {{N}} field names a directory"


def partitions_of(target: CatalogTarget, root: str, destinations: Iterable[str]
                  ) -> tuple[Partition, ...]:
    """The distinct partitions holding ``destinations`` (files below ``root``), sorted;
    files in no partition (a ``_SUCCESS`` at the root, too few folders) are left out."""
    base = root.rstrip("/")
    found: dict[tuple[tuple[str, str], ...], str] = {}
    for dest in destinations:
        if not dest.startswith(base + "/"):
            continue
        folders = dest[len(base) + 1:].split("/")[:-1]
        got = _by_pattern(target.pattern, folders) if target.pattern else _by_names(folders)
        if got is not None:
            spec, depth = got
            found.setdefault(spec, "/".join([base, *folders[:depth]]))
    return tuple(sorted(found.items()))


def _by_names(folders: list[str]) -> tuple[tuple[tuple[str, str], ...], int] | None:
    """``key=value`` folders (values %-escaped as Hive writes them), down to the last one."""
    spec, depth = [], 0
    for n, folder in enumerate(folders):
        m = _KEY_VALUE.fullmatch(folder)
        if m:
            spec.append((unquote(m.group(1)), unquote(m.group(2))))
            depth = n + 1
    return (tuple(spec), depth) if spec else None


def _by_pattern(pattern: str, folders: list[str]
                ) -> tuple[tuple[tuple[str, str], ...], int] | None:
    """Each ``col=template`` filled from the folders its ``{N}`` name; None when a
    file lies less deep than the pattern needs."""
    depth = 1 + max(int(name) for part in pattern.split("/")
                    for _, name, _, _ in string.Formatter().parse(part) if name is not None)
    if len(folders) < depth:
        return None
    spec = []
    for part in pattern.split("/"):
        column, _, template = part.partition("=")
        spec.append((column, template.format(*folders)))
    return tuple(spec), depth


def add_partitions_sql(table: str, partitions: Iterable[Partition], batch: int = BATCH
                       ) -> list[str]:
    """``ALTER TABLE t ADD IF NOT EXISTS PARTITION (...) LOCATION '...' ...``, ``batch``
    partitions a statement."""
    clauses = [f"PARTITION ({', '.join(f'{_ident(c)} = {_literal(v)}' for c, v in spec)}) "
               f"LOCATION {_literal(hadoop_url(location))}" for spec, location in partitions]
    return [f"ALTER TABLE {_quoted(table)} ADD IF NOT EXISTS " + " ".join(clauses[i:i + batch])
            for i in range(0, len(clauses), batch)]


def hadoop_url(url: str) -> str:
    """The location as Hadoop filesystems name it: ``s3://`` is ``s3a://`` outside EMR."""
    return "s3a://" + url[len("s3://"):] if url.startswith("s3://") else url


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quoted(table: str) -> str:
    return ".".join(_ident(p) for p in table.split("."))


def _ident(name: str) -> str:
    """A back-quoted identifier; a back quote inside is doubled (Spark SQL's escape),
    so a partition column named by a directory of the data stays one identifier."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class RegisterPartitions(CommitStep):
    """Add the file set's partitions to the catalog table (``IF NOT EXISTS``: idempotent).

    Done when ``SHOW PARTITIONS`` already lists every one (one metastore call)."""

    kind: ClassVar[str] = "catalog-partitions"
    table: str
    partitions: tuple[Partition, ...]

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        """The partitions' locations (the table and values are quoted, never run)."""
        return ((DESTINATION, location) for _, location in self.partitions)

    def verify(self, ctx: CommitContext) -> bool:
        rows = self._sql(ctx, f"SHOW PARTITIONS {_quoted(self.table)}").collect()
        listed = {_spec_of(row[0]) for row in rows}
        return all(tuple(spec) in listed for spec, _ in self.partitions)

    def execute(self, ctx: CommitContext) -> None:
        for statement in add_partitions_sql(self.table, self.partitions):
            self._sql(ctx, statement)

    def _sql(self, ctx: CommitContext, statement: str) -> Any:
        if ctx.spark is None:
            raise CatalogError(f"catalog table {self.table}: no Spark session to register "
                               f"{len(self.partitions)} partition(s) with (the next "
                               "'pydistcp copy' registers them)", table=self.table)
        try:
            with _quiet_query_errors():
                return ctx.spark().sql(statement)
        except CatalogError:
            raise
        except Exception as exc:  # noqa: BLE001 - Spark and the metastore raise many types
            raise CatalogError(f"catalog table {self.table}: {_first_line(exc)}",
                               table=self.table) from None


def registered_in(steps: Iterable[CommitStep]) -> int:
    """How many partitions the catalog steps of a finished sequence registered."""
    return sum(len(s.partitions) for s in steps if isinstance(s, RegisterPartitions))


def registration_only(sequence: CommitSequence) -> bool:
    """Whether all that is left of ``sequence`` is its registration: an earlier run
    published the data and could not register it (``registrations_left``)."""
    return bool(sequence.steps) and all(isinstance(s, RegisterPartitions)
                                        for s in sequence.steps)


def registrations_left(sequence: CommitSequence) -> CommitSequence:
    """What remains of a sequence whose registration failed: that step alone (it is the
    last, so every step before it is done). Kept in the commit log in place of the whole
    sequence, a replay neither re-checks the data nor counts its files as recovered."""
    return replace(sequence, steps=tuple(s for s in sequence.steps
                                         if isinstance(s, RegisterPartitions)))


def _spec_of(listed: str) -> tuple[tuple[str, str], ...]:
    """``SHOW PARTITIONS``' ``k=v/k2=v2`` (values %-escaped) as (column, value) pairs."""
    return tuple((unquote(k), unquote(v)) for k, _, v in
                 (part.partition("=") for part in listed.split("/")))


@contextmanager
def _quiet_query_errors() -> Iterator[None]:
    """PySpark logs a failed SQL statement's error, with its whole Java stack, to stderr
    (its ``SQLQueryContextLogger``) before it raises it; the step reports the failure in
    one line of its own (``CatalogError``), so that log stays silent meanwhile."""
    from pyspark.logger import PySparkLogger

    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__
