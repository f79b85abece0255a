"""Listing a tree in pieces: one subtree or key range per task (driver and executor).

``filesystems.walk`` lists a whole tree in one process. Here the same listing is cut
into ``ListingTask`` values that executors run (``run_task``), plus the one-level
steps the driver takes at the top (``local_level``, ``open_subtree``, ``first_keys``).
Every entry, and every entry *not* copied with its reason, comes out exactly as the
walk gives it: the local steps reuse the walk's own per-entry functions, and a key
range rebuilds the entries s3fs's ``find(withdirs=True)`` would (a directory per key
prefix, emitted by exactly one range) so that no shuffle is needed to deduplicate.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from distcp.model import FileStatus
from distcp.names import from_utf8, to_utf8
from distcp.storage import filesystems as fsutil
from distcp.storage.filesystems import Skipped

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

S = TypeVar("S")

#: Columns of a listing row: the walk's (path, FileStatus), or a Skipped entry
#: (``skipped`` holds its reason). Spark DDL types; ``ARROW`` below mirrors them.
ROW_COLUMNS = (("path", "string"), ("url", "string"), ("size", "long"), ("mtime", "double"),
               ("mtime_ns", "long"), ("mode", "int"), ("owner", "string"),
               ("group", "string"), ("is_dir", "boolean"), ("etag", "string"),
               ("link_target", "string"), ("skipped", "string"), ("failure", "boolean"))
ROW_SCHEMA = ", ".join(f"`{name}` {kind}" for name, kind in ROW_COLUMNS)

#: Greater than any character of a key (``distcp.planning.listsplit.HIGH``).
HIGH = "\U0010ffff"

#: Rows per Arrow batch a task yields (bounded memory per task, whatever the tree).
BATCH_ROWS = 10_000

TREE = "tree"
KEYS = "keys"


@dataclass(frozen=True, slots=True)
class ListingTask:
    """One executor's share of a listing. ``root`` is the dataset's root path (entries
    are relative to it); ``start`` the subtree (``tree``) or nothing (``keys``)."""

    kind: str
    url: str
    root: str
    links: str = "follow"
    start: str | None = None
    ancestors: tuple[tuple[int, int], ...] = ()
    after: str | None = None
    upto: str | None = None
    #: The prefix nearly all keys of the range share (``listsplit.KeyRange.stem``).
    stem: str | None = None
    #: Keys per ListObjectsV2 page (S3's maximum by default).
    page: int = 1000
    #: Storage options; secrets inside, so never shown.
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: The client's task variables (AWS credentials...): workers have their own
    #: environment on a cluster or a warm engine (``distcp.copying.taskenv``).
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    def holds(self, key: str) -> bool:
        return (self.after is None or key > self.after) and \
            (self.upto is None or key <= self.upto)


def listing_kind(fs: AbstractFileSystem) -> str | None:
    """How a filesystem's listing can be cut: by subtree (local directories), by key
    range (an S3 API without versions), or not at all (None: the driver walks it)."""
    if fsutil.is_local(fs):
        return TREE
    if callable(getattr(fs, "call_s3", None)) and not getattr(fs, "version_aware", False):
        return KEYS
    return None


def sort_key(kind: str, path: str) -> str:
    """The walk's order: depth first by name for trees ('/' sorts before any character
    of a name), plain key order for object stores."""
    return path.replace("/", "\x00") if kind == TREE else path


# --- local trees -------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Subtree:
    """A directory below the root, not yet listed, with the walk's state at it."""

    path: str
    status: FileStatus
    ancestors: tuple[tuple[int, int], ...]


def local_level(path: str, links: str, skipped: list[Skipped],
                ancestors: frozenset[tuple[int, int]], top: bool = False
                ) -> list[tuple[str, FileStatus] | Subtree] | None:
    """One directory's entries as ``walk_local`` treats them, except that a directory
    is not descended into but returned as a ``Subtree``; None (reported) when the
    directory cannot be listed: the walk then yields neither it nor anything below.
    ``top``: the tree's root, whose state directory is left out (and named)."""
    entries = fsutil.scandir_entries(path, skipped)
    if top:
        entries = fsutil.top_entries(entries, skipped)
    if entries is None:
        return None
    out: list[tuple[str, FileStatus] | Subtree] = []
    for entry in entries:
        if links == "copy" and entry.is_symlink():
            link = fsutil.link_status(entry.path, skipped)
            if link is not None:
                out.append((entry.path, link))
            continue
        st = fsutil.entry_stat(entry, links, skipped)
        if st is not None:
            out.extend(_classified(entry.path, st, skipped, ancestors))
    return out


