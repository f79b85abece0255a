"""A table's versions as planning saw them, for what a run reports of it (driver).

Pure values: planning fills them (``datasets.delta``), publishing's report reads them
(``run.report``: a table's version after the run and how far behind its source it is).
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
