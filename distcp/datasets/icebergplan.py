"""An Iceberg table's files to copy as file sets, and their publishing order (driver).

Pure, no I/O. The order is the consistency contract (a reader of the destination never
sees metadata whose files are missing): for each new metadata version, the data and
delete files its new snapshots add, then its rewritten manifests, then its rewritten
manifest lists, then its rewritten metadata file (the version's "commit": with
``--iceberg-catalog``, the catalog's swap to it ends that set's sequence). Publishing
follows the order and stops a table at the first set not published whole
(``distcp.commit.publish``), as for a Delta table, whose plan type this reuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from distcp.datasets.deltaplan import TablePlan, commit_set, data_set


def manifests_set(version: int) -> str:
    """The file set of the manifests metadata version ``version`` adds (rewritten)."""
    return f"version-{version}/manifests"


def lists_set(version: int) -> str:
    """The file set of the manifest lists metadata version ``version`` adds (rewritten)."""
    return f"version-{version}/manifest-lists"


@dataclass(frozen=True)
class CatalogSwap:
    """A catalog's table pointed at the metadata file set ``file_set`` publishes, from
    ``previous`` (empty: a new table): the last step of that set's commit sequence
    (``distcp.commit.iceberg_steps`` makes it; planning only says what and where)."""

    file_set: str
    catalog: str
    table: str
    location: str
    previous: str = ""


@dataclass(frozen=True)
class VersionFiles:
    """What one new metadata version adds, as paths relative to the table location."""

    version: int
    #: Its metadata file (``metadata/00003-<uuid>.metadata.json``).
    metadata: str
    data: tuple[str, ...] = ()
    manifests: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()


def plan_table(versions: Sequence[VersionFiles], after: int) -> TablePlan:
    """The plan of a table whose destination holds every metadata version up to
    ``after``: per version, its data, manifests, manifest lists, then its metadata;
    a file two versions add is copied with the first."""
    sets: list[tuple[str, tuple[str, ...]]] = []
    taken: set[str] = set()
    last = after
    for v in sorted(versions, key=lambda v: v.version):
        for name, files in ((data_set(v.version), v.data),
                            (manifests_set(v.version), v.manifests),
                            (lists_set(v.version), v.lists)):
            new = sorted(set(files) - taken)
            taken.update(new)
            if new:
                sets.append((name, tuple(new)))
        sets.append((commit_set(v.version), (v.metadata,)))
        last = v.version
    return TablePlan(tuple(sets), last)
