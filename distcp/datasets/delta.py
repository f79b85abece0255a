"""DeltaDataset: one Delta Lake table, replicated version by version (driver).

The destination's own ``_delta_log/`` says which version it has (what a reader there
sees is the truth, so a rerun after a crash goes on from it); the source's newer
commits say which files to copy (``deltaplan``): each version's data files, then its
commit file, then checkpoints and ``_last_checkpoint``, as file sets published in that
order (``DatasetListing.order``). A table this tool must not replicate (a path outside
it, a gap in its log) lists nothing and names why in one line; a file a commit
references that the source has vacuumed stops the table at the version before it.
Either is a failure of this table only: the run's other tables are copied.
"""

from __future__ import annotations

import posixpath

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset, DatasetListing
from distcp.datasets.deltalog import (
    LAST_CHECKPOINT,
    LOG_DIR,
    LogError,
    commit_name,
    last_checkpoint_version,
    last_version,
    versions_after,
)
from distcp.datasets.deltaplan import TablePlan, commit_set, plan_table
from distcp.datasets.deltasnapshot import table_snapshot
from distcp.datasets.versions import TableLag, TableVersions
from distcp.model import CopyableFile, FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree


def is_delta_table(tree: Tree, path: str) -> bool:
    """Whether the folder ``path`` (of ``tree``'s storage) holds a ``_delta_log/``."""
    try:
        return tree.storage.isdir(tree.url_of(fsutil.join(path.rstrip("/"), LOG_DIR)))
    except OSError:
        return False


