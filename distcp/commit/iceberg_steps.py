"""An Iceberg table's new metadata registered in a SQL catalog, in one step (driver).

``--iceberg-catalog sqlite:///path/catalog.db`` ends each metadata version's commit
sequence with ``RegisterIcebergMetadata``: after the metadata file is published, the
catalog's table is pointed at it in one atomic change, so readers of the catalog switch
from one complete snapshot to the next. The first time the table is created by
pyiceberg's ``register_table``; later, pyiceberg's ``SqlCatalog.commit_table`` swaps
``metadata_location`` with its own compare-and-set (an ``UPDATE ... WHERE
metadata_location = <current>``), checked against the location planning saw
(``previous``), so a table someone else moved on is refused, never overwritten.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from distcp.commit.steps import CommitContext, CommitStep
from distcp.errors import PublishError
from distcp.state.bounds import DESTINATION


@dataclass(frozen=True)
class RegisterIcebergMetadata(CommitStep):
    """Point catalog table ``table`` at metadata file ``location``, swapping it from
    ``previous`` (empty: the table is new to the catalog)."""

    kind: ClassVar[str] = "iceberg-register"
    catalog: str
    table: str
    location: str
    previous: str = ""

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        yield DESTINATION, self.location

    def verify(self, ctx: CommitContext) -> bool:
        from distcp.datasets.icebergcatalog import current_location, open_catalog
        return current_location(open_catalog(self.catalog, ctx.dst_options),
                                self.table) == self.location

    def execute(self, ctx: CommitContext) -> None:
        from distcp.datasets.icebergcatalog import open_catalog, swap
        try:
            swap(open_catalog(self.catalog, ctx.dst_options), self.table, self.location,
                 self.previous)
        except ValueError as exc:
            raise PublishError(f"catalog {self.catalog}: table {self.table} not moved to "
                               f"{posixpath.basename(self.location)}: {exc}",
                               file_set=self.table) from exc
