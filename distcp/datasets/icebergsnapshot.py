"""An Iceberg table's files at one metadata version, what ``check`` compares a replica with (driver).

A copy moves a destination table from one whole metadata version to the next, so the
version the destination holds names the snapshot a reader there reads: that version's
current snapshot. Its files are of two kinds. Data and delete files are copied byte for
byte, so the destination's must equal the source's. The metadata file, the snapshot's
manifest list and its manifests are rewritten to point at the destination location
(``icebergfiles``), so their bytes differ from the source's by design (and the Avro
files carry random sync markers): what a check can ask of them is that the
destination has them. They are read with the copy's own readers, from the source
table's folder: metadata does not steer reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntryStatus

from distcp.datasets.icebergfiles import parsed_metadata, read_entries, read_list
from distcp.datasets.icebergmeta import relative


@dataclass(frozen=True)
class IcebergSnapshot:
    """The files a reader of metadata version ``version`` opens, relative to the table
    location: ``copied`` (data and delete files, the source's bytes) and ``rewritten``
    (the metadata file, manifest list and manifests, the destination's own bytes)."""

    version: int
    #: The version's current snapshot (None: a table with no snapshot yet).
    snapshot: int | None
    copied: tuple[str, ...]
    rewritten: tuple[str, ...]


def current_files(doc: dict[str, Any], metadata: str, version: int, root: str,
                  io: FileIO) -> IcebergSnapshot:
    """The files of the current snapshot of ``doc``, metadata file ``metadata`` (its
    path relative to the table) of version ``version``; ``root``: the source table's
    folder, read with ``io``. A path outside the table location is an IcebergError
    naming it (``icebergmeta.relative``), as for a copy."""
    name = metadata.rsplit("/", 1)[-1]
    snap = parsed_metadata(doc, name).current_snapshot()
    if snap is None:
        return IcebergSnapshot(version, None, (), (metadata,))
    location = doc["location"]
    listed = relative(snap.manifest_list, location,
                      f"snapshot {snap.snapshot_id} of metadata {name}")
    manifests: list[str] = []
    copied: set[str] = set()
    for mf in read_list(io, root, listed):
        mrel = relative(mf.manifest_path, location, f"manifest list {listed}")
        manifests.append(mrel)
        copied.update(relative(e.data_file.file_path, location, f"manifest {mrel}")
                      for e in read_entries(io, root, mf, mrel)
                      if e.status != ManifestEntryStatus.DELETED)
    return IcebergSnapshot(version, snap.snapshot_id, tuple(sorted(copied)),
                           (metadata, listed, *sorted(manifests)))
