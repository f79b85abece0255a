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
from distcp.datasets.versions import TableVersions
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
        files: dict[str, FileStatus] = {}
        try:
            files = {fsutil.relpath(p, root): st for p, st
                     in tree.storage.walk(tree.url, "follow", skipped) if not st.is_dir}
            plan, versions = self._plan(tree, root, files, cfg)
            out = [self._file(files[rel], rel, name, cfg)
                   for name, rels in plan.sets for rel in rels]
        except (LogError, OSError) as exc:  # this table only: the run's others go on
            why = exc if isinstance(exc, LogError) else f"cannot read it ({exc})"
            return DatasetListing((), (), (fsutil.Skipped(
                self.urn, f"Delta table not replicated: {why}", True, self.urn),))
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

    def _plan(self, tree: Tree, root: str, files: dict[str, FileStatus],
              cfg: CopyConfiguration) -> tuple[TablePlan, TableVersions]:
        """The table's plan from its source log and the destination's last version, and
        the versions it goes through (the destination's, the source's newest)."""
        log = [rel[len(LOG_DIR) + 1:] for rel in files if rel.startswith(LOG_DIR + "/")]
        newest = last_version(log)
        if newest < 0:
            raise LogError(f"{fsutil.display(self.urn)} has no commit in {LOG_DIR}/")
        after, size = self._destination_version(cfg)
        if after > newest:
            raise LogError(f"the destination is at version {after}, the source at {newest}: "
                           "not a copy of this table")
        source_size = files.get(f"{LOG_DIR}/{commit_name(after)}")
        if source_size is not None and after >= 0 and source_size.size != size:
            raise LogError(f"the destination's commit {after} differs from the source's: "
                           "the destination table is not a copy of this one")
        commits = {v: tree.storage.read_bytes(
            tree.url_of(fsutil.join(root, LOG_DIR, commit_name(v))), "Delta commit")
            for v in versions_after(log, after)}
        pointer = None
        if LAST_CHECKPOINT in log:
            pointer = last_checkpoint_version(tree.storage.read_bytes(
                tree.url_of(fsutil.join(root, LOG_DIR, LAST_CHECKPOINT)), "Delta checkpoint"))
        plan = plan_table(files.keys(), after, commits, pointer)
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
