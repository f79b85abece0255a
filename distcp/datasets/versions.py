"""A table's versions as planning and ``check`` saw them, for what is reported of it (driver).

Pure values: planning fills them (``datasets.delta``), publishing's report reads them
(``run.report``: a table's version after the run and how far behind its source it is);
a check's listing of a table says where the destination is against the source
(``TableLag``), which the check's report prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class TableVersions:
    """A table's versions as planning saw them: the destination's, the source's newest,
    and the version each commit's file set makes readable; what the run published of
    them says where the destination is after it (``versions behind``, in the metrics)."""

    destination: int
    source: int
    commits: tuple[tuple[str, int], ...] = ()

    def after(self, published: Iterable[str]) -> int:
        """The destination's version once the file sets ``published`` are."""
        made = dict(self.commits)
        return max((made[s] for s in published if s in made), default=self.destination)


@dataclass(frozen=True)
class TableLag:
    """How far a destination table is behind its source, as ``check`` says it.

    Not a difference: a copy moves a table on by whole versions, each readable, and the
    next copy brings the rest; what a check compares is the version the destination
    holds, so a replica that is complete but behind passes (exit 0) and this line says
    by how much."""

    table: str
    #: What the destination holds and the source's newest, in the format's words
    #: (``version 2``; ``snapshot 41 (metadata version 2)``).
    destination: str
    source: str
    behind: int
    #: What ``behind`` counts: ``versions`` (Delta commits), ``snapshots`` (Iceberg).
    unit: str

    def line(self) -> str:
        return (f"table {self.table}: the destination holds {self.destination}, the "
                f"source is at {self.source}: {self.behind} {self.unit} behind (compared "
                "at the destination's)")
