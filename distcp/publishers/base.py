"""The Publisher interface: task results of one file set -> a CommitSequence (driver)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from distcp.commit.steps import CommitSequence
from distcp.model import CopyableDirectory, TaskResult
from distcp.storage import Capabilities


@dataclass(frozen=True)
class FileSetOutcome:
    """Everything the copy produced for one file set, handed to the publisher."""

    dataset_urn: str
    file_set: str
    destination_root: str
    results: tuple[TaskResult, ...]
    directories: tuple[CopyableDirectory, ...] = ()
    deletes: tuple[str, ...] = ()
    #: What the destination's storage can do (directories? offset writes?).
    capabilities: Capabilities = field(default_factory=Capabilities)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


class Publisher(ABC):
    """Plans the commit steps of a file set; extensions append their own steps
    (data-availability events, catalog partitions) to the default ones."""

    @abstractmethod
    def sequence_for(self, outcome: FileSetOutcome, staging_dirs: Sequence[str]) -> CommitSequence:
        """The steps that publish ``outcome`` (only called for publishable sets)."""
