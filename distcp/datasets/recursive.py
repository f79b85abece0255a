"""RecursiveCopyableDataset: every file and directory under one origin root (driver and executor)."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from distcp.configuration import CopyConfiguration
from distcp.converters.base import Converter, build_chain, rename_through
from distcp.datasets.base import CopyableDataset, DatasetListing, EntrySource
from distcp.errors import PlanningError
from distcp.model import CopyableDirectory, CopyableFile, FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for

#: The file set of a dataset that is published as one unit (``--dataset-glob``).
WHOLE = "all"
#: The file set of a plain tree copy: one commit sequence (publishing 20,000 files stays
#: one rename loop), but the files that succeeded are published even when others failed,
#: as rclone and cp do: one unreadable file must not hold back the whole tree.
PER_FILE = "files"


class RecursiveCopyableDataset(CopyableDataset):
    """Everything under ``root``, filtered by the run's filters (distcp.filters).

    Without converters the dataset is one file set: published whole when ``whole``
    (a dataset of ``--dataset-glob``), else file by file (``PER_FILE``, a plain copy). With
    converters each origin file is its own file set: an archive expands into
    many files and must land whole or not at all, but one bad archive must not
    hold back the good ones. ``converters`` (in code) overrides the run's
    ``--convert`` for this dataset.
    """

    def __init__(self, urn: str, root: str, destination_root: str, *, is_file: bool = False,
                 converters: Sequence[str] | None = None, whole: bool = True) -> None:
        super().__init__(urn, root, destination_root, is_file=is_file)
        self.whole = whole
        self.converters = None if converters is None else tuple(converters)

    def listing(self, cfg: CopyConfiguration) -> DatasetListing:
        return self._listing(cfg, None)

    def listing_from(self, cfg: CopyConfiguration, entries: EntrySource) -> DatasetListing:
        """Only the files ``entries`` names, the tree not walked; of the directories only
        the root (its mode and mtime kept): the parents of copied files are created."""
        if self.is_file:
            raise PlanningError(f"{fsutil.display(self.root)} is a file: a list of files "
                                "needs SRC to be the directory (or bucket/prefix) its paths "
                                "are relative to", path=self.root)
        return self._listing(cfg, entries)

    def _listing(self, cfg: CopyConfiguration, entries: EntrySource | None) -> DatasetListing:
        tree = storage_for(self.root, dict(cfg.src_options)).tree(self.root)
        root = tree.path
        if self.converters is not None:
            cfg = cfg.with_(converters=self.converters)
        chain = build_chain(cfg.converters, cfg.converter_options)
        if self.is_file:
            origin = tree.storage.stat(tree.url)
            name = posixpath.basename(root.rstrip("/"))
            return DatasetListing(
                (self._file(origin, self.destination_root, chain, cfg, name),), ())
        files: list[CopyableFile] = []
        seen = 0
        dirs = [self.root_directory(cfg)]
        skipped: list[fsutil.Skipped] = []
        wanted = cfg.file_filter
        found = entries(tree, skipped) if entries is not None else \
            tree.storage.walk(tree.url, cfg.links, skipped)
        filtered = wanted.active
        for path, origin in found:
            rel = fsutil.relpath(path, root)
            dest = fsutil.join(self.destination_root, rel)
            if origin.is_dir:
                dirs.append(self._directory(origin, dest, cfg))
                continue
            seen += 1
            if not filtered or wanted.admits(rel, origin):
                files.append(self._file(origin, dest, chain, cfg, rel))
        if cfg.include:
            dirs = _dirs_holding(dirs, files)
        return DatasetListing(tuple(files), tuple(dirs), tuple(skipped), seen)

    def root_directory(self, cfg: CopyConfiguration) -> CopyableDirectory:
        """The root, so that its mode and mtime are kept, as cp -a and rsync -a do."""
        tree = storage_for(self.root, dict(cfg.src_options)).tree(self.root)
        return self._directory(tree.storage.stat(tree.url), self.destination_root, cfg)

    def planned_file(self, origin: FileStatus, rel: str, cfg: CopyConfiguration
                     ) -> CopyableFile:
        """The file at ``rel`` as ``listing`` makes it, for a run without converters
        (planning on the executors, ``distcp.planning.joined``)."""
        return self._file(origin, fsutil.join(self.destination_root, rel), [], cfg, rel)

    def planned_directory(self, origin: FileStatus, rel: str, cfg: CopyConfiguration
                          ) -> CopyableDirectory:
        """The directory at ``rel`` as ``listing`` makes it."""
        return self._directory(origin, fsutil.join(self.destination_root, rel), cfg)

    def _file(self, origin: FileStatus, dest: str, chain: list[Converter],
              cfg: CopyConfiguration, rel: str) -> CopyableFile:
        p = cfg.preserve
        if origin.link_target is not None:
            return self._link(origin, dest, cfg, rel)
        owner, group = _owner_group(origin, cfg)
        return CopyableFile(
            origin=origin,
            destination=rename_through(chain, dest),
            dataset_urn=self.urn,
            file_set=file_set_of(rel, cfg.converters, self.whole),
            mode=_mode(origin, cfg, is_dir=False),
            owner=owner,
            group=group,
            preserve=p,
            converters=cfg.converters,
        )

    def _link(self, origin: FileStatus, dest: str, cfg: CopyConfiguration,
              rel: str) -> CopyableFile:
        """A symbolic link under ``--links copy``: copied verbatim, never converted (its
        text names a path, not bytes), under its own name; a link has no mode of its own."""
        owner, group = _owner_group(origin, cfg)
        return CopyableFile(origin=origin, destination=dest, dataset_urn=self.urn,
                            file_set=file_set_of(rel, (), self.whole),
                            owner=owner, group=group, preserve=cfg.preserve)

    def _directory(self, origin: FileStatus, dest: str, cfg: CopyConfiguration) -> CopyableDirectory:
        mtime = (origin.mtime_ns or origin.mtime) if "t" in cfg.preserve else None
        chown = cfg.chown_ids
        return CopyableDirectory(origin, dest, self.urn, WHOLE if self.whole else PER_FILE,
                                 _mode(origin, cfg, is_dir=True), mtime,
                                 owner=chown.owner if chown else None,
                                 group=chown.group if chown else None)


def _mode(origin: FileStatus, cfg: CopyConfiguration, is_dir: bool) -> int | None:
    """--chmod's mode (from the source's, or a new entry's default), else the source's
    under --preserve p, else None (the filesystem's default)."""
    rules = cfg.chmod_rules
    if rules is not None:
        return rules.mode_for(origin.mode, is_dir)
    return origin.mode if "p" in cfg.preserve else None


def _owner_group(origin: FileStatus, cfg: CopyConfiguration) -> tuple[str | None, str | None]:
    """--chown's owner and group where given, else the source's under --preserve u/g."""
    chown = cfg.chown_ids
    owner = origin.owner if "u" in cfg.preserve else None
    group = origin.group if "g" in cfg.preserve else None
    if chown is not None:
        owner = chown.owner or owner
        group = chown.group or group
    return owner, group


def file_set_of(rel: str, converters: Sequence[str], whole: bool = True) -> str:
    """The file's own set (named by its relative path) when converted, so that each
    archive is published whole or not at all, on its own; else ``all`` for a dataset,
    ``files`` for a plain copy."""
    if converters:
        return f"file:{rel}"
    return WHOLE if whole else PER_FILE


def _dirs_holding(dirs: list[CopyableDirectory], files: list[CopyableFile]) -> list[CopyableDirectory]:
    """Keep only directories that are ancestors of a selected file."""
    needed: set[str] = set()
    for f in files:
        parent = posixpath.dirname(f.destination)
        while parent and parent not in needed:
            needed.add(parent)
            parent = posixpath.dirname(parent)
    return [d for d in dirs if d.destination in needed]
