"""An Iceberg table's manifests and manifest lists, read and rewritten (driver).

Reads a new snapshot's manifest list and manifests with pyiceberg's own readers, from
the source table's folder (never from the place a path names: metadata does not steer
reads), checks every path they hold against the table location (``icebergmeta``), and
writes them again with pyiceberg's writers, their paths moved to the destination
location, into the run's scratch folder: new bytes made here, which the copy then
publishes in the table's order like any other file.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil

from distcp.datasets.icebergmeta import IcebergError, moved, relative, rewritten_metadata
from distcp.datasets.icebergplan import VersionFiles

#: The Avro codec of the rewritten manifests and lists (Iceberg's default).
CODEC: Literal["deflate"] = "deflate"


@dataclass
class Added:
    """What one metadata version adds, gathered while it is rewritten."""

    version: int
    metadata: str
    data: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)

    def files(self) -> VersionFiles:
        return VersionFiles(self.version, self.metadata, tuple(self.data),
                            tuple(self.manifests), tuple(self.lists))


@dataclass
class Rewriter:
    """Rewrites one table's new metadata versions into ``scratch`` (a local folder).

    ``source``/``destination``: the locations paths are moved from and to; ``read``:
    a file of the source table by its relative path (a local path pyiceberg reads);
    ``published``: the destination's rewritten files already there, by relative path,
    with their sizes (a manifest there is not rewritten again)."""

    source_root: str
    destination: str
    scratch: str
    published: Mapping[str, int]
    io: FileIO = field(default_factory=PyArrowFileIO)
    #: The sizes of the manifests rewritten by this run, by relative path.
    lengths: dict[str, int] = field(default_factory=dict)

    def version(self, name: str, doc: dict[str, Any], new: set[int],
                builder: Added) -> None:
        """Rewrite metadata file ``name`` (``doc``) and its snapshots ``new``: their
        manifest lists and the manifests not yet at the destination; note in
        ``builder`` the files they add."""
        source = doc["location"]
        meta = parsed_metadata(doc, name)
        for snap in meta.snapshots:
            if snap.snapshot_id in new:
                self._snapshot(meta, snap.snapshot_id, snap.parent_snapshot_id,
                               snap.sequence_number, snap.manifest_list, source, builder,
                               f"snapshot {snap.snapshot_id} of metadata {name}")
        body = json.dumps(rewritten_metadata(doc, self.destination, name)).encode()
        parsed_metadata(json.loads(body), name)  # pyiceberg reads what a reader will read
        self._write(builder.metadata, body)

    def _snapshot(self, meta: TableMetadata, sid: int, parent: int | None, seq: int | None,
                  manifest_list: str, source: str, builder: Added, what: str) -> None:
        rel = relative(manifest_list, source, what)
        manifests = read_list(self.io, self.source_root, rel)
        out: list[ManifestFile] = []
        for mf in manifests:
            mrel = relative(mf.manifest_path, source, what)
            if mrel not in self.published and mrel not in self.lengths:
                self._manifest(meta, sid, mf, mrel, source, builder)
            length = self.lengths.get(mrel, self.published.get(mrel))
            moved_mf = copy.copy(mf)
            moved_mf._data = list(mf._data)
            moved_mf[0], moved_mf[1] = f"{self.destination.rstrip('/')}/{mrel}", length
            out.append(moved_mf)
        path = self._scratch(rel)
        with write_manifest_list(meta.format_version, self.io.new_output(path), sid, parent,
                                 seq, CODEC) as writer:
            writer.add_manifests(out)
        builder.lists.append(rel)

    def _manifest(self, meta: TableMetadata, sid: int, mf: ManifestFile, mrel: str,
                  source: str, builder: Added) -> None:
        entries = read_entries(self.io, self.source_root, mf, mrel)
        what = f"manifest {mrel}"
        path = self._scratch(mrel)
        spec = meta.specs()[mf.partition_spec_id]
        with write_manifest(meta.format_version, spec, meta.schema(),
                            self.io.new_output(path), sid, CODEC) as writer:
            for entry in entries:
                drel = relative(entry.data_file.file_path, source, what)
                entry.data_file[1] = moved(entry.data_file.file_path, source,
                                           self.destination, what)
                if entry.status != ManifestEntryStatus.DELETED:
                    builder.data.append(drel)
                writer.add_entry(entry)
        self.lengths[mrel] = os.path.getsize(path)
        builder.manifests.append(mrel)

    def _scratch(self, rel: str) -> str:
        path = os.path.join(self.scratch, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path):
            os.unlink(path)  # pyiceberg's output refuses to overwrite
        return path

    def _write(self, rel: str, body: bytes) -> None:
        with open(self._scratch(rel), "wb") as fh:
            fh.write(body)


def read_list(io: FileIO, root: str, rel: str) -> list[ManifestFile]:
    """The manifest list ``rel``, read from the table folder ``root`` (a local path or
    a URL pyiceberg's ``io`` reads), not from where a path in the metadata points."""
    return list(read_manifest_list(io.new_input(_under(root, rel))))


def read_entries(io: FileIO, root: str, mf: ManifestFile, rel: str) -> list[ManifestEntry]:
    """Every entry of manifest ``mf`` (deleted ones too), read from ``rel`` under the
    table folder ``root`` rather than from the path the manifest list holds."""
    local = copy.copy(mf)
    local._data = list(mf._data)
    local[0] = _under(root, rel)
    return local.fetch_manifest_entry(io, discard_deleted=False)


def _under(root: str, rel: str) -> str:
    return os.path.join(root, *rel.split("/"))


def parsed_metadata(doc: dict[str, Any], name: str) -> TableMetadata:
    """``doc`` as pyiceberg reads a metadata file."""
    try:
        return TableMetadataUtil.parse_obj(doc)
    except (ValueError, TypeError, KeyError) as exc:  # pydantic's: the table's metadata
        raise IcebergError(f"metadata {name} cannot be read: {str(exc).splitlines()[0]}"
                           ) from None

