"""A source listing taken from a list the user has, instead of a walk (driver).

``--files-from`` and ``--files-from-manifest`` name the files to copy; this module opens
the list (a local path, ``-`` for stdin, or a URL read with the source's options),
parses it with ``distcp.planning.filelists`` and turns each entry into the
``(path, FileStatus)`` pairs a dataset's listing is made of. An entry whose size and
mtime the manifest gives costs no request; any other is asked of the source (a bounded
pool of them where requests are remote). An entry the source does not have is reported
as a failed entry (exit 1), never fatal to the run: the rest is copied.
"""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.model import FileStatus
from distcp.planning.filelists import (
    FilesFromEntry,
    inventory_files,
    manifest_format,
    parse_lines,
    parse_manifest,
    read_text,
)
from distcp.storage import filesystems as fsutil
from distcp.storage import storage_for
from distcp.storage.base import Tree

#: Entries asked of the source per round of the pool (bounds what waits in memory).
CHUNK = 1024


def list_flag(cfg: CopyConfiguration) -> str | None:
    """The flag that gave the run its list, as the user typed it, or None."""
    if cfg.files_from:
        return f"--files-from {cfg.files_from}"
    if cfg.files_from_manifest:
        return f"--files-from-manifest {cfg.files_from_manifest}"
    return None


def files_from_list(cfg: CopyConfiguration, root: str) -> Iterator[FilesFromEntry]:
    """The run's list, parsed; ``root`` is the source root as a path of its filesystem."""
    name = list_flag(cfg)
    assert name is not None
    location = cfg.files_from or cfg.files_from_manifest or ""
    data = _read(location, cfg, name)
    if cfg.files_from:
        return parse_lines(read_text(data), name)
    if manifest_format(data[:16]) == "json":
        return _inventory(data, cfg, name, root)
    return parse_manifest(io.BytesIO(data), name, root)


def _inventory(document: bytes, cfg: CopyConfiguration, name: str, root: str
               ) -> Iterator[FilesFromEntry]:
    """Every data file of an S3 Inventory ``manifest.json``, one after another (read with
    the source's options), duplicates across files kept once."""
    urls, columns = inventory_files(document, name)
    seen: set[str] = set()
    for url in urls:
        shown = f"{name}: data file {url}"
        data = _read(url, cfg, shown)
        yield from parse_manifest(io.BytesIO(data), shown, root, columns, seen)


def _read(location: str, cfg: CopyConfiguration, name: str) -> bytes:
    """The list's bytes: stdin for ``-``, else the file (a URL: with the source's options).

    Read whole: stdin can be read only once, and Parquet needs to seek. The bytes of a
    list are far fewer than the per-file records planning keeps anyway."""
    if location == "-":
        return sys.stdin.buffer.read()
    try:
        options = dict(cfg.src_options) if "://" in location else {}
        with storage_for(location, options).open_read(location) as f:
            data: bytes = f.read()
            return data
    except FileNotFoundError:
        raise ConfigurationError(f"{name}: no such file") from None
    except OSError as exc:
        raise ConfigurationError(f"cannot read {name}: {exc.strerror or exc}") from None


def files_from_entries(tree: Tree, entries: Iterable[FilesFromEntry],
                       cfg: CopyConfiguration, skipped: list[fsutil.Skipped]
                       ) -> Iterator[tuple[str, FileStatus]]:
    """``(path, FileStatus)`` of each listed file the source has, in list order.

    What the list cannot vouch for is asked of the source: serially on a local disk
    (a stat is microseconds), by a pool of the storage's width elsewhere. Entries the
    source lacks, directories and links left out by ``--links`` go to ``skipped``."""
    name = list_flag(cfg) or "the list"
    prefix = tree.path.rstrip("/")
    caps = tree.storage.capabilities
    workers = 1 if caps.local_paths else max(1, caps.parallel_ops)
    with ThreadPoolExecutor(workers) as pool:
        for chunk in _chunks(entries, CHUNK):
            if any(fsutil.at_state_dir(e.path) for e in chunk):
                skipped.extend(fsutil.Skipped(tree.url_of(f"{prefix}/{e.path}"),
                                              fsutil.STATE_DIR_SKIPPED)
                               for e in chunk if fsutil.at_state_dir(e.path))
                chunk = [e for e in chunk if not fsutil.at_state_dir(e.path)]
            paths = [f"{prefix}/{e.path}" for e in chunk]
            found = pool.map(lambda pe: _status(tree, pe[0], pe[1], cfg.links, name),
                             zip(paths, chunk, strict=True))
            for path, (status, problem) in zip(paths, found, strict=True):
                if problem is not None:
                    skipped.append(problem)
                elif status is not None:
                    yield path, status


def _chunks(items: Iterable[FilesFromEntry], size: int) -> Iterator[list[FilesFromEntry]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _status(tree: Tree, path: str, entry: FilesFromEntry, links: str, name: str
            ) -> tuple[FileStatus | None, fsutil.Skipped | None]:
    """The entry's FileStatus, or why it is not copied. No request when the list knows."""
    url = tree.url_of(path)
    if entry.known:
        assert entry.size is not None and entry.mtime is not None
        return FileStatus(url, entry.size, entry.mtime, etag=entry.etag), None
    try:
        status = tree.storage.stat(url)
    except FileNotFoundError:
        return None, fsutil.Skipped(url, f"not found at the source (listed in {name}, "
                                    f"{entry.where})", True)
    except OSError as exc:
        return None, fsutil.Skipped(url, f"cannot read ({exc.strerror or exc}; listed in "
                                    f"{name}, {entry.where})", True)
    if status.is_dir:
        return None, fsutil.Skipped(url, f"a directory (listed in {name}, {entry.where}): "
                                    "a list names files, one per line", True)
    if links != "follow" and tree.storage.is_link(url):
        return _link(path, url, links)
    return status, None


def _link(path: str, url: str, links: str) -> tuple[FileStatus | None, fsutil.Skipped | None]:
    """A listed symbolic link, as a walk treats one: skipped, or copied as a link."""
    if links == "skip":
        return None, fsutil.Skipped(url, "symbolic link (--links skip)")
    problems: list[fsutil.Skipped] = []
    status = fsutil.link_status(path, problems)  # the walk's own reading of a link
    return status, (problems[0] if problems else None)

