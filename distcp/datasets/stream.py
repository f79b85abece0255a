"""StreamDataset: one topic directory of time partitions, ``topic/yyyy/MM/dd/HH`` (driver).

Each partition is a file set, published whole and on its own, so that a consumer
sees an hour complete or not at all, and one partition that fails does not hold back
the others. The dataset plans from its history (``with_history``): partitions older
than the low watermark minus ``--lookback`` are not listed again, and files found in
a partition that an earlier run published form a file set of their own (the
partition's name plus ``+late``), published and announced again.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from distcp.configuration import CopyConfiguration
from distcp.datasets.base import CopyableDataset, DatasetHistory, DatasetListing
from distcp.datasets.partitions import (
    PartitionPattern,
    StreamMarks,
    Window,
    expected_high,
    late_name,
    listing_floor,
    span,
)
from distcp.model import CopyableFile, FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree

#: ``--ready-marker`` holding this names one marker per file (``{file}.ready``).
PER_FILE_TOKEN = "{file}"


class StreamDataset(CopyableDataset):
    """The partitions under ``root`` that the run's window admits and that are ready."""

    uses_history = True

    def __init__(self, urn: str, root: str, destination_root: str, pattern: PartitionPattern,
                 history: DatasetHistory | None = None) -> None:
        super().__init__(urn, root, destination_root)
        self.pattern = pattern
        self.history = history or DatasetHistory()

    def with_history(self, history: DatasetHistory) -> StreamDataset:
        return StreamDataset(self.urn, self.root, self.destination_root, self.pattern, history)

    def listing(self, cfg: CopyConfiguration) -> DatasetListing:
        tree = storage_for(self.root, dict(cfg.src_options)).tree(self.root)
        root = tree.path.rstrip("/")
        low = self.history.watermarks.actual_high if self.history.watermarks else None
        window = Window(listing_floor(low, cfg.lookback), cfg.started, cfg.min_age, cfg.max_age)
        # the age flags apply to partitions (from their end) and, like every filter, to files
        wanted = cfg.file_filter
        published = self._published_partitions()
        files: list[CopyableFile] = []
        skipped: list[fsutil.Skipped] = []
        times: list[tuple[str, float]] = []
        seen = 0
        for part, start in self._partitions(tree, root, window):
            found = list(tree.storage.walk(tree.url_of(fsutil.join(root, part)), cfg.links,
                                           skipped))
            ready = self._ready(tree, root, part, found, cfg.ready_marker, skipped)
            if ready is None:
                continue
            late = part in published
            file_set = late_name(part) if late else part
            times += [(part, start), (late_name(part), start)]
            for path, origin in ready:
                seen += 1
                rel = fsutil.relpath(path, root)
                if wanted.admits(rel, origin):
                    files.append(self._file(origin, rel, file_set, cfg))
        marks = StreamMarks(low, expected_high(low, (t for _p, t in times)), tuple(times))
        return DatasetListing(tuple(files), (), tuple(skipped), seen, marks)

    def _partitions(self, tree: Tree, root: str, window: Window
                    ) -> Iterator[tuple[str, float]]:
        """(relative path, start) of each partition in the window, oldest first; folders
        that cannot hold one are not listed."""
        frontier: list[tuple[str, dict[str, int]]] = [("", {})]
        depth_count = len(self.pattern.levels)
        for depth in range(depth_count):
            below: list[tuple[str, dict[str, int]]] = []
            for rel, units in frontier:
                for name in _subdirectories(tree, fsutil.join(root, rel) if rel else root):
                    merged = self.pattern.match(depth, name, units)
                    if merged is None:
                        continue
                    start, end = span(merged)
                    keep = window.admits(start, end) if depth == depth_count - 1 \
                        else window.may_hold(start, end)
                    if keep:
                        below.append((f"{rel}/{name}" if rel else name, merged))
            frontier = sorted(below, key=lambda e: span(e[1])[0])
        for rel, units in frontier:
            yield rel, span(units)[0]

    def _ready(self, tree: Tree, root: str, part: str, found: list[tuple[str, FileStatus]],
               marker: str | None, skipped: list[fsutil.Skipped]
               ) -> list[tuple[str, FileStatus]] | None:
        """The partition's files to copy, or None when it waits for its marker. A
        partition marker (``_SUCCESS``) is copied with the data; per-file markers
        (``{file}.ready``) only signal and are not copied."""
        files = [(p, st) for p, st in found if not st.is_dir]
        if not marker:
            return files
        url = tree.url_of(fsutil.join(root, part))
        if PER_FILE_TOKEN not in marker:
            names = {fsutil.relpath(p, fsutil.join(root, part)) for p, _st in files}
            if marker not in names:
                skipped.append(fsutil.Skipped(url, f"partition {part} is not ready (no "
                                              f"{marker} yet): a later run copies it"))
                return None
            return files
        present = {p for p, _st in files}
        head, _, tail = marker.partition(PER_FILE_TOKEN)
        ready = []
        for path, st in files:
            name = posixpath.basename(path)
            if name.startswith(head) and name.endswith(tail) and len(name) > len(head + tail):
                continue  # a marker (of a file beside it, or of one still to come)
            signal = posixpath.join(posixpath.dirname(path), marker.replace(PER_FILE_TOKEN, name))
            if signal in present:
                ready.append((path, st))
            else:
                skipped.append(fsutil.Skipped(tree.url_of(path), "not ready (no "
                               f"{posixpath.basename(signal)} yet): a later run copies it"))
        return ready

    def _published_partitions(self) -> set[str]:
        """The partitions of which an earlier run published files (from the manifest)."""
        root = self.destination_root.rstrip("/") + "/"
        depth = len(self.pattern.levels)
        return {"/".join(url[len(root):].split("/")[:depth]) for url in self.history.published
                if url.startswith(root) and url.count("/") - root.count("/") >= depth}

    def _file(self, origin: FileStatus, rel: str, file_set: str,
              cfg: CopyConfiguration) -> CopyableFile:
        p = cfg.preserve
        return CopyableFile(
            origin=origin, destination=fsutil.join(self.destination_root, rel),
            dataset_urn=self.urn, file_set=file_set,
            mode=origin.mode if "p" in p else None,
            owner=origin.owner if "u" in p else None,
            group=origin.group if "g" in p else None, preserve=p)


def _subdirectories(tree: Tree, path: str) -> list[str]:
    """The names of the folders directly in ``path`` (a path of ``tree``'s storage)."""
    try:
        entries = tree.storage.listing(tree.url_of(path))
    except FileNotFoundError:
        return []
    return sorted(posixpath.basename(p.rstrip("/")) for p, st in entries if st.is_dir)