class DeltaDataset(CopyableDataset):
    """The Delta table at ``root``, copied to ``destination_root`` by versions."""

    #: Its listing holds only what is new: ``--delete`` must not remove the rest.
    lists_everything = False

    def listing(self, cfg: CopyConfiguration) -> DatasetListing:
        tree = storage_for(self.root, dict(cfg.src_options)).tree(self.root)
        root = tree.path.rstrip("/")
        skipped: list[fsutil.Skipped] = []
        try:
            files = self._walk(tree, root, skipped)
            plan, versions = self._plan(tree, root, files, cfg)
            out = [self._file(files[rel], rel, name, cfg)
                   for name, rels in plan.sets for rel in rels]
        except (LogError, OSError) as exc:  # this table only: the run's others go on
            return self._refused(exc, "replicated")
        if plan.vacuumed is not None:
            v = plan.vacuumed
            skipped.append(fsutil.Skipped(
                tree.url_of(fsutil.join(root, v.path)),
                f"referenced ({v.kind}) by version {v.version} of Delta table "
                f"{fsutil.display(self.urn)} but no longer at the source (vacuumed?): the "
                f"destination table is replicated up to version {v.version - 1} only",
                True, self.urn))
        # seen 0: the run's filters do not apply to a table (--include cannot miss here)
        return DatasetListing(tuple(out), (), tuple(skipped), order=plan.order,
                              announced=plan.announced, versions=versions)

    def check_listing(self, cfg: CopyConfiguration) -> DatasetListing:
        """What ``check`` compares the destination with: the source's files of the
        version the destination's log ends at (``deltasnapshot``; the source's newest
        when the destination has no commit), under their destination URLs. A file of
        that version the source lacks is a failure naming it; a table that cannot be
        read is one failure naming why; how many versions the destination is behind
        (``lag``), when it holds one."""
        tree = storage_for(self.root, dict(cfg.src_options)).tree(self.root)
        root = tree.path.rstrip("/")
        skipped: list[fsutil.Skipped] = []
        try:
            files = self._walk(tree, root, skipped)
            log = self._log(files)
            after, _size = self._destination_version(cfg)
            version = after if after >= 0 else last_version(log)
            if version > last_version(log):
                raise LogError(f"the destination is at version {version}, the source at "
                               f"{last_version(log)}: not a copy of this table")
            commits = self._commits(tree, root, log, -1, version)
            snap = table_snapshot(files.keys(), version, commits,
                                  self._pointer(tree, root, log))
            out = [self._file(files[rel], rel, "snapshot", cfg) for rel in snap.files]
            newest = last_version(log)
        except (LogError, OSError) as exc:
            return self._refused(exc, "checked")
        skipped += [fsutil.Skipped(
            tree.url_of(fsutil.join(root, r.path)),
            f"in version {version} of Delta table {fsutil.display(self.urn)} ({r.kind}) "
            "but no longer at the source (vacuumed?): not compared", True, self.urn)
            for r in snap.missing]
        lag = TableLag(fsutil.display(self.urn), f"version {version}", f"version {newest}",
                       newest - version, "versions") if after >= 0 else None
        return DatasetListing(tuple(out), (), tuple(skipped), lag=lag)

    def _walk(self, tree: Tree, root: str, skipped: list[fsutil.Skipped]
              ) -> dict[str, FileStatus]:
        """The source table's files, by path relative to its root."""
        return {fsutil.relpath(p, root): st for p, st
                in tree.storage.walk(tree.url, "follow", skipped) if not st.is_dir}

    def _refused(self, exc: Exception, what: str) -> DatasetListing:
        """The listing of a table that is not ``what`` (replicated, checked): one
        failure naming why, for this table only."""
        why = exc if isinstance(exc, LogError) else f"cannot read it ({exc})"
        return DatasetListing((), (), (fsutil.Skipped(
            self.urn, f"Delta table not {what}: {why}", True, self.urn),))

    def _log(self, files: dict[str, FileStatus]) -> list[str]:
        """The names in the source's log folder; a table without a commit is refused."""
        log = [rel[len(LOG_DIR) + 1:] for rel in files if rel.startswith(LOG_DIR + "/")]
        if last_version(log) < 0:
            raise LogError(f"{fsutil.display(self.urn)} has no commit in {LOG_DIR}/")
        return log

    @staticmethod
    def _commits(tree: Tree, root: str, log: list[str], after: int, upto: int | None = None
                 ) -> dict[int, bytes]:
        """The documents of the source's commits newer than ``after`` (up to ``upto``)."""
        return {v: tree.storage.read_bytes(
            tree.url_of(fsutil.join(root, LOG_DIR, commit_name(v))), "Delta commit")
            for v in versions_after(log, after) if upto is None or v <= upto}

    @staticmethod
    def _pointer(tree: Tree, root: str, log: list[str]) -> int | None:
        """The version the source's ``_last_checkpoint`` names (None: none, unreadable)."""
        if LAST_CHECKPOINT not in log:
            return None
        return last_checkpoint_version(tree.storage.read_bytes(
            tree.url_of(fsutil.join(root, LOG_DIR, LAST_CHECKPOINT)), "Delta checkpoint"))

    def _plan(self, tree: Tree, root: str, files: dict[str, FileStatus],
              cfg: CopyConfiguration) -> tuple[TablePlan, TableVersions]:
        """The table's plan from its source log and the destination's last version, and
        the versions it goes through (the destination's, the source's newest)."""
        log = self._log(files)
        newest = last_version(log)
        after, size = self._destination_version(cfg)
        if after > newest:
            raise LogError(f"the destination is at version {after}, the source at {newest}: "
                           "not a copy of this table")
        source_size = files.get(f"{LOG_DIR}/{commit_name(after)}")
        if source_size is not None and after >= 0 and source_size.size != size:
            raise LogError(f"the destination's commit {after} differs from the source's: "
                           "the destination table is not a copy of this one")
        commits = self._commits(tree, root, log, after)
        plan = plan_table(files.keys(), after, commits, self._pointer(tree, root, log))
        return plan, TableVersions(after, newest, tuple(
            (commit_set(v), v) for v in range(after + 1, plan.last + 1)))

    def _destination_version(self, cfg: CopyConfiguration) -> tuple[int, int]:
        """The newest commit the destination's log shows (-1: none) and its size."""
        log = fsutil.join(self.destination_root.rstrip("/"), LOG_DIR)
        storage = storage_for(log, dict(cfg.dst_options))
        try:
            entries = storage.entries(log)
        except FileNotFoundError:
            return -1, 0
        sizes = {posixpath.basename(e.url.rstrip("/")): e.size for e in entries}
        newest = last_version(sizes)
        return newest, sizes.get(commit_name(newest), 0) if newest >= 0 else 0

    def _file(self, origin: FileStatus, rel: str, file_set: str,
              cfg: CopyConfiguration) -> CopyableFile:
        """``rel`` (checked by ``deltalog.table_path`` when a log named it) at its place
        under the destination table, which it cannot leave."""
        if posixpath.normpath(rel) != rel or rel.startswith(("/", "../")) or rel == "..":
            raise LogError(f"{rel!r} would land outside the destination table")
        p = cfg.preserve
        return CopyableFile(
            origin=origin, destination=fsutil.join(self.destination_root.rstrip("/"), rel),
            dataset_urn=self.urn, file_set=file_set, mode=origin.mode if "p" in p else None,
            owner=origin.owner if "u" in p else None,
            group=origin.group if "g" in p else None, preserve=p)
