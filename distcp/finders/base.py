"""The DatasetsFinder interface: finds the datasets of one run (driver)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset


class DatasetsFinder(ABC):
    """Turns a configuration into the datasets to copy; reads, never writes."""

    def __init__(self, cfg: CopyConfiguration) -> None:
        self.cfg = cfg

    @abstractmethod
    def find(self) -> Iterator[CopyableDataset]:
        """Yield every dataset of this run; raise PlanningError when none can be."""
