"""IcebergTablesFinder: Apache Iceberg tables, ``--finder iceberg`` (driver).

Each SRC is a table location (a folder holding ``metadata/*.metadata.json``), mapped to
DST as ``--finder delta`` maps a Delta table (its finder, whose code this reuses); with
``--dataset-glob``, every matching folder under SRC that holds an Iceberg table. Each
is an ``IcebergDataset``: data, then rewritten manifests, lists and metadata.
"""

from __future__ import annotations

from typing import ClassVar

from distcp.datasets.base import CopyableDataset
from distcp.datasets.iceberg import IcebergDataset, is_iceberg_table
from distcp.finders.delta import DeltaTablesFinder
from distcp.storage.base import Tree


class IcebergTablesFinder(DeltaTablesFinder):
    """One IcebergDataset per source table, or per table the glob matches."""

    kind: ClassVar[str] = "Iceberg"
    article: ClassVar[str] = "an"
    marker: ClassVar[str] = "metadata/*.metadata.json"
    dataset: ClassVar[type[CopyableDataset]] = IcebergDataset

    def is_table(self, tree: Tree, path: str) -> bool:
        return is_iceberg_table(tree, path)
