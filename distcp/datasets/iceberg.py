"""IcebergDataset: one Apache Iceberg table, replicated metadata version by version (driver).

The destination says which version it has (the catalog's table with
``--iceberg-catalog``, else its newest metadata file: what a reader there sees is the
truth, so a rerun after a crash goes on from it); the source's newer metadata files
say what to copy: each version's new data and delete files, then its manifests,
manifest lists and metadata file rewritten to point at the destination location
(``icebergfiles``), as file sets published in that order (``icebergplan``), each
version's metadata followed by the catalog's swap to it. A table this tool must not
replicate (a path outside its location, unreadable metadata) lists nothing and names
why in one line: a failure of this table only.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset, DatasetListing
from distcp.datasets.deltaplan import commit_set
from distcp.datasets.icebergmeta import (
    METADATA_DIR,
    VERSION_HINT,
    IcebergError,
    current_version,
    metadata_files,
    metadata_version,
    snapshot_ids,
)
from distcp.datasets.icebergplan import CatalogSwap, plan_table
from distcp.datasets.versions import TableLag, TableVersions
from distcp.model import CopyableFile, FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree


def is_iceberg_table(tree: Tree, path: str) -> bool:
    """Whether the folder ``path`` holds ``metadata/`` with a ``*.metadata.json``."""
    try:
        folder = tree.url_of(fsutil.join(path.rstrip("/"), METADATA_DIR))
        return any(metadata_version(posixpath.basename(e.url.rstrip("/"))) is not None
                   for e in tree.storage.entries(folder))
    except OSError:
        return False


def table_name(cfg: CopyConfiguration, destination: str) -> str:
    """The catalog name of the table at ``destination``: ``--iceberg-table``, else
    ``<parent folder>.<folder>`` (a ``.db`` suffix dropped, Hive's warehouse layout)."""
    if cfg.iceberg_table:
        return cfg.iceberg_table
    parts = destination.rstrip("/").split("/")
    return f"{parts[-2].removesuffix('.db') or 'default'}.{parts[-1]}"


class IcebergDataset(CopyableDataset):
    """The Iceberg table at ``root``, copied to ``destination_root`` by metadata versions."""

    #: Its listing holds only what is new: ``--delete`` must not remove the rest.
    lists_everything = False

    def listing(self, cfg: CopyConfiguration) -> DatasetListing:
        return self._read_table(cfg, "replicated", self._listing)

    def check_listing(self, cfg: CopyConfiguration) -> DatasetListing:
        """What ``check`` compares the destination with: the current snapshot of the
        metadata version the destination holds (``icebergsnapshot``; the source's newest
        when the destination has none): its data and delete files, under their
        destination URLs; its metadata file, manifest list and manifests, rewritten for
        the destination, as files that must be there (``expected``); and how many
        snapshots the destination is behind (``lag``). A file of that snapshot the source
        lacks is a failure naming it; a table that cannot be read is one failure naming
        why."""
        return self._read_table(cfg, "checked", self._check_listing)

    def _read_table(self, cfg: CopyConfiguration, what: str,
                    make: Callable[[Tree, str, dict[str, FileStatus], CopyConfiguration],
                                   DatasetListing]) -> DatasetListing:
        """``make``'s listing of the source table's files; a table that cannot be read
        is one failure saying it is not ``what`` (replicated, checked), and why."""
        tree = storage_for(self.root, dict(cfg.src_options)).tree(self.root)
        root = tree.path.rstrip("/")
        try:
            files = {fsutil.relpath(p, root): st for p, st
                     in tree.storage.walk(tree.url, "follow", []) if not st.is_dir}
            return make(tree, root, files, cfg)
        except ImportError as exc:
            return self._refused(f"{exc.name or 'pyiceberg'} is not installed (pip install "
                                 "'pydistcp[iceberg]')", what)
        except (IcebergError, OSError) as exc:  # this table only: the run's others go on
            return self._refused(exc if isinstance(exc, IcebergError)
                                 else f"cannot read it ({exc})", what)

    def _refused(self, why: object, what: str) -> DatasetListing:
        """No listing, and why, in one line: a failure of this table only."""
        return DatasetListing((), (), (fsutil.Skipped(
            self.urn, f"Iceberg table not {what}: {why}", True, self.urn),))

    def _versions(self, tree: Tree, root: str, files: dict[str, FileStatus]
                  ) -> tuple[dict[str, str], dict[int, str], int]:
        """The source's metadata folder (file name -> path relative to the table), its
        metadata files by version, and its current version."""
        meta = {rel[len(METADATA_DIR) + 1:]: rel for rel in files
                if rel.startswith(METADATA_DIR + "/") and rel.count("/") == 1}
        versions = metadata_files(meta)
        hint = meta.get(VERSION_HINT)
        newest = current_version(versions, self._read(tree, root, hint) if hint else None)
        if newest < 0:
            raise IcebergError(f"{fsutil.display(self.urn)} has no metadata file")
        return meta, versions, newest

    def _held(self, cfg: CopyConfiguration, published: dict[str, int],
              versions: dict[int, str], newest: int) -> tuple[int, str, set[int]]:
        """``_destination``, checked against the source's current version ``newest``."""
        after, previous, known = self._destination(cfg, published, versions)
        if after > newest:
            raise IcebergError(f"the destination is at metadata version {after}, the "
                               f"source at {newest}: not a copy of this table")
        return after, previous, known

    def _listing(self, tree: Tree, root: str, files: dict[str, FileStatus],
                 cfg: CopyConfiguration) -> DatasetListing:
        from pyiceberg.io.pyarrow import PyArrowFileIO

        from distcp.datasets.icebergcatalog import file_io_properties
        from distcp.datasets.icebergfiles import Added, Rewriter
        meta, versions, newest = self._versions(tree, root, files)
        published = self._published(cfg)
        after, previous, known = self._held(cfg, published, versions, newest)
        scratch = self._scratch()
        rewriter = Rewriter(tree.url_of(root).removeprefix("file://"),
                            self.destination_root, scratch, published,
                            PyArrowFileIO(file_io_properties(dict(cfg.src_options))))
        added: list[Any] = []
        for v in sorted(x for x in versions if after < x <= newest):
            doc = self._doc(tree, root, meta[versions[v]], versions[v])
            step = Added(v, meta[versions[v]])
            rewriter.version(versions[v], doc, snapshot_ids(doc) - known, step)
            known |= snapshot_ids(doc)
            added.append(step.files())
        plan = plan_table(added, after)
        rewritten = {rel for a in added for rel in (a.metadata, *a.manifests, *a.lists)}
        out = [self._file(self._origin(scratch, rel) if rel in rewritten else files[rel],
                          rel, name, cfg)
               for name, rels in plan.sets for rel in rels if rel in rewritten or rel in files]
        missing = [rel for _n, rels in plan.sets for rel in rels
                   if rel not in rewritten and rel not in files]
        if missing:
            raise IcebergError(f"{missing[0]} is referenced but no longer at the source "
                               "(expired snapshots' files removed?)")
        return DatasetListing(tuple(out), (), (), order=plan.order, announced=plan.announced,
                              versions=TableVersions(after, newest, tuple(
                                  (commit_set(a.version), a.version) for a in added)),
                              registrations=self._registrations(cfg, added, previous))

    def _check_listing(self, tree: Tree, root: str, files: dict[str, FileStatus],
                       cfg: CopyConfiguration) -> DatasetListing:
        from pyiceberg.io.pyarrow import PyArrowFileIO

        from distcp.datasets.icebergcatalog import file_io_properties
        from distcp.datasets.icebergsnapshot import current_files
        meta, versions, newest = self._versions(tree, root, files)
        after, _previous, known = self._held(cfg, self._published(cfg), versions, newest)
        version = after if after >= 0 else newest
        rel = meta[versions[version]]
        snap = current_files(self._doc(tree, root, rel, versions[version]), rel, version,
                             tree.url_of(root).removeprefix("file://"),
                             PyArrowFileIO(file_io_properties(dict(cfg.src_options))))
        out = [self._file(files[r], r, "snapshot", cfg) for r in snap.copied if r in files]
        expected = tuple(self._placed(r) for r in snap.rewritten)
        held = f"snapshot {snap.snapshot}" if snap.snapshot is not None else "no snapshot"
        gone = tuple(fsutil.Skipped(
            tree.url_of(fsutil.join(root, r)),
            f"in {held} (metadata version {version}) of Iceberg table "
            f"{fsutil.display(self.urn)} but no longer at the source (expired snapshots' "
            "files removed?): not compared", True, self.urn)
            for r in snap.copied if r not in files)
        lag = None
        if after >= 0:
            doc = self._doc(tree, root, meta[versions[newest]], versions[newest])
            current = doc.get("current-snapshot-id")
            lag = TableLag(fsutil.display(self.urn), f"{held} (metadata version {version})",
                           f"snapshot {current} (metadata version {newest})"
                           if current not in (None, -1) else
                           f"no snapshot (metadata version {newest})",
                           len(snapshot_ids(doc) - known), "snapshots")
        return DatasetListing(tuple(out), (), gone, expected=expected, lag=lag)

    def _scratch(self) -> str:
        """The driver's folder for this table's rewritten files (new bytes, not state:
        never under a state folder), emptied first: one per table and destination, so
        runs leave at most the last run's files behind."""
        key = hashlib.sha1(f"{self.urn}\0{self.destination_root}".encode()).hexdigest()
        folder = os.path.join(tempfile.gettempdir(), "pydistcp-iceberg", key[:20])
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        return folder

    def _registrations(self, cfg: CopyConfiguration, added: list[Any], previous: str
                       ) -> tuple[CatalogSwap, ...]:
        """With a catalog, each version's metadata set ends by the catalog's swap to it."""
        if not cfg.iceberg_catalog:
            return ()
        name = table_name(cfg, self.destination_root)
        out = []
        for a in added:
            location = self._destination_url(a.metadata)
            out.append(CatalogSwap(commit_set(a.version), cfg.iceberg_catalog, name, location,
                                   previous))
            previous = location
        return tuple(out)

    def _placed(self, rel: str) -> str:
        """``rel`` (checked by ``icebergmeta.relative``) under the destination table,
        which it cannot leave."""
        if posixpath.normpath(rel) != rel or rel.startswith(("/", "../")) or rel == "..":
            raise IcebergError(f"{rel!r} would land outside the destination table")
        return self._destination_url(rel)

    def _destination_url(self, rel: str) -> str:
        return fsutil.join(self.destination_root.rstrip("/"), rel)

    def _published(self, cfg: CopyConfiguration) -> dict[str, int]:
        """The destination table's files by relative path, with their sizes."""
        dst = storage_for(self.destination_root, dict(cfg.dst_options))
        tree = dst.tree(self.destination_root)
        root = tree.path.rstrip("/")
        try:
            return {fsutil.relpath(p, root): st.size for p, st
                    in dst.walk(tree.url, "follow", []) if not st.is_dir}
        except FileNotFoundError:
            return {}

    def _destination(self, cfg: CopyConfiguration, published: dict[str, int],
                     versions: dict[int, str]) -> tuple[int, str, set[int]]:
        """The destination's metadata version (-1: none), its location as the catalog
        holds it (empty: none) and the snapshots it has."""
        location = ""
        if cfg.iceberg_catalog:
            from distcp.datasets.icebergcatalog import current_location, open_catalog
            location = current_location(open_catalog(cfg.iceberg_catalog, dict(cfg.dst_options)),
                                        table_name(cfg, self.destination_root))
            rel = location.removeprefix(self.destination_root.rstrip("/") + "/")
            if location and (rel == location or rel.count("/") != 1):
                raise IcebergError(f"the catalog's table is at {location}, outside "
                                   f"{fsutil.display(self.destination_root)}")
            name = posixpath.basename(rel) if location else ""
        else:
            dests = metadata_files(posixpath.basename(r) for r in published
                                   if r.startswith(METADATA_DIR + "/") and r.count("/") == 1)
            name = dests[max(dests)] if dests else ""
        if not name:
            return -1, "", set()
        version = metadata_version(name)
        if version is None or versions.get(version, name) != name:
            raise IcebergError(f"the destination's metadata {name} is not the source's of "
                               "its version: the destination table is not a copy of this one")
        storage = storage_for(self.destination_root, dict(cfg.dst_options))
        doc = json.loads(storage.read_bytes(self._destination_url(f"{METADATA_DIR}/{name}"),
                                            "Iceberg metadata"))
        return version, location, snapshot_ids(doc)

    def _read(self, tree: Tree, root: str, rel: str) -> bytes:
        return tree.storage.read_bytes(tree.url_of(fsutil.join(root, rel)), "Iceberg metadata")

    def _doc(self, tree: Tree, root: str, rel: str, name: str) -> dict[str, Any]:
        try:
            doc = json.loads(self._read(tree, root, rel))
        except ValueError as exc:
            raise IcebergError(f"metadata {name} is not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise IcebergError(f"metadata {name} is not a JSON object")
        return doc

    def _origin(self, scratch: str, rel: str) -> FileStatus:
        path = os.path.join(scratch, *rel.split("/"))
        st = os.stat(path)
        return FileStatus(url=path, size=st.st_size, mtime=st.st_mtime, is_dir=False)

    def _file(self, origin: FileStatus, rel: str, file_set: str,
              cfg: CopyConfiguration) -> CopyableFile:
        return CopyableFile(origin=origin, destination=self._placed(rel),
                            dataset_urn=self.urn, file_set=file_set, preserve=cfg.preserve)

