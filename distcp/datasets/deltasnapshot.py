"""A Delta table's files at one version, what ``check`` compares a replica with (driver).

Pure, no I/O. A copy of a table moves its destination from one whole version to the
next, so the destination's newest commit names the version it claims to hold; what a
reader there needs of it is that version's live files (its data files and deletion
vectors, the log replayed up to it), its commits from 0, and the checkpoints a copy
publishes with them.
A file of that version the source no longer has (vacuumed) cannot be compared: it is
named, not guessed at.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from distcp.datasets.deltalog import LOG_DIR, Referenced, commit_name, snapshot_files
from distcp.datasets.deltaplan import summaries


@dataclass(frozen=True)
class TableSnapshot:
    """The files of version ``version`` (relative to the table root) the source has,
    and those it references that the source lacks."""

    version: int
    files: tuple[str, ...]
    missing: tuple[Referenced, ...]


def table_snapshot(present: Collection[str], version: int, commits: Mapping[int, bytes],
                   last_checkpoint: int | None = None) -> TableSnapshot:
    """Version ``version`` of the table whose source files are ``present``: ``commits``
    holds the documents of its commits 0..``version``; ``last_checkpoint`` the version
    the source's ``_last_checkpoint`` names (a later one: the file is not compared, the
    destination's may rightly be older). A malformed log raises ``LogError``."""
    live = {r.path: r for r in snapshot_files(commits)}
    log = {f"{LOG_DIR}/{commit_name(v)}" for v in commits}
    summary = {f for _name, files in summaries(present, version, last_checkpoint)
               for f in files}
    return TableSnapshot(
        version, tuple(sorted({p for p in live if p in present} | log | summary)),
        tuple(r for p, r in sorted(live.items()) if p not in present))
