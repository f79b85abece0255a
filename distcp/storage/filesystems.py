"""fsspec glue: URLs to filesystems, listings to FileStatus (driver and executor).

Work units carry URLs and storage options, never filesystem objects (those do
not survive pickling to executors); fsspec caches instances per process, so
rebuilding one per call is cheap, but not free: per-file calls ask a storage, which
keeps one per root of URLs (``Filesystems``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import inspect
import operator
import os
import posixpath
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload
from urllib.parse import quote

from distcp.model import FileStatus
from distcp.storage import writes
from distcp.storage.keptmtimes import kept_mtime

if TYPE_CHECKING:  # fsspec is imported by the runs that use it (``LocalPaths``)
    from fsspec import AbstractFileSystem

S = TypeVar("S")

#: Our own classes for some protocols, used for the filesystems pydistcp opens and never
#: registered into fsspec (that would change ``fsspec.filesystem("ftp")`` for the whole
#: process of a user who imports us); "module:Class", imported on first use.
_OWN_CLASSES = {"ftp": "distcp.storage.fsspec.ftp:ListingFTPFileSystem"}

#: Name of the hidden directory that holds staging, state and logs under a
#: destination; Hadoop, Spark and Hive readers skip names starting with "." or "_".
STATE_DIR_NAME = ".pydistcp"
#: Why a tree's top-level entry of that name is not copied: at a destination's root it
#: is the state directory, and no byte of data may land there.
STATE_DIR_SKIPPED = (f"not copied: a top-level {STATE_DIR_NAME} is where the destination "
                     "keeps its state (one at any other depth is copied)")


def at_state_dir(rel: str) -> bool:
    """Whether ``rel`` (relative to a tree's root) is its top-level state directory or
    below it: only there does a tree's state live; deeper entries of that name are data."""
    return rel == STATE_DIR_NAME or rel.startswith(STATE_DIR_NAME + "/")


def top_entries(entries: list[os.DirEntry[str]] | None, skipped: list[Skipped] | None
                ) -> list[os.DirEntry[str]] | None:
    """A tree root's entries less its state directory, which is named in ``skipped``."""
    if entries is None or not any(e.name == STATE_DIR_NAME for e in entries):
        return entries
    if skipped is not None:
        skipped.extend(Skipped(e.path, STATE_DIR_SKIPPED) for e in entries
                       if e.name == STATE_DIR_NAME)
    return [e for e in entries if e.name != STATE_DIR_NAME]

_SECRET_HINTS = ("secret", "password", "token", "passphrase", "session", "key")


class LocalPaths:
    """fsspec's local filesystem, made at its first use: what ``filesystem`` gives for a
    plain local path. Importing fsspec costs ~0.06 s (it brings asyncio and
    importlib.metadata), a tenth of a small local run, which asks a filesystem of its
    paths only for their spelling (``_local_path``, fsspec's own rule for POSIX paths);
    the local storage does its work with ``os`` calls. Anything else asked of it is
    asked of fsspec's ``LocalFileSystem``."""

    def __init__(self) -> None:
        #: What ``Tree.holds`` compares: a local path takes no options.
        self.storage_options: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        from fsspec.implementations.local import LocalFileSystem

        return getattr(LocalFileSystem(), name)

    def __reduce__(self) -> tuple[Any, ...]:
        return LocalPaths, ()

    def __repr__(self) -> str:
        return "LocalPaths()"


_LOCAL = LocalPaths()


def _local_path(url: str) -> str | None:
    """A plain POSIX path as fsspec's ``LocalFileSystem`` spells it (absolute, ``~``
    expanded, no trailing slash), or None for anything else, which fsspec itself
    resolves: another OS, or any ``:`` (a URL, a chain, ``data:`` and its kin)."""
    if os.sep != "/" or ":" in url:
        return None
    if url.startswith("~"):
        url = os.path.expanduser(url)
    elif not url.startswith("/"):
        rel = "" if url == "." else url.removeprefix("./")
        url = f"{os.getcwd()}/{rel}"
    return url.rstrip("/") or "/"


def filesystem(url: str, options: Mapping[str, Any] | None = None) -> tuple[AbstractFileSystem, str]:
    """The filesystem for ``url`` and the path inside it.

    On filesystems whose paths drop the server (``ftp://user@host:port/path``),
    host, port and user from the URL are storage options; ``options`` win.
    """
    options = writes.for_fsspec(url, options)  # ours, not the filesystem's (storage.writes)
    path = None if options else _local_path(url)
    if path is not None:
        return cast("AbstractFileSystem", _LOCAL), path
    import fsspec

    if url.split("://", 1)[0] in ("s3", "s3a"):
        from distcp.storage.s3 import ops as s3

        options = s3.bounded_options(options)  # every request bounded: see s3.py
    typed = typed_options(url, options or {})
    keys = _url_keys(_protocol(url))
    if keys:
        url, typed = _fold_server(url, typed, keys)
    own = _OWN_CLASSES.get(_protocol(url))
    if own is None:
        fs, path = fsspec.core.url_to_fs(url, **typed)
        return fs, path
    cls = filesystem_class(_protocol(url))
    fs = cls(**{**cls._get_kwargs_from_urls(url), **typed})
    return fs, cls._strip_protocol(url)


class Filesystems:
    """One storage's filesystems, by the root of the URLs they serve.

    ``filesystem`` resolves a URL through fsspec each time (its chain, the instance
    cache's token of the options, the class's URL arguments): ~50 µs, twice per small
    file of an upload, where the request itself costs the client ~0.4 ms
    (benchmarks/RESULTS.md, 2026-11-30). Files under one root (``scheme://netloc``)
    share the filesystem; only their path differs, and that is the class's own spelling
    of the URL. A root is kept only where that spelling gave the path ``filesystem``
    gave (a protocol whose server moves into the options, a chain, a query or a
    fragment are resolved every time), only for a filesystem fsspec shares between
    threads (an async one: a blocking one is made per thread), and only while fsspec
    still holds that instance: cleared there (new credentials, a forked process), it
    is resolved again here."""

    __slots__ = ("_roots",)

    def __init__(self) -> None:
        self._roots: dict[str, AbstractFileSystem] = {}

    def __reduce__(self) -> tuple[Any, ...]:
        return Filesystems, ()  # filesystems are rebuilt where they are used

    def resolve(self, url: str, options: Mapping[str, Any]) -> tuple[AbstractFileSystem, str]:
        """What ``filesystem(url, options)`` gives."""
        root = _root(url)
        fs = self._roots.get(root) if root is not None else None
        if fs is not None and shared(fs):
            return fs, type(fs)._strip_protocol(url)
        fs, path = filesystem(url, options)
        if root is not None and shared(fs) and type(fs)._strip_protocol(url) == path:
            self._roots[root] = fs
        return fs, path


def shared(fs: AbstractFileSystem) -> bool:
    """Whether fsspec's instance cache holds ``fs`` for every thread of this process: a
    filesystem remembered past that (new credentials in the environment, a forked
    process, ``forget_environment_clients``) is resolved again."""
    cls = type(fs)
    return bool(getattr(cls, "async_impl", False)) and \
        getattr(cls, "_cache", {}).get(getattr(fs, "_fs_token_", None)) is fs


def _root(url: str) -> str | None:
    """``scheme://netloc`` of a URL whose filesystem depends on no more than that, and
    on the storage's options; None for a plain path, a chain, a query or a fragment,
    and the protocols whose paths drop the server (``_url_keys``)."""
    protocol = _protocol(url)
    if not protocol or "?" in url or "#" in url or _url_keys(protocol):
        return None
    return f"{protocol}://{url[len(protocol) + 3:].partition('/')[0]}"


def filesystem_class(protocol: str) -> type[AbstractFileSystem]:
    """The class pydistcp uses for ``protocol``: ours where we have one, else fsspec's."""
    own = _OWN_CLASSES.get(protocol)
    if own is None:
        import fsspec

        cls: type[AbstractFileSystem] = fsspec.get_filesystem_class(protocol)
        return cls
    module, _, name = own.partition(":")
    ours: type[AbstractFileSystem] = getattr(importlib.import_module(module), name)
    return ours


def _protocol(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url and "::" not in url else ""


def _fold_server(url: str, options: dict[str, Any], keys: dict[str, str]
                 ) -> tuple[str, dict[str, Any]]:
    """``proto://[user@]host[:port]/p`` -> (``proto:///p``, options with host, port and
    user filled in where not given). fsspec would pass both the URL's and the given
    value of a key to the constructor, which fails when they differ."""
    protocol = _protocol(url)
    cls = filesystem_class(protocol)
    refuse_password_in_url(url)
    from_url = cls._get_kwargs_from_urls(url)
    merged = {**{k: from_url[k] for k in keys.values() if from_url.get(k) not in (None, "")},
              **options}
    return f"{protocol}://{cls._strip_protocol(url)}", merged


def refuse_password_in_url(url: str) -> None:
    """A password in a URL would sit in argv, logs and state: refuse it, unshown."""
    from urllib.parse import urlsplit

    try:
        password = urlsplit(url).password if "://" in url else None
    except ValueError:
        password = None
    if password:
        from distcp.errors import ConfigurationError

        protocol = url.split("://", 1)[0]
        raise ConfigurationError(
            f"a {protocol}:// URL with a password in it is refused (it would show in process "
            "lists, logs and state); put password=... in --src-options-file or "
            "--dst-options-file instead")


@functools.lru_cache(maxsize=64)
def _url_keys(protocol: str) -> dict[str, str]:
    """For a protocol whose paths drop the server part of URLs (ftp, sftp, hdfs...):
    which storage options hold ``user``, ``host`` and ``port``; else empty.

    Found by probing fsspec's own ``_strip_protocol`` and ``_get_kwargs_from_urls``.
    """
    if not protocol or protocol in ("s3", "s3a", "file", "local"):
        return {}
    probe = f"{protocol}://pydistcpuser@pydistcp.invalid:4321/x"
    try:
        cls = filesystem_class(protocol)
        path = cls._strip_protocol(probe)
        kwargs = cls._get_kwargs_from_urls(probe)
    except Exception:  # noqa: BLE001 - not installed, or no such parsing: no folding
        return {}
    if "pydistcp.invalid" in str(path):
        return {}
    wanted = {"user": "pydistcpuser", "host": "pydistcp.invalid", "port": 4321}
    keys = {part: k for part, value in wanted.items() for k, v in kwargs.items()
            if v == value or v == str(value)}
    return keys if "host" in keys else {}


def typed_options(url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with strings turned into the numbers and booleans the filesystem's
    constructor defaults to: ``--dst-option port=2121`` arrives as a string, and
    ftplib (like most clients) compares ports as ints."""
    kinds = _option_kinds(url.split("://", 1)[0] if "://" in url and "::" not in url else "")
    out = dict(options)
    for key, value in out.items():
        kind = kinds.get(key)
        if kind is None or not isinstance(value, str):
            continue
        if kind is bool:
            if value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                out[key] = value.lower() in ("1", "true", "yes", "on")
            continue
        try:
            out[key] = kind(value)
        except ValueError:
            pass  # left as given: the filesystem's own error names it
    return out


@functools.lru_cache(maxsize=64)
def _option_kinds(protocol: str) -> dict[str, type]:
    """name -> bool/int/float for the constructor parameters with such defaults."""
    if not protocol:
        return {}
    try:
        cls = filesystem_class(protocol)
        params = inspect.signature(cls.__init__).parameters.values()
    except (ImportError, ValueError, TypeError):
        return {}
    return {p.name: type(p.default) for p in params
            if type(p.default) in (bool, int, float)}


def is_local(fs: AbstractFileSystem) -> bool:
    if isinstance(fs, LocalPaths):
        return True
    local = sys.modules.get("fsspec.implementations.local")  # none made unless imported
    return local is not None and isinstance(fs, local.LocalFileSystem)


def same_filesystem(a: AbstractFileSystem, b: AbstractFileSystem) -> bool:
    """Whether two filesystems reach the same entries: this machine's for any two local
    ones (a plain path's ``LocalPaths`` and a ``file://`` URL's fsspec filesystem alike),
    else the same class with the same options."""
    if is_local(a) or is_local(b):
        return is_local(a) and is_local(b)
    return type(a) is type(b) and a.storage_options == b.storage_options


def holds_symlinks(fs: AbstractFileSystem) -> bool:
    """Whether ``fs`` can hold a symbolic link as a link (``--links copy``).

    A capability of the storage, asked before anything runs. Only local disks say
    yes: staging a link and verifying it needs ``symlink`` and ``readlink``, which
    fsspec offers nowhere else (object stores have no links at all; SFTP and HDFS
    have them, but not through an fsspec API we could verify with).
    """
    return is_local(fs)


def entry_size(fs: AbstractFileSystem, path: str) -> int:
    """The size of the entry itself: for a symbolic link on a local disk, the length
    of its target text (what ``lstat`` says), never the size of what it points to.
    Used to tell whether a staged or published copy is intact."""
    if is_local(fs):
        return os.lstat(path.removeprefix("file://")).st_size
    return int(fs.size(path))


def local_path(url: str) -> str | None:
    """The plain path of a local URL, else None; a string check, for per-file hot paths
    where resolving a filesystem through fsspec would cost more than the copy."""
    if url.startswith("file://"):
        return url[len("file://"):]
    return None if "://" in url or "::" in url else url


def os_path(url: str) -> str:
    """The plain path of a URL known to be local (what ``os`` calls take)."""
    return url.removeprefix("file://")


def to_url(fs: AbstractFileSystem, path: str) -> str:
    """A URL that ``filesystem`` maps back to ``fs``; local paths stay plain paths.

    Where paths drop the server (FTP, SFTP...), the URL names it again
    (``ftp://user@host:port/path``, never a password), so state, staging and
    listings reach the same server whichever way the user gave it.
    """
    if is_local(fs):
        return path
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    keys = _url_keys(protocol)
    host = fs.storage_options.get(keys["host"]) if keys else None
    if not host:
        return str(fs.unstrip_protocol(path))
    netloc = f"[{host}]" if ":" in str(host) else str(host)
    user = fs.storage_options.get(keys.get("user", ""))
    port = fs.storage_options.get(keys.get("port", ""))
    if user:
        netloc = f"{quote(str(user), safe='')}@{netloc}"
    if port not in (None, ""):
        netloc = f"{netloc}:{port}"
    return f"{protocol}://{netloc}/{path.lstrip('/')}"


def display(url: str) -> str:
    """A URL as users typed it: without the ``file://`` prefix fsspec adds."""
    return url.removeprefix("file://")


def join(base: str, *parts: str) -> str:
    if len(parts) == 1 and parts[0] and parts[0][0] != "/":  # asked once per file listed
        return f"{base}{parts[0]}" if not base or base[-1] == "/" else f"{base}/{parts[0]}"
    return posixpath.join(base, *parts) if parts else base


def relpath(path: str, root: str) -> str:
    root = root.rstrip("/")
    if path == root:
        return ""
    if not path.startswith(root + "/"):
        raise ValueError(f"{path} is not under {root}")
    return path[len(root) + 1:]


def status(fs: AbstractFileSystem, info: Mapping[str, Any]) -> FileStatus:
    """A FileStatus from an fsspec ``info``/``find(detail=True)`` entry."""
    if is_local(fs):
        return local_status(info["name"])
    return info_status(fs, info)


def info_status(fs: AbstractFileSystem, info: Mapping[str, Any]) -> FileStatus:
    """A FileStatus from what the ``info`` entry itself says, nothing asked again (a
    local entry is not stat'ed anew: a link is what the listing said of it)."""
    mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0.0
    if not mtime and isinstance(info.get("modify"), str):
        mtime = _mlsd_time(info["modify"])  # FTP's MLSD fact
    if not isinstance(mtime, (int, float)):
        mtime = mtime.timestamp()
    kept = kept_mtime(info.get("metadata"))  # an object's kept mtime wins over its own
    mode = info.get("mode")
    # the version a read can be pinned to: the ETag (s3fs spells it one way, adlfs the
    # other), on GCS the generation (``ifGenerationMatch``; gcsfs gives both)
    etag = info.get("generation") or info.get("ETag") or info.get("etag")
    return FileStatus(
        url=to_url(fs, info["name"]),
        size=int(info.get("size") or 0),
        mtime=float(mtime) if kept is None else kept / 1e9,
        mode=int(mode) & 0o7777 if mode is not None else None,
        owner=_name_of(info.get("uid"), "pwd"),
        group=_name_of(info.get("gid"), "grp"),
        is_dir=info.get("type") == "directory",
        etag=str(etag) if isinstance(etag, (str, int)) and etag else None,
        mtime_ns=kept,
    )


def _mlsd_time(value: str) -> float:
    """``YYYYMMDDHHMMSS[.sss]`` in UTC (RFC 3659) -> epoch seconds; 0.0 if malformed."""
    import calendar
    import time

    whole, _, frac = value.partition(".")
    try:
        return calendar.timegm(time.strptime(whole, "%Y%m%d%H%M%S")) + float(f"0.{frac or 0}")
    except ValueError:
        return 0.0


def walk(fs: AbstractFileSystem, root: str, links: str = "follow",
         skipped: list[Skipped] | None = None, most: int | None = None
         ) -> Iterator[tuple[str, FileStatus]]:
    """Every file and directory below ``root`` (not ``root`` itself), less the tree's
    top-level state directory (named in ``skipped``; one at any other depth is data).

    Local trees are walked with ``os.scandir`` (one stat per entry, exact
    nanosecond mtimes); other filesystems with fsspec's ``find``. Entries that are
    not copied (links by ``links`` policy, dangling links, loops, special files,
    unreadable directories) are appended to ``skipped`` with their reason, so that
    nothing is dropped silently and one bad entry never aborts the walk. With
    ``links="copy"`` every symbolic link (dangling or not) is an entry of its own,
    with its target text in ``link_target``, and is never descended into. ``most``: an
    object-store prefix listed through lean pages with more keys than that raises
    ``s3list.MoreKeys`` before it yields anything.
    """
    if is_local(fs):
        root = root.rstrip("/") or "/"
        top = os.stat(root)
        skipped = [] if skipped is None else skipped
        yield from walk_local(top_entries(scandir_entries(root, skipped), skipped), links,
                              skipped, frozenset({(top.st_dev, top.st_ino)}))
        return
    if _prefix_directories(fs):
        listing = _keys_and_prefixes(fs, root, skipped, most)
    else:
        listing = fs.find(root, withdirs=True, detail=True)
        if skipped is not None and _is_object_store(fs):
            _report_shadowed_keys(fs, root, listing, skipped)
    yield from _entries(fs, root, listing, skipped)


def walk_keys(fs: AbstractFileSystem, root: str, keys: dict[str, Any],
              skipped: list[Skipped] | None = None) -> Iterator[tuple[str, FileStatus]]:
    """``walk`` of an object store from one listing of its keys below ``root``
    (``keys``: fsspec's ``find(detail=True)`` answer, made by the storage's own
    listing): the folders are the keys' prefixes, and a key that is also a prefix is
    reported from the same listing (``with_prefixes``)."""
    yield from _entries(fs, root, with_prefixes(fs, root, keys, skipped), skipped)


def _entries(fs: AbstractFileSystem, root: str, listing: dict[str, Any],
             skipped: list[Skipped] | None) -> Iterator[tuple[str, FileStatus]]:
    """``walk``'s entries of an fsspec ``find(withdirs=True, detail=True)`` answer."""
    for path, info in sorted(listing.items()):
        if path.endswith("/") and info.get("type") == "file" and info.get("size"):
            if skipped is not None:
                skipped.append(Skipped(to_url(fs, path), f"object key ends with '/' and holds "
                                       f"{info['size']} bytes: no file can have that name", True))
            continue
        path = path.rstrip("/")
        rel = relpath(path, root)
        if rel == STATE_DIR_NAME and skipped is not None:
            skipped.append(Skipped(to_url(fs, path), STATE_DIR_SKIPPED))
        if rel and not at_state_dir(rel):
            yield path, status(fs, info)


def _is_object_store(fs: AbstractFileSystem) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool({"s3", "s3a", "gs", "gcs", "abfs", "az"} & set(protocols))


def _prefix_directories(fs: AbstractFileSystem) -> bool:
    """S3's directories are only the prefixes of its keys (s3fs derives them too)."""
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool({"s3", "s3a"} & set(protocols))


def _keys_and_prefixes(fs: AbstractFileSystem, root: str, skipped: list[Skipped] | None,
                       most: int | None = None) -> dict[str, Any]:
    """What ``find(withdirs=True, detail=True)`` answers, from one listing of the keys:
    each key's parent prefixes (down to ``root``) as directories, as s3fs derives them.
    A key that is also the prefix of other keys (``a`` and ``a/b``) is reported and its
    directory kept, as that answer keeps it (no second listing to find such keys:
    listing 100,000 keys once instead of twice takes 9 s instead of 22 s here)."""
    from distcp.storage.s3.listing import find_keys

    keys: dict[str, Any] = find_keys(fs, root, most) or fs.find(root, detail=True)
    return with_prefixes(fs, root, keys, skipped)


def with_prefixes(fs: AbstractFileSystem, root: str, keys: dict[str, Any],
                  skipped: list[Skipped] | None) -> dict[str, Any]:
    """``keys`` (one listing of an object store's keys below ``root``) and each key's
    parent prefixes down to ``root`` as directories; each key that is also a prefix
    named in ``skipped`` (``_keys_and_prefixes``)."""
    top = fs._strip_protocol(root).rstrip("/")
    prefixes: dict[str, Any] = {}
    for name in keys:
        parent = name.rsplit("/", 1)[0]
        while "/" in parent and len(parent) >= len(top) and parent not in prefixes:
            prefixes[parent] = {"Key": parent, "Size": 0, "name": parent,
                                "StorageClass": "DIRECTORY", "type": "directory", "size": 0}
            parent = parent.rsplit("/", 1)[0]
    if skipped is not None:
        skipped.extend(Skipped(to_url(fs, name), "object key is also the prefix of other "
                               "keys (a file and a directory of one name)", True)
                       for name in sorted(keys) if not name.endswith("/") and name in prefixes)
    return {**keys, **prefixes}


def _report_shadowed_keys(fs: AbstractFileSystem, root: str, listing: Mapping[str, Any],
                          skipped: list[Skipped]) -> None:
    """Name each object whose key is also the prefix of other keys (``a`` and ``a/b``).

    fsspec's ``find(withdirs=True)`` keys its answer by path, so the directory ``a``
    silently replaces the object ``a``; a second listing of objects only (one more LIST
    of the tree, object stores only) finds them. No filesystem path can be both a file and
    a directory, so the object is reported and the rest copied.
    """
    for path in fs.find(root):
        if not path.endswith("/") and listing.get(path, {}).get("type") == "directory":
            skipped.append(Skipped(to_url(fs, path), "object key is also the prefix of other "
                                   "keys (a file and a directory of one name)", True))


def local_status(path: str, st: os.stat_result | None = None) -> FileStatus:
    st = st or os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return file_status(path, st)
    return FileStatus(path, 0, st.st_mtime, st.st_mode & 0o7777, _name_of(st.st_uid, "pwd"),
                      _name_of(st.st_gid, "grp"), None, True, st.st_mtime_ns)


def raw_stat(path: str, st: os.stat_result) -> os.stat_result:
    """A regular file's value in a walk that keeps stats (``walk_local``'s ``files``)."""
    return st


def file_status(path: str, st: os.stat_result) -> FileStatus:
    """A file's status from its stat: asked of nearly every entry a walk lists, so its
    arguments go by position (keywords cost a tenth of the call here)."""
    return FileStatus(path, st.st_size, st.st_mtime, st.st_mode & 0o7777,
                      _name_of(st.st_uid, "pwd"), _name_of(st.st_gid, "grp"), None, False,
                      st.st_mtime_ns)


@dataclass(frozen=True)
class Skipped:
    """An entry of a source tree that was not copied, and why.

    ``failure`` is true for what the user did not ask to skip (a dangling link, a
    loop, an unreadable directory): the run then exits 1, as rclone does. ``dataset``:
    the dataset a failure fails, when it is known (a refused table): ``status`` names it.
    """

    path: str
    reason: str
    failure: bool = False
    dataset: str = ""


#: File types that are never opened (a FIFO blocks its reader forever).
_SPECIAL = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char device"),
            (stat.S_ISBLK, "block device"))


def special_kind(mode: int) -> str | None:
    """``fifo``, ``socket``, ... for a special file's mode; None for files and directories."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):  # nearly every entry: asked of each one
        return None
    return next((name for test, name in _SPECIAL if test(mode)), None)


_NAME = operator.attrgetter("name")


def scandir_entries(path: str, skipped: list[Skipped]) -> list[os.DirEntry[str]] | None:
    """The directory's entries by name; None (and reported) when it cannot be listed."""
    try:
        with os.scandir(path) as it:
            return sorted(it, key=_NAME)
    except OSError as exc:
        skipped.append(Skipped(path, f"unreadable directory ({exc.strerror})", True))
        return None


@overload
def walk_local(entries: list[os.DirEntry[str]] | None, links: str, skipped: list[Skipped],
               ancestors: frozenset[tuple[int, int]]) -> Iterator[tuple[str, FileStatus]]: ...


@overload
def walk_local(entries: list[os.DirEntry[str]] | None, links: str, skipped: list[Skipped],
               ancestors: frozenset[tuple[int, int]],
               files: Callable[[str, os.stat_result], S | None]
               ) -> Iterator[tuple[str, FileStatus | S]]: ...


def walk_local(entries: list[os.DirEntry[str]] | None, links: str, skipped: list[Skipped],
               ancestors: frozenset[tuple[int, int]],
               files: Callable[[str, os.stat_result], Any] = file_status
               ) -> Iterator[tuple[str, Any]]:
    """``ancestors``: (st_dev, st_ino) of the directories on the walk path, so that a
    followed link back to one of them is reported as a loop instead of recursing. A
    directory that cannot be listed is reported, not created empty at the destination.

    ``files`` makes a regular file's value from its stat (``file_status``; ``raw_stat``
    keeps the stat itself for a planner that compares it before anything is made of it);
    a file it gives None for is not yielded (a planner that accounts for it there: a
    no-op rerun's walk counts 300,000 unchanged files without a pair each).
    """
    for entry in entries or ():
        path = entry.path
        st: os.stat_result | None = None
        if not entry.is_symlink():  # nearly every entry: a file's stat, asked directly
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                pass  # entry_stat below says why
            else:
                if stat.S_ISREG(st.st_mode):
                    value = files(path, st)
                    if value is not None:
                        yield path, value
                    continue
        elif links == "copy":
            link = link_status(path, skipped)
            if link is not None:
                yield path, link
            continue
        st = st or entry_stat(entry, links, skipped)
        if st is None:
            continue
        if stat.S_ISREG(st.st_mode):  # a followed link to a file
            value = files(path, st)
            if value is not None:
                yield path, value
            continue
        kind = special_kind(st.st_mode)
        if kind:
            skipped.append(Skipped(path, f"special file ({kind})"))
            continue
        if stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in ancestors:
                skipped.append(Skipped(path, "symbolic link loop (points to a directory "
                                             "above it)", True))
                continue
            children = scandir_entries(path, skipped)
            if children is not None:
                yield path, local_status(path, st)
                yield from walk_local(children, links, skipped, ancestors | {key}, files)
        else:
            yield path, local_status(path, st)


def link_status(path: str, skipped: list[Skipped]) -> FileStatus | None:
    """A symbolic link as itself: lstat's size (its target text's length), mtime and
    owner, and the target text; None (and reported) when it vanished while listing."""
    try:
        st = os.lstat(path)
        target = os.readlink(path)
    except OSError as exc:
        skipped.append(Skipped(path, f"symbolic link unreadable ({exc.strerror})", True))
        return None
    return FileStatus(url=path, size=st.st_size, mtime=st.st_mtime, mode=None,
                      owner=_name_of(st.st_uid, "pwd"), group=_name_of(st.st_gid, "grp"),
                      mtime_ns=st.st_mtime_ns, link_target=target)


def entry_stat(entry: os.DirEntry[str], links: str,
                skipped: list[Skipped]) -> os.stat_result | None:
    """The entry's stat (its target's for a followed link); None when reported instead."""
    target = None
    try:
        if not entry.is_symlink():
            return entry.stat(follow_symlinks=False)
        target = os.readlink(entry.path)
        if links == "skip":
            skipped.append(Skipped(entry.path, f"symbolic link to {target} (--links skip)"))
            return None
        return entry.stat(follow_symlinks=True)
    except FileNotFoundError:
        reason = ("vanished while listing" if target is None
                  else f"dangling symbolic link to {target}")
        skipped.append(Skipped(entry.path, reason, True))
    except OSError as exc:
        reason = ("symbolic link loop" if exc.errno == errno.ELOOP
                  else f"cannot stat ({exc.strerror})")
        skipped.append(Skipped(entry.path, reason, True))
    return None


def redact(options: Mapping[str, Any]) -> dict[str, Any]:
    """Storage options safe to print: values of secret-looking keys hidden."""
    return {
        k: "***" if any(h in k.lower() for h in _SECRET_HINTS) else v for k, v in options.items()
    }


@functools.lru_cache(maxsize=1024)
def _name_of(ident: Any, module: str) -> str | None:
    if ident is None:
        return None
    try:
        if module == "pwd":
            import pwd

            return pwd.getpwuid(int(ident)).pw_name
        import grp

        return grp.getgrgid(int(ident)).gr_name
    except (KeyError, ValueError, ImportError):
        return str(ident)


def forget_listings() -> None:
    """Drop every cached directory listing of this process's fsspec filesystems (the
    instances stay, with their connections): what was true for an earlier run is not
    evidence for this one."""
    fsspec = sys.modules.get("fsspec")
    if fsspec is None:  # no filesystem of fsspec's in this process: nothing cached
        return
    for cls in list(fsspec.registry.values()):  # the implementations imported so far
        for instance in list(getattr(cls, "_cache", {}).values()):
            with contextlib.suppress(Exception):
                instance.invalidate_cache()
