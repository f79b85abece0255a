"""A Delta table's files to copy as file sets, and their publishing order (driver).

Pure, no I/O. The order is the consistency contract (a reader of the destination never
sees a commit whose files are missing): for each new version, its data files (one file
set), then its commit file (one file set); after the last version, sidecars,
checkpoints and version checksums, then ``_last_checkpoint``. Publishing follows ``TablePlan.order``
and stops a table at the first set that is not published whole
(``distcp.commit.publish``), so a commit is never published before its data, nor
before the commit before it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from distcp.datasets.deltalog import (
    LAST_CHECKPOINT,
    LOG_DIR,
    SIDECARS,
    checkpoint_version,
    commit_name,
    referenced,
)

#: The file sets after the versions' own, in publishing order.
SIDECAR_SET = "checkpoints/sidecars"
CHECKPOINT_SET = "checkpoints"
LAST_CHECKPOINT_SET = "checkpoints/last"


def data_set(version: int) -> str:
    """The file set of the files that version ``version`` adds."""
    return f"version-{version}/data"


#: How a version's commit set's name ends.
COMMIT_SUFFIX = "/commit"


def commit_set(version: int) -> str:
    """The file set of version ``version``'s commit file: published once its data is."""
    return f"version-{version}{COMMIT_SUFFIX}"


@dataclass(frozen=True)
class Vacuumed:
    """A file a commit references that the source no longer has."""

    version: int
    path: str
    kind: str


@dataclass(frozen=True)
class TablePlan:
    """The file sets to publish, in order, each with its files (relative paths)."""

    sets: tuple[tuple[str, tuple[str, ...]], ...]
    #: The newest version this plan publishes (the destination's own when none).
    last: int
    #: The first referenced file the source lacks: the table stops before its version.
    vacuumed: Vacuumed | None = None

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(name for name, _files in self.sets)

    @property
    def announced(self) -> frozenset[str]:
        """The sets whose publishing is announced: each version's commit, when the
        version becomes readable (one event per version, the version in its name)."""
        return frozenset(name for name, _files in self.sets if name.endswith(COMMIT_SUFFIX))


def plan_table(present: Collection[str], after: int, commits: Mapping[int, bytes],
               last_checkpoint: int | None = None) -> TablePlan:
    """The plan of a table whose destination holds every version up to ``after``.

    ``present``: the source's files (relative to the table root); ``commits``: the
    documents of the newer commits, by version, contiguous from ``after + 1``;
    ``last_checkpoint``: the version the source's ``_last_checkpoint`` names (None: no
    such file, or unreadable). A malformed or hostile log raises ``LogError``.
    """
    sets: list[tuple[str, tuple[str, ...]]] = []
    last = after
    taken: set[str] = set()
    for version in sorted(commits):
        refs = referenced(commits[version], version)
        missing = next((r for r in refs if r.path not in present), None)
        if missing is not None:
            return TablePlan(tuple(sets) + summaries(present, last, last_checkpoint), last,
                             Vacuumed(version, missing.path, missing.kind))
        data = sorted({r.path for r in refs} - taken)
        taken.update(data)
        if data:
            sets.append((data_set(version), tuple(data)))
        sets.append((commit_set(version), (f"{LOG_DIR}/{commit_name(version)}",)))
        last = version
    return TablePlan(tuple(sets) + summaries(present, last, last_checkpoint), last)


def summaries(present: Collection[str], last: int, last_checkpoint: int | None
               ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Sidecars, then checkpoints and checksums of versions up to ``last``, then
    ``_last_checkpoint`` when it names one of them: what only summarises commits
    already published (a reader may use a checkpoint instead of its commits)."""
    if last < 0:
        return ()
    log = LOG_DIR + "/"
    sidecars = sorted(p for p in present if p.startswith(f"{log}{SIDECARS}/"))
    checkpoints = sorted(p for p in present if p.startswith(log) and "/" not in p[len(log):]
                         and (v := checkpoint_version(p[len(log):])) is not None and v <= last)
    out: list[tuple[str, tuple[str, ...]]] = []
    if sidecars and checkpoints:
        out.append((SIDECAR_SET, tuple(sidecars)))
    if checkpoints:
        out.append((CHECKPOINT_SET, tuple(checkpoints)))
    pointer = f"{log}{LAST_CHECKPOINT}"
    if pointer in present and last_checkpoint is not None and last_checkpoint <= last:
        out.append((LAST_CHECKPOINT_SET, (pointer,)))
    return tuple(out)
