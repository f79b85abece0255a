"""One micro-batch of a continuous copy: one run of the pipeline over its files (driver).

The batch's rows (``planning.arrivals``) name files of the datasets the run's finder
finds; each such dataset is planned from its offered files alone (``OfferedDataset``)
and everything else is a run like any other: recovery of earlier commits, the plan
against the destination (a file a replayed batch had already published is skipped),
staging, checks, the commit log, events, the manifest. So a batch is exactly-once as
every run is, and a crash at any instant is finished by the next start.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from distcp.callbacks import Callback
from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset
from distcp.datasets.offered import OfferedDataset
from distcp.model import FileStatus
from distcp.planning.arrivals import Arrival
from distcp.planning.listing import find_datasets
from distcp.run.pipeline import Within, run_copy
from distcp.storage import filesystems as fsutil
from distcp.summary import Failure, Summary


def run_batch(cfg: CopyConfiguration, arrivals: Iterable[Arrival], spark: Any,
              callback: Callback) -> Summary:
    """Copy and publish the files ``arrivals`` offers, in the longer run's session and
    under its lock; ages and the run's clock from now."""
    by_urn: dict[str, list[tuple[str, FileStatus]]] = defaultdict(list)
    for a in arrivals:
        by_urn[a.urn].append((a.path, a.status))

    def found(c: CopyConfiguration) -> list[CopyableDataset]:
        """The datasets with files in the batch, narrowed to them; one that plans from
        what was published (a stream dataset) plans whole, from its watermarks."""
        return [ds if ds.uses_history else OfferedDataset(ds, by_urn[ds.urn])
                for ds in find_datasets(c) if ds.urn in by_urn]

    return run_copy(cfg.with_(started=time.time()), callback, Within(spark, found))


#: Figures of one run that do not add up: the continuous run sets its own.
_NOT_ADDED = frozenset({"duration_s", "requests_per_file", "job_id"})
#: Kept apart by ``Failures``: a file that failed in one batch may be published by a
#: later one.
_SETTLED = frozenset({"failures", "files_failed"})


def added(total: Summary, more: Summary) -> None:
    """``more``'s counts added to ``total``'s, its lists appended (a continuous copy's
    summary is its catch-up's and its batches' added up), failures apart
    (``Failures``)."""
    for f in fields(Summary):
        mine, theirs = getattr(total, f.name), getattr(more, f.name)
        if isinstance(mine, (bool, str)) or f.name in _NOT_ADDED | _SETTLED:
            continue
        if isinstance(mine, (int, float)):
            setattr(total, f.name, mine + theirs)
        elif isinstance(mine, list):
            mine.extend(theirs)
        elif f.name == "requests":
            for kind, n in theirs.items():
                mine[kind] = mine.get(kind, 0) + n


class Failures:
    """What failed and still stands: a source file that failed in one batch (it changed
    while it was copied, its store timed out) and was published by a later batch, which
    offered it again, is no failure of the copy."""

    def __init__(self) -> None:
        self.files: dict[str, Failure] = {}
        self.other: list[Failure] = []

    def settle(self, done: Summary, offered: Iterable[Arrival] = ()) -> None:
        """``done``'s failures recorded; the files ``offered`` to it that did not fail
        again cleared."""
        paths = {fsutil.display(a.status.url) for a in offered}
        failed = {f.path for f in done.failures if f.files}
        for path in paths - failed:
            self.files.pop(path, None)
        for f in done.failures:
            if f.files and (f.path in paths or not paths):
                self.files[f.path] = f
            else:
                self.other.append(f)

    def into(self, summary: Summary) -> None:
        summary.failures = [*self.other, *self.files.values()]
        summary.files_failed = sum(f.files for f in summary.failures)
