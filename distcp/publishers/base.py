"""The Publisher interface: task results of one file set -> a CommitSequence (driver)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from distcp.commit.outcome import FileSetOutcome
from distcp.commit.steps import CommitSequence

__all__ = ["FileSetOutcome", "Publisher"]


class Publisher(ABC):
    """Plans the commit steps of a file set; extensions append their own steps
    (data-availability events, catalog partitions) to the default ones. Publishing asks
    only ``sequence_for`` of it (``distcp.commit.outcome.SequencePlanner``)."""

    @abstractmethod
    def sequence_for(self, outcome: FileSetOutcome, staging_dirs: Sequence[str]) -> CommitSequence:
        """The steps that publish ``outcome`` (only called for publishable sets)."""