def _classified(path: str, st: os.stat_result, skipped: list[Skipped],
                ancestors: frozenset[tuple[int, int]]
                ) -> list[tuple[str, FileStatus] | Subtree]:
    kind = fsutil.special_kind(st.st_mode)
    if kind:
        skipped.append(Skipped(path, f"special file ({kind})"))
        return []
    if not stat.S_ISDIR(st.st_mode):
        return [(path, fsutil.local_status(path, st))]
    key = (st.st_dev, st.st_ino)
    if key in ancestors:
        skipped.append(Skipped(path, "symbolic link loop (points to a directory above it)",
                               True))
        return []
    return [Subtree(path, fsutil.local_status(path, st), tuple(sorted(ancestors | {key})))]


def _tree_entries(task: ListingTask, skipped: list[Skipped]
                  ) -> Iterator[tuple[str, FileStatus]]:
    return tree_entries(task, skipped, fsutil.file_status)


def tree_entries(task: ListingTask, skipped: list[Skipped],
                 files: Callable[[str, os.stat_result], S | None]
                 ) -> Iterator[tuple[str, FileStatus | S]]:
    """The subtree's entries, its own first; a regular file's value made by ``files``
    (``fsutil.walk_local``)."""
    assert task.start is not None
    children = fsutil.scandir_entries(task.start, skipped)
    if children is None:
        return
    yield task.start, fsutil.local_status(task.start, os.stat(task.start))
    yield from fsutil.walk_local(children, task.links, skipped, frozenset(task.ancestors),
                                 files)


# --- object stores -----------------------------------------------------------------

def _bucket_key(fs: AbstractFileSystem, root: str) -> tuple[str, str]:
    bucket, key, _ = fs.split_path(root)
    return bucket, (key.strip("/") + "/") if key.strip("/") else ""


def list_page(fs: AbstractFileSystem, root: str, after: str | None = None,
              max_keys: int = 1000, prefix: str | None = None) -> dict[str, Any]:
    """One ListObjectsV2 page of the keys under ``root`` (or ``prefix``) after ``after``."""
    bucket, stem = _bucket_key(fs, root)
    from distcp.storage.s3 import listing as s3list

    lean = s3list.list_page(fs, bucket, stem if prefix is None else prefix, after, max_keys)
    if lean is not None:
        return lean
    kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": stem if prefix is None else prefix,
                              "MaxKeys": max_keys}
    if after is not None:
        kwargs["StartAfter"] = after
    out: dict[str, Any] = fs.call_s3("list_objects_v2", **kwargs)
    return out


def _key_infos(fs: AbstractFileSystem, task: ListingTask) -> Iterator[dict[str, Any]]:
    """The objects of the task's range, as s3fs's listing gives them, in key order.

    With a stem, the range is listed as ``Prefix=stem`` (the server stops where the
    stem's keys stop: no page read past the range) plus, on each side, the keys of the
    range outside the stem, found with one small request each (normally none).
    """
    _, base = _bucket_key(fs, task.root)
    stem = task.stem
    if stem is None:
        yield from _scan(fs, task, base, task.after, task.upto)
        return
    head = list_page(fs, task.root, task.after, 1).get("Contents", [])
    if head and head[0]["Key"] < stem and task.holds(head[0]["Key"]):
        yield from _scan(fs, task, base, task.after, task.upto, before=stem)
    inside = task.after if task.after is not None and task.after > stem else None
    yield from _scan(fs, task, stem, inside, task.upto)
    if task.upto is None or task.upto > stem + HIGH:
        yield from _scan(fs, task, base, stem + HIGH, task.upto)


