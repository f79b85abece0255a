"""What the copy produced for one file set, and what publishing asks of a publisher (driver).

The commit stage publishes file sets by the sequences a publisher plans (``distcp.publishers``,
a plugin family): the value handed over and the one method asked for live here, below
both, so the commit stage needs nothing of the plugin folder but a name to look up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

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


class SequencePlanner(Protocol):
    """What publishing asks of a publisher (``distcp.publishers.base.Publisher``)."""

    def sequence_for(self, outcome: FileSetOutcome, staging_dirs: Sequence[str]
                     ) -> CommitSequence:
        """The steps that publish ``outcome`` (only called for publishable sets)."""
        ...
