"""The CopyableDataset interface: one table, topic or directory tree to copy (driver and executor)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from distcp.configuration import CopyConfiguration
from distcp.datasets.icebergplan import CatalogSwap
from distcp.datasets.partitions import StreamMarks, Watermarks
from distcp.datasets.versions import TableLag, TableVersions
from distcp.errors import ConfigurationError
from distcp.model import CopyableDirectory, CopyableFile, FileStatus
from distcp.storage.base import Tree
from distcp.storage.filesystems import Skipped

#: The entries of a dataset when they come from elsewhere than a walk of its root (a
#: list the user gave, a listing on Spark): ``(root tree, skipped) -> (path,
#: FileStatus)`` pairs (paths as the tree's storage spells them), appending what is not
#: copied, and why, to ``skipped``.
EntrySource = Callable[[Tree, list[Skipped]], Iterable[tuple[str, FileStatus]]]


@dataclass(frozen=True)
class DatasetListing:
    """What a dataset wants at the destination, before diffing against it."""

    files: tuple[CopyableFile, ...]
    directories: tuple[CopyableDirectory, ...]
    #: Entries of the source not copied (links by policy, special files, ...), with why.
    skipped: tuple[Skipped, ...] = ()
    #: Files found at the origin before include/exclude (lets the run tell an --include
    #: that selects nothing from a source that is empty); 0 when a dataset does not count.
    seen: int = 0
    #: A stream dataset's watermarks and partitions (None for other datasets): publishing
    #: moves the watermarks with the file sets (distcp.commit.state_steps).
    marks: StreamMarks | None = None
    #: The file sets in the order they must be published, each only once every set
    #: before it is published whole (a Delta table's versions); empty: no order.
    order: tuple[str, ...] = ()
    #: The file sets whose publishing is announced by an event (None: every set): a
    #: table announces each version's commit, not its data, which no reader sees before.
    announced: frozenset[str] | None = None
    #: A table's versions (None for other datasets): the run reports how far behind
    #: its source the destination table is.
    versions: TableVersions | None = None
    #: Catalog registrations that end a file set's sequence, after its data and state
    #: (an Iceberg table's catalog swap to the metadata that set publishes).
    registrations: tuple[CatalogSwap, ...] = ()
    #: A check's listing only: destination URLs that must exist but whose bytes are not
    #: the source's by design (an Iceberg table's rewritten metadata, manifest list and
    #: manifests); ``check`` reports each present (``=``) or missing (``-``).
    expected: tuple[str, ...] = ()
    #: A check's listing of a table only: how far the destination is behind its source.
    lag: TableLag | None = None


@dataclass(frozen=True)
class DatasetHistory:
    """What earlier runs published of a dataset, for a dataset that plans from it."""

    watermarks: Watermarks | None = None
    #: Destination URLs the manifest lists.
    published: frozenset[str] = frozenset()


class CopyableDataset(ABC):
    """A set of related files with one URN, copied and published together.

    ``root`` is the origin URL, ``destination_root`` where it lands. A dataset
    whose origin is a single file has ``destination_root`` equal to that file's
    destination and ``is_file`` true; it cannot be mirrored with ``--delete``.
    """

    def __init__(self, urn: str, root: str, destination_root: str, *, is_file: bool = False):
        self.urn = urn
        self.root = root
        self.destination_root = destination_root
        self.is_file = is_file

    @abstractmethod
    def listing(self, cfg: CopyConfiguration) -> DatasetListing:
        """The CopyableFiles and directories of this dataset (reads the origin only)."""

    #: Whether the listing is everything the dataset wants at its destination, so that
    #: ``--delete`` may remove the rest and ``check`` reports the rest as only in DST (a
    #: table lists only its new versions' files).
    lists_everything: ClassVar[bool] = True

    #: Whether ``with_history`` uses what earlier runs published (reading the manifest
    #: costs a read of its segments: only datasets that need it ask).
    uses_history: ClassVar[bool] = False

    def with_history(self, history: DatasetHistory) -> CopyableDataset:
        """This dataset planned with what earlier runs published (a stream dataset's
        lookback and late files); most datasets do not need it."""
        return self

    def targets(self, cfg: CopyConfiguration, files: Sequence[CopyableFile]
                ) -> dict[str, FileStatus] | None:
        """What the destination holds of ``files``, when the dataset can tell without
        listing its destination root (a continuous copy's batch: a few new files of a
        big tree); None: the destination root is listed."""
        return None

    def listing_from(self, cfg: CopyConfiguration, entries: EntrySource) -> DatasetListing:
        """The dataset's listing made of ``entries`` instead of its own listing (files
        named by ``--files-from``); a dataset that cannot take them says so."""
        raise ConfigurationError(f"{type(self).__name__} ({self.urn}) cannot copy from a list "
                                 "of files (--files-from, --files-from-manifest)")

    def check_listing(self, cfg: CopyConfiguration) -> DatasetListing | None:
        """What ``pydistcp check`` compares the destination with, when it is not what a
        copy would list (a table's listing holds only its new versions: its check
        compares the version the destination holds); None: the copy's listing."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.urn!r} -> {self.destination_root!r})"