def scan_keys(fs: AbstractFileSystem, task: ListingTask, prefix: str, after: str | None
              ) -> Iterator[dict[str, Any]]:
    """The objects under ``prefix`` after the key ``after``, paged, in key order, as
    s3fs's listing gives them (``ObjectStorage.walk_after``)."""
    return _scan(fs, task, prefix, after, None)


def _scan(fs: AbstractFileSystem, task: ListingTask, prefix: str, after: str | None,
          upto: str | None, before: str | None = None) -> Iterator[dict[str, Any]]:
    """Keys under ``prefix`` with ``after < key <= upto`` (and ``< before``), paged."""
    bucket, _ = _bucket_key(fs, task.root)

    def beyond(key: str) -> bool:
        return (upto is not None and key > upto) or (bool(before) and key >= str(before))

    from distcp.storage.s3 import listing as s3list

    pages = s3list.page_stream(fs, bucket, prefix, after, task.page, beyond) or \
        _pages(fs, task, prefix, after)
    for page in pages:
        contents = page.get("Contents", [])
        for c in contents:
            if beyond(c["Key"]):
                return
            info = dict(c, type="file", size=c["Size"])
            info["name"] = info["Key"] = f"{bucket}/{c['Key']}"
            yield info
        if not page.get("IsTruncated") or not contents:
            return


def _pages(fs: AbstractFileSystem, task: ListingTask, prefix: str, after: str | None
           ) -> Iterator[dict[str, Any]]:
    """The pages s3fs's client lists, one request after another."""
    while True:
        page = list_page(fs, task.root, after, task.page, prefix=prefix)
        yield page
        contents = page.get("Contents", [])
        if not page.get("IsTruncated") or not contents:
            return
        after = contents[-1]["Key"]


def _has_keys_under(fs: AbstractFileSystem, task: ListingTask, prefix: str,
                    upto: str | None = None) -> bool:
    """Whether a key starts with ``prefix`` (and is at most ``upto``): one request."""
    contents = list_page(fs, task.root, None, 1, prefix=prefix).get("Contents", [])
    return bool(contents) and (upto is None or contents[0]["Key"] <= upto)


def _key_entries(fs: AbstractFileSystem, task: ListingTask, skipped: list[Skipped]
                 ) -> Iterator[tuple[str, dict[str, Any]]]:
    """The walk's (path, info) pairs of one key range, directories included, unsorted.

    A directory (a key prefix) is emitted by the range holding its first key, so each
    comes out once over all ranges; an object whose key is also a prefix of others is
    reported as ``walk`` reports it, whichever range those others fall in.
    """
    bucket, _ = _bucket_key(fs, task.root)
    root = fs._strip_protocol(task.root).rstrip("/")
    dirs: set[str] = set()
    objects: list[dict[str, Any]] = []
    for info in _key_infos(fs, task):
        objects.append(info)
        par = info["name"].rsplit("/", 1)[0]
        while "/" in par and len(par) > len(root) and par not in dirs:
            dirs.add(par)
            if _owns(fs, task, par[len(bucket) + 1:] + "/"):
                yield par, {"name": par, "Key": par, "type": "directory", "size": 0,
                            "Size": 0, "StorageClass": "DIRECTORY"}
            par = par.rsplit("/", 1)[0]
    for info in objects:
        name = info["name"]
        if not name.endswith("/") and (name in dirs or _shadowed_beyond(fs, task, name)):
            skipped.append(Skipped(fsutil.to_url(fs, name), "object key is also the prefix "
                                   "of other keys (a file and a directory of one name)", True))
            continue
        yield name, info


def _owns(fs: AbstractFileSystem, task: ListingTask, prefix: str) -> bool:
    """Whether this range holds the first key under ``prefix`` (it holds one of them)."""
    if task.after is None or task.after < prefix:
        return True
    return not _has_keys_under(fs, task, prefix, upto=task.after)


def _shadowed_beyond(fs: AbstractFileSystem, task: ListingTask, name: str) -> bool:
    """Whether keys under ``name + '/'`` lie after this range (only when the range's
    upper bound falls among them or just before them: rare, one request)."""
    if task.upto is None:
        return False
    prefix = name.split("/", 1)[1] + "/"
    if task.upto >= prefix and not task.upto.startswith(prefix):
        return False  # the whole prefix is inside this range: seen already
    return _has_keys_under(fs, task, prefix)


