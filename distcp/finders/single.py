"""SingleRootFinder: the plain ``pydistcp copy SRC... DST`` case (driver).

The mapping follows ``rclone copy`` and ``distcp -update`` so that re-running
the same command never nests ``DST/SRC``:

- one directory SRC: DST becomes a mirror of SRC's contents;
- one file SRC: DST is the file, or ``DST/<name>`` when DST is an existing
  directory or ends with "/";
- several SRCs: each goes to ``DST/<its basename>``.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Iterator

from distcp.datasets.base import CopyableDataset
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.errors import PlanningError
from distcp.finders.base import DatasetsFinder
from distcp.model import FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree


class SingleRootFinder(DatasetsFinder):
    """One RecursiveCopyableDataset per source."""

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        dst_tree = storage_for(cfg.destination, dict(cfg.dst_options)).tree(cfg.destination)
        dst = dst_tree.path
        # asked only where a file's name depends on it (a round trip to an object store)
        dst_is_dir = functools.cache(
            lambda: cfg.destination.endswith("/") or _isdir(dst_tree))
        several = len(cfg.sources) > 1
        for source in cfg.sources:
            src_tree = storage_for(source, dict(cfg.src_options)).tree(source)
            is_file = not source_status(src_tree, source).is_dir
            src = src_tree.path.rstrip("/") or "/"
            if several or (is_file and dst_is_dir()):
                target = fsutil.join(dst.rstrip("/"), posixpath.basename(src))
            else:
                target = dst.rstrip("/") or "/"
            check_not_inside(src_tree, dst_tree, target, source, cfg.destination)
            urn = src_tree.url_of(src)
            yield RecursiveCopyableDataset(
                urn, urn, dst_tree.url_of(target), is_file=is_file, whole=False
            )


def source_status(tree: Tree, shown: str) -> FileStatus:
    """The status of the source ``tree``'s root, or a PlanningError that names the
    source and the cause."""
    try:
        return tree.storage.stat(tree.url)
    except FileNotFoundError:
        raise PlanningError(f"source not found: {fsutil.display(shown)}", path=shown) from None
    except PermissionError as exc:
        raise PlanningError(f"cannot read source {shown}: permission denied ({exc})",
                            path=shown) from None
    except OSError as exc:
        raise PlanningError(f"cannot read source {shown}: {exc}", path=shown) from None


def check_not_inside(src: Tree, dst: Tree, target: str, shown_src: str,
                     shown_dst: str) -> None:
    """Refuse a destination (``target``, a path of ``dst``'s filesystem) inside its own
    source: the copy would feed on itself."""
    if src.holds(dst, target):
        raise PlanningError(
            f"destination {shown_dst} is inside source {shown_src}; choose a destination "
            "outside the source", path=shown_dst,
        )


def _isdir(tree: Tree) -> bool:
    try:
        return tree.storage.isdir(tree.url)
    except OSError:
        return False
