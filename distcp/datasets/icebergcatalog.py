"""pyiceberg's SQL catalog, asked for a table's metadata location and swapping it (driver).

Only pyiceberg's own API touches the catalog: ``register_table`` for a new table and
``commit_table`` for a swap, whose ``UPDATE ... WHERE metadata_location = <current>``
is the compare-and-set. ``commit_table`` writes the metadata file it computes from
updates; here the metadata file is the one the run already published, so the staged
table it commits is that file (``_Swapping``), and nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.io import FileIO
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import StagedTable, Table
from pyiceberg.table.metadata import TableMetadata

#: The name the tables are kept under in the catalog (pyiceberg's default catalog name:
#: a reader opens ``SqlCatalog("default", uri=...)`` or ``load_catalog("default", ...)``).
CATALOG_NAME = "default"
_CATALOGS: dict[tuple[str, tuple[tuple[str, str], ...]], SqlCatalog] = {}


class _Swapping(SqlCatalog):
    """A SqlCatalog whose commit moves a table to a metadata file that already exists."""

    target: tuple[str, str] | None = None  # (location, expected current location)

    def _update_and_stage_table(self, current_table: Table | None, table_identifier: Any,
                                requirements: Any, updates: Any) -> StagedTable:
        assert self.target is not None
        location, previous = self.target
        now = current_table.metadata_location if current_table else ""
        if now != previous:
            raise CommitFailedException(f"the catalog's table is at {now or 'nothing'}, "
                                        f"not {previous or 'nothing'} as planned")
        io = self._load_file_io(location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        return StagedTable(identifier=table_identifier, metadata=metadata,
                           metadata_location=location, io=io, catalog=self)

    @staticmethod
    def _write_metadata(metadata: TableMetadata, io: FileIO, metadata_path: str) -> None:
        """The metadata file is the published one: nothing to write."""


def file_io_properties(options: Mapping[str, Any]) -> dict[str, str]:
    """pyiceberg's FileIO properties for a destination's fsspec storage options (s3fs's
    key, secret, token, endpoint and region), so the catalog reads metadata where the
    run wrote it; other stores' options are not mapped (their environment is used)."""
    kwargs = options.get("client_kwargs") or {}
    pairs = {"s3.access-key-id": options.get("key"),
             "s3.secret-access-key": options.get("secret"),
             "s3.session-token": options.get("token"),
             "s3.endpoint": options.get("endpoint_url") or kwargs.get("endpoint_url"),
             "s3.region": options.get("region_name") or kwargs.get("region_name")}
    return {k: str(v) for k, v in pairs.items() if v}


def open_catalog(uri: str, options: Mapping[str, Any] | None = None) -> SqlCatalog:
    """The catalog at ``uri``, reading the destination with ``options`` (its fsspec
    storage options), opened once per process."""
    props = file_io_properties(options or {})
    key = (uri, tuple(sorted(props.items())))
    if key not in _CATALOGS:
        _CATALOGS[key] = _Swapping(CATALOG_NAME, uri=uri, **props)
    return _CATALOGS[key]


def current_location(cat: SqlCatalog, table: str) -> str:
    """The metadata file the catalog's ``table`` is at; empty when there is no table."""
    try:
        return cat.load_table(table).metadata_location
    except NoSuchTableError:
        return ""


def swap(cat: SqlCatalog, table: str, location: str, previous: str) -> None:
    """Point ``table`` at ``location`` if it is at ``previous`` (empty: no table yet,
    then registered), in one change; a table elsewhere raises (a ValueError)."""
    try:
        if not previous:
            cat.create_namespace_if_not_exists(table.rsplit(".", 1)[0])
            cat.register_table(table, location)
            return
        assert isinstance(cat, _Swapping)
        cat.target = (location, previous)
        try:
            cat.commit_table(cat.load_table(table), (), ())
        finally:
            cat.target = None
    except (CommitFailedException, NoSuchTableError, TableAlreadyExistsError) as exc:
        raise ValueError(str(exc)) from exc