def _object_rows(fs: AbstractFileSystem, task: ListingTask, skipped: list[Skipped]
                 ) -> Iterator[tuple[str, FileStatus]]:
    """``walk``'s filtering of find's entries, on one range."""
    root = fs._strip_protocol(task.root).rstrip("/")
    for path, info in _key_entries(fs, task, skipped):
        if path.endswith("/") and info.get("type") == "file" and info.get("size"):
            skipped.append(Skipped(fsutil.to_url(fs, path), f"object key ends with '/' and "
                                   f"holds {info['size']} bytes: no file can have that name",
                                   True))
            continue
        rel = fsutil.relpath(path.rstrip("/"), root)
        if rel == fsutil.STATE_DIR_NAME:
            skipped.append(Skipped(fsutil.to_url(fs, path.rstrip("/")), fsutil.STATE_DIR_SKIPPED))
        if rel and not fsutil.at_state_dir(rel):
            yield path.rstrip("/"), fsutil.status(fs, info)


# --- the executor's side -----------------------------------------------------------

def task_entries(task: ListingTask, skipped: list[Skipped]
                 ) -> Iterator[tuple[str, FileStatus]]:
    """The (path, FileStatus) pairs of one task; what is not copied goes to ``skipped``."""
    if task.kind == TREE:  # a local walk needs no filesystem object (10 µs to find)
        return _tree_entries(task, skipped)
    fs, _ = fsutil.filesystem(task.url, task.options)
    return _object_rows(fs, task, skipped)


def row_of(path: str, st: FileStatus) -> dict[str, Any]:
    """A listing row: its names in a UTF-8 column's form (``distcp.names.to_utf8``),
    as Arrow and Spark strings must hold them; ``entry_of`` reads them back."""
    return {"path": to_utf8(path), "url": to_utf8(st.url), "size": st.size,
            "mtime": st.mtime, "mtime_ns": st.mtime_ns, "mode": st.mode, "owner": st.owner,
            "group": st.group, "is_dir": st.is_dir, "etag": st.etag,
            "link_target": None if st.link_target is None else to_utf8(st.link_target),
            "skipped": None, "failure": None}


def skipped_row(s: Skipped) -> dict[str, Any]:
    path = to_utf8(s.path)
    return {"path": path, "url": path, "skipped": to_utf8(s.reason), "failure": s.failure}


def run_task(task: ListingTask) -> Iterator[list[dict[str, Any]]]:
    """Rows of one task in batches of at most ``BATCH_ROWS``; skipped entries last."""
    skipped: list[Skipped] = []
    batch: list[dict[str, Any]] = []
    for path, st in task_entries(task, skipped):
        batch.append(row_of(path, st))
        if len(batch) >= BATCH_ROWS:
            yield batch
            batch = []
    batch.extend(skipped_row(s) for s in skipped)
    if batch:
        yield batch


def arrow_schema() -> Any:
    import pyarrow as pa

    kinds = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(),
             "int": pa.int32(), "boolean": pa.bool_()}
    return pa.schema([(name, kinds[kind]) for name, kind in ROW_COLUMNS])


def arrow_batches(task: ListingTask) -> Iterator[Any]:
    """``run_task`` as Arrow record batches of ``ROW_SCHEMA`` (the executor's output)."""
    import pyarrow as pa

    schema = arrow_schema()
    for rows in run_task(task):
        yield pa.RecordBatch.from_pylist(rows, schema=schema)


def entry_of(row: Mapping[str, Any]) -> tuple[str, FileStatus] | Skipped:
    """A listing row back to the walk's value (driver side, until planning is a join)."""
    if row["skipped"] is not None:
        return Skipped(from_utf8(row["path"]), from_utf8(row["skipped"]), bool(row["failure"]))
    link = row["link_target"]
    return from_utf8(row["path"]), FileStatus(
        url=from_utf8(row["url"]), size=row["size"], mtime=row["mtime"], mode=row["mode"],
        owner=row["owner"], group=row["group"], is_dir=row["is_dir"],
        mtime_ns=row["mtime_ns"], etag=row["etag"],
        link_target=None if link is None else from_utf8(link))
