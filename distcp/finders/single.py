"""SingleRootFinder: the plain ``pydistcp copy SRC... DST`` case (driver).

The mapping follows ``rclone copy`` and ``distcp -update`` so that re-running
the same command never nests ``DST/SRC``:

- one directory SRC: DST becomes a mirror of SRC's contents;
- one file SRC: DST is the file, or ``DST/<name>`` when DST is an existing
  directory or ends with "/";
- several SRCs: each goes to ``DST/<its basename>``.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from typing import Any

from distcp.datasets.base import CopyableDataset
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.errors import PlanningError
from distcp.finders.base import DatasetsFinder
from distcp.storage import capabilities_of
from distcp.storage import filesystems as fsutil


class SingleRootFinder(DatasetsFinder):
    """One RecursiveCopyableDataset per source."""

    def find(self) -> Iterator[CopyableDataset]:
        cfg = self.cfg
        dst_fs, dst = fsutil.filesystem(cfg.destination, cfg.dst_options)
        dst_is_dir = cfg.destination.endswith("/") or _isdir(dst_fs, dst)
        several = len(cfg.sources) > 1
        for source in cfg.sources:
            src_fs, src = fsutil.filesystem(source, cfg.src_options)
            info = source_info(src_fs, src, source)
            is_file = info["type"] != "directory"
            src = src.rstrip("/") or "/"
            if several or (is_file and dst_is_dir):
                target = fsutil.join(dst.rstrip("/"), posixpath.basename(src))
            else:
                target = dst.rstrip("/") or "/"
            check_not_inside(src_fs, src, dst_fs, target, source, cfg.destination)
            urn = fsutil.to_url(src_fs, src)
            yield RecursiveCopyableDataset(
                urn, urn, fsutil.to_url(dst_fs, target), is_file=is_file, whole=False
            )


def source_info(fs: Any, path: str, shown: str) -> dict[str, Any]:
    """``fs.info(path)``, or a PlanningError that names the source and the cause."""
    try:
        return fs.info(path)  # type: ignore[no-any-return]
    except FileNotFoundError:
        raise PlanningError(f"source not found: {fsutil.display(shown)}", path=shown) from None
    except PermissionError as exc:
        raise PlanningError(f"cannot read source {shown}: permission denied ({exc})",
                            path=shown) from None
    except OSError as exc:
        raise PlanningError(f"cannot read source {shown}: {exc}", path=shown) from None


def check_not_inside(src_fs, src: str, dst_fs, dst: str, shown_src: str,  # type: ignore[no-untyped-def]
                     shown_dst: str) -> None:
    """Refuse a destination inside its own source: the copy would feed on itself."""
    if type(src_fs) is not type(dst_fs) or src_fs.storage_options != dst_fs.storage_options:
        return
    src, dst = src.rstrip("/"), dst.rstrip("/")
    if capabilities_of(src_fs).local_paths:
        # The same directory reached through a link is the same directory.
        src, dst = os.path.realpath(src or "/"), os.path.realpath(dst or "/")
    if dst == src or dst.startswith(src + "/"):
        raise PlanningError(
            f"destination {shown_dst} is inside source {shown_src}; choose a destination "
            "outside the source", path=shown_dst,
        )


def _isdir(fs, path: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        return bool(fs.isdir(path))
    except OSError:
        return False
