"""The storage seam: what the engine may ask of a filesystem (driver and executor).

Modelled on rclone's backends and their ``Features``: one ``Storage`` per kind of
filesystem (local disk, object store, any other fsspec filesystem), chosen once
per URL (``distcp.storage.spec``), answering capability questions and carrying
out the few operations whose way differs by kind. The engine never tests
``if s3`` / ``if local``; it asks a ``Storage``.

A ``Storage`` holds no state of a run and no filesystem object worth pickling:
methods take URLs and resolve them through fsspec's per-process instance cache.

Listings give each entry as the backend's own path (a local path is its own URL), never
a URL per entry: a walk of 300,000 local files must not pay a conversion each. A
``Tree`` (``Storage.tree``) is a root resolved once: planners cut listed paths against
its ``path`` and turn the few they need into URLs with ``url_of``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, BinaryIO, ClassVar, TypeVar, cast

from distcp import request_count
from distcp.checksum import Digest, digest_of_stream
from distcp.errors import IntegrityError
from distcp.model import FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage import writes as writeopts
from distcp.storage.files import FileWriter, part_name, write_part_file
from distcp.storage.folders import FolderMove
from distcp.storage.joins import SplitParts, join_parts
from distcp.storage.pathlimits import posix_problem
from distcp.storage.staged import Staged
from distcp.storage.staging import (
    Parts,
    RangeAt,
    RangeSource,
    StagedFile,
    StagedStream,
    StageWriter,
    WrittenRange,
)

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a filesystem can do, named after the questions the engine asks."""

    #: ``os`` calls work on its paths (syscalls are µs: serial loops beat pools).
    local_paths: bool = False
    #: Ranges of a split file can be written at their offsets into one staging file.
    offset_writes: bool = False
    #: Staging IS a multipart upload on the final key; completing it is the publish.
    multipart: bool = False
    #: Copies between two of its URLs without the bytes passing through the task.
    server_side_copy: bool = False
    #: Copies a byte range of one of its objects into a staged upload the same way
    #: (``copy_range``: S3 UploadPartCopy, Azure Put Block From URL; GCS rewrites whole
    #: objects only). Asked once on the driver (``TaskSpec.server_side_ranges``).
    server_side_ranges: bool = False
    #: Holds (empty) directories of its own.
    directories: bool = True
    #: Modes and mtimes of published entries can be set.
    mtimes: bool = False
    #: Holds a symbolic link as a link, verifiable with readlink.
    symlinks: bool = False
    #: A rename replaces its target in one step, never half-done.
    atomic_rename: bool = False
    #: One GET If-Match (the listed ETag) reads an object and vouches for its version.
    conditional_reads: bool = False
    #: A task can publish a file alone, whole, as soon as it copied it
    #: (``--visibility file``: ``publish_whole``, ``publish_checked``).
    file_visibility: bool = False
    #: Creating a file only where none exists is one atomic step (no read-back needed).
    exclusive_create: bool = False
    #: Lists the keys of a folder after a given one, in key order (``walk_after``: S3's
    #: StartAfter), so a continuous copy need not list what it has seen.
    lists_after: bool = False
    #: A small file is written by one request through this package's own thin client,
    #: not an SDK's per-file machinery: threads writing many of them wait on the server,
    #: not on the GIL (``run.choice.HERE_UPLOADS``; S3's PutObject without write options).
    thin_writes: bool = False
    #: Remote operations of one commit step worth running concurrently.
    parallel_ops: int = 16
    #: Per-file entries of a commit step from which ``--publishing auto`` has the
    #: executors carry it out (a Spark job costs about a second; a request each here).
    fan_out_from: int = 2_000

    @property
    def joins_parts(self) -> bool:
        """Split ranges go to part files that a join concatenates (neither offset writes
        nor multipart uploads)."""
        return not (self.offset_writes or self.multipart)


@dataclass(frozen=True)
class Tree:
    """The root ``url`` of a tree on ``storage``: ``path`` is the backend's own spelling
    of it, as given (what every path a listing of it yields starts with).

    ``handle`` is the backend's filesystem, kept for the storage's own listing modules
    (``distcp.storage.treelisting``, which cut a listing into tasks); the engine passes
    it on and never calls it. A driver-side value: tasks carry URLs and options instead.
    """

    storage: Storage
    url: str
    path: str
    handle: Any = field(repr=False, compare=False)

    def url_of(self, path: str) -> str:
        """The URL of ``path``, a path of this tree's filesystem (as listings give
        them); a local path is its own URL."""
        return fsutil.to_url(self.handle, path)

    @property
    def kind(self) -> str | None:
        """How a listing of this tree can be cut into tasks: ``tree`` (by subtree),
        ``keys`` (by key range) or None (it cannot: one process walks it)."""
        return self.storage.listing_kind(self)

    def holds(self, other: Tree, path: str | None = None) -> bool:
        """Whether ``path`` of ``other``'s filesystem (by default its root) is this
        tree's root or lies below it: the same filesystem (class and options), and
        the same place once the storage spelled both its one way (a local link
        resolved), so a destination inside its own source is refused."""
        if not fsutil.same_filesystem(self.handle, other.handle):
            return False
        inner = other.path if path is None else path
        outer = self.storage.same_place(self.path.rstrip("/"))
        inner = self.storage.same_place(inner.rstrip("/"))
        return inner == outer or inner.startswith(outer + "/")


class Storage(ABC):
    """One kind of filesystem, as the engine sees it; ``options`` are its storage options
    (which may hold secrets: never logged or stored)."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: The write options (``distcp.storage.writes``) this storage gives the objects it
    #: creates, by name; any other is refused before Spark starts. None by default.
    write_options: ClassVar[frozenset[str]] = frozenset()
    #: Metadata keys (lower case) the storage keeps its own values under (the source's
    #: mtime): a ``--metadata`` key among them is refused.
    own_metadata_keys: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        #: What the data objects it creates get (taken out of the options: fsspec never
        #: sees it); the state directory's documents get none of it.
        self.writes = writeopts.of(options)
        self.options: dict[str, Any] = writeopts.without(options)
        if self.writes.requester_pays and "requester_pays" in self.write_options:
            self.options["requester_pays"] = True  # s3fs's and gcsfs's option so named
        self._filesystems = fsutil.Filesystems()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def fs(self, url: str) -> tuple[Any, str]:
        """The fsspec filesystem and path of ``url``, resolved once per root of URLs
        (``filesystems.Filesystems``)."""
        return self._filesystems.resolve(url, self.options)

    # -- reading ------------------------------------------------------------------
    def stat(self, url: str) -> FileStatus:
        """The entry at ``url`` as a listing would give it (size, mtime, ETag where the
        store has one): one request on remote stores; FileNotFoundError if none."""
        fs, path = self.fs(url)
        request_count.count("head")  # one HEAD (or its protocol's stat)
        return fsutil.status(fs, self.call(fs, f"looking at {path}", "info", path))

    def open_read(self, url: str, block_size: int | None = None) -> BinaryIO:
        """A reader of the file at ``url`` (``block_size``: the read-ahead of remote
        files); OSError as the filesystem raised it (callers name the cause)."""
        fs, path = self.fs(url)
        return cast(BinaryIO, fs.open(path, "rb", block_size=block_size))

    def open_write(self, url: str) -> BinaryIO:
        """A writer of a new file at ``url``, its folder made: not staged, not atomic
        (the result files a task writes for the driver alone, read once it is done)."""
        fs, path = self.fs(url)
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        return cast(BinaryIO, fs.open(path, "wb"))

    def read_version(self, url: str, etag: str) -> bytes:
        """The whole file at ``url`` in one read, only if it is still version ``etag``
        (``capabilities.conditional_reads``); VersionChanged when it is not."""
        raise NotImplementedError(f"{self.name} storage has no conditional reads")

    def read_versions(self, wanted: Sequence[tuple[str, str]]
                      ) -> Iterator[tuple[int, bytes | None]] | None:
        """Many small files ``(url, version)`` read at once, each only if it is still
        that version: ``(index, bytes)`` as they come, every index once, None for one
        this way did not read (the caller asks ``read_version`` for it, whose errors
        say why). None: this storage reads them one at a time."""
        return None

    def names(self, url: str) -> list[str]:
        """The names of the entries directly in the folder ``url``, sorted (the state
        directory's folders: commits, jobs, kept copies); FileNotFoundError if none."""
        fs, path = self.fs(url)
        found = self.call(fs, f"listing {path}", "ls", path, detail=False)
        return sorted(n.rstrip("/").rsplit("/", 1)[-1] for n in found)

    def entries(self, url: str) -> list[FileStatus]:
        """The entries directly in the folder ``url`` with their status (one listing
        request on remote stores); FileNotFoundError if there is no such folder."""
        fs, path = self.fs(url)
        return [fsutil.status(fs, info)
                for info in self.call(fs, f"listing {path}", "ls", path, detail=True)]

    def usage(self, url: str) -> int:
        """Bytes held under ``url`` (a file's size, a folder's total)."""
        fs, path = self.fs(url)
        return int(self.call(fs, f"measuring {path}", "du", path, total=True))

    # -- listing ------------------------------------------------------------------
    def tree(self, url: str) -> Tree:
        """``url`` resolved once for listing below it: the walk, the glob and the
        planners cut listed paths against ``Tree.path`` and name entries with
        ``Tree.url_of``, so no entry of a listing pays a URL conversion of its own."""
        fs, path = self.fs(url)
        return Tree(self, fsutil.to_url(fs, path), path, fs)

    def walk(self, url: str, links: str = "follow", skipped: list[fsutil.Skipped] | None = None,
             most: int | None = None) -> Iterator[tuple[str, FileStatus]]:
        """Every file and directory below the folder ``url`` (not itself), as
        ``(path, FileStatus)`` pairs whose paths are the backend's own (``tree(url).path``
        and below: a local path is its own URL), less the tree's top-level state
        directory. What is not copied goes to ``skipped`` with its reason; ``links`` is
        the ``--links`` policy; ``most``: an object-store prefix of more keys raises
        ``MoreKeys`` before anything is yielded (``filesystems.walk``: ``os.scandir``
        on local disks, one listing of the keys on S3, fsspec's ``find`` elsewhere)."""
        fs, path = self.fs(url)
        return fsutil.walk(fs, path, links, skipped, most)

    def walk_after(self, url: str, after: str | None) -> Iterator[tuple[str, FileStatus]]:
        """The files below the folder ``url`` whose paths (``walk``'s) sort after
        ``after`` (None: all), in path order, less the tree's state directory; folders
        are not entries. Only where ``capabilities.lists_after``."""
        raise NotImplementedError(f"{self.name} storage cannot list after a key")

    def glob(self, url: str) -> list[tuple[str, FileStatus]]:
        """The entries whose paths match the pattern ``url`` (fsspec's glob), sorted by
        path, each as the filesystem's listing describes it (a local link to a folder
        that a wildcard found is no folder): the datasets of ``--dataset-glob``."""
        fs, path = self.fs(url)
        found = fs.glob(path, detail=True)
        return sorted(((p, fsutil.info_status(fs, info)) for p, info in found.items()),
                      key=lambda e: e[0])

    def listing(self, url: str) -> list[tuple[str, FileStatus]]:
        """The entries directly in the folder ``url`` as ``(path, FileStatus)``, sorted by
        path, each as the listing describes it (a local link as itself, never
        followed); FileNotFoundError if there is none: topics and time partitions, one
        level at a time (``entries`` gives URLs and follows links)."""
        fs, path = self.fs(url)
        found = self.call(fs, f"listing {path}", "ls", path, detail=True)
        return sorted(((info["name"], fsutil.info_status(fs, info)) for info in found),
                      key=lambda e: e[0])

    def is_link(self, url: str) -> bool:
        """Whether the entry at ``url`` is a symbolic link (a listed file is then read
        as ``--links`` says); only storages with ``capabilities.symlinks`` have them."""
        return False

    def listing_kind(self, tree: Tree) -> str | None:
        """How a listing of ``tree`` can be cut into tasks (``treelisting.TREE`` by
        subtree, ``KEYS`` by key range); None here: one process walks it."""
        return None

    def same_place(self, path: str) -> str:
        """``path`` spelled so that two spellings of one place compare equal (a local
        link resolved): whether a destination lies inside its source."""
        return path

    def reads_forked(self, url: str) -> bool:
        """Whether processes this one forks can read ``url``'s files through this
        storage as it stands now: its client holds no thread, pool or lock here that a
        child would inherit mid-use (``run.choice.forks_here``). Local paths only, by
        default: a child forked after Azure's SDK had run was killed by signal 11, and
        an fsspec filesystem made here refuses to serve a child ("not fork-safe")."""
        return self.capabilities.local_paths

    # -- questions ----------------------------------------------------------------
    def exists(self, url: str) -> bool:
        """Whether an entry (a link itself, not what it points to) is at ``url``."""
        fs, path = self.fs(url)
        return bool(fs.exists(path))

    def isdir(self, url: str) -> bool:
        fs, path = self.fs(url)
        return bool(fs.isdir(path))

    def entry_size(self, url: str) -> int:
        """Size of the entry itself (a link: its target text's length); raises
        FileNotFoundError when there is none."""
        fs, path = self.fs(url)
        return int(fs.size(path))

    def probe(self, url: str, setting: str) -> None:
        """One cheap request proving credentials and endpoint, where the storage has
        one to make (object stores: HEAD of the bucket). A failure raises a DistcpError
        of one line naming ``url``, the cause and ``setting`` (where the user sets this
        storage's options) when that is the fix: the caller only passes it on."""

    def write_value_problem(self, writes: writeopts.WriteOptions, shown: str) -> str | None:
        """Why this store cannot take a value of the write options it has (a storage
        class it does not name so), as one line naming the option and ``shown``; None.
        Asked before Spark starts; no request is sent. The store judges the rest."""
        return None

    def part_size(self, size: int, wanted: int) -> int:
        """The range size for splitting a file of ``size`` bytes into ``wanted``-byte
        ranges (object stores round to their part rules)."""
        return wanted

    def name_problem(self, url: str) -> str | None:
        """Why no file can be written at ``url`` here, or None: asked of every file and
        archive member before a byte of it is staged. A POSIX filesystem's limits
        (``storage.pathlimits``) unless the backend knows its own."""
        return posix_problem(url)

    def account(self, url: str) -> str:
        """The account a URL names beyond its storage options (``abfs://c@acct...``), or
        "": a server-side copy needs the source's and the destination's to agree."""
        return ""

    def uploaded_parts(self, staged: Staged) -> dict[int, tuple[str, int]] | None:
        """Part number -> (ETag, size) of a staged upload; None when it is gone (or the
        storage stages no uploads)."""
        return None

    def holds_staged(self, staged: Staged) -> bool:
        """Whether a staged copy is still where it was staged (a file in staging, a
        pending upload): a commit whose copy is gone and not published can never finish,
        so its replay sets it aside at once instead of failing run after run."""
        if staged.upload_id:
            return self.uploaded_parts(staged) is not None
        return not staged.needs_rename or self.exists(staged.location)

    def is_published(self, staged: Staged, final: str, size: int) -> bool:
        """Whether ``staged`` is at ``final`` with ``size`` bytes and gone from staging."""
        if staged.is_published:
            return True
        if staged.needs_rename and self.exists(staged.location):
            return False
        try:
            return self.entry_size(final) == size
        except FileNotFoundError:
            return False

    def call(self, fs: Any, what: str, name: str, *args: Any, **kwargs: Any) -> Any:
        """``fs.<name>(*args)``, bounded where a silent server could hang it forever
        (``what`` names the operation in the timeout's message)."""
        return getattr(fs, name)(*args, **kwargs)

    # -- actions ------------------------------------------------------------------
    def create_new(self, url: str, data: bytes) -> bool:
        """Write ``data`` at ``url`` only if nothing is there; False if something is.

        Without ``capabilities.exclusive_create`` two writers may both get True (the
        last one wins): callers read the document back to know who won.
        """
        fs, path = self.fs(url)
        if self.call(fs, f"looking for {path}", "exists", path):
            return False
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)  # FTP and the like need it
        fs.pipe_file(path, data)
        return True

    def creates_exclusively(self, url: str) -> bool:
        """Whether ``create_new`` at ``url`` is one atomic step, of writers racing for one
        name exactly one winning (no read-back needed): ``exclusive_create``, or what a
        store learnt of its server."""
        return self.capabilities.exclusive_create

    def makedirs(self, url: str) -> None:
        fs, path = self.fs(url)
        fs.makedirs(path, exist_ok=True)

    def prepare_folder(self, url: str) -> None:
        """Make the folder documents will be written into, where the storage needs one
        before a file goes in (FTP, SFTP...)."""
        fs, path = self.fs(url)
        fs.makedirs(path, exist_ok=True)

    def finish_split(self, parts: SplitParts, buffer: bytearray, verify: str,
                     attempt: str) -> None:
        """Make a split file whose ranges are part files its one verified staging file
        (``distcp.storage.joins``). Only storages whose capabilities join parts are
        asked: offset writes and multipart uploads leave nothing to finish."""
        join_parts(parts, self.options, buffer, verify, attempt)

    def stage_split(self, final_url: str, folder_url: str, name: str) -> Staged:
        """The staging all ranges of one split file share: here the file ``name`` in
        ``folder_url`` (object stores: an upload on the final key)."""
        fs, path = self.fs(folder_url)
        fs.makedirs(path, exist_ok=True)
        return Staged.path(fsutil.to_url(fs, fsutil.join(path, name)))

    @abstractmethod
    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        """Replace ``url`` with ``data`` so that readers see the old or the new, never half.
        ``durable=False`` may skip a local fsync (records that vouch for unsynced data)."""

    def write_atomic_pieces(self, url: str, pieces: Iterable[bytes], durable: bool = True,
                            make_folder: bool = True) -> None:
        """``write_atomic`` of a document made piece by piece (the commit log entry of a
        file set of a million files is hundreds of MiB): storages that write a temp file
        take the pieces as they come; here they are joined into one body.
        ``make_folder=False``: a folder removed since (a finished job's progress) stays
        gone, and the write fails with FileNotFoundError where folders exist."""
        self.write_atomic(url, b"".join(pieces), durable)

    def write_streamed(self, url: str, pieces: Iterable[bytes]) -> int:
        """A document of any size written as its pieces come, never whole in memory,
        appearing whole or not at all (object stores: one multipart upload, completed;
        files: a temporary file moved into place), its folder never made; the bytes
        written. What a task journals for one file of a million outputs."""
        fs, path = self.fs(url)
        out = fs.open(path, "wb", autocommit=False)
        try:
            written = 0
            for piece in pieces:
                out.write(piece)
                written += len(piece)
            out.close()
            out.commit()
        except BaseException:
            out.discard()
            raise
        return written

    def read_bytes(self, url: str, what: str) -> bytes:
        """The whole document at ``url``; FileNotFoundError when there is none."""
        fs, path = self.fs(url)
        return bytes(fs.cat_file(path))

    def stage(self, data: bytes, final_url: str, staging_url: str) -> tuple[Staged, Parts]:
        """Stage a small ``data`` for ``final_url``: here a file at ``staging_url``.

        ``open_stage`` stages a stream, checked on the way; this is the same staging
        for a body already in memory.
        """
        fs, path = self.fs(staging_url)
        fs.pipe_file(path, data)
        return Staged.path(staging_url), ()

    def stage_small_file(self, fd: int, st: os.stat_result, staging_url: str, *,
                         mode: int | None, mtime: float | None, verify: str,
                         buffer: bytearray, source: str) -> tuple[int, str] | None:
        """The small local file open at ``fd`` (status ``st``) staged at ``staging_url``
        in one call: what ``open_stage``'s writer does with it (``copy_file``,
        ``keep_attributes``, ``commit``), with the same checks and errors, for a file
        whose per-file steps cost more than its bytes. ``(bytes staged, digest)``;
        None where this storage has no such way or the file is not small (the caller
        takes the writer)."""
        return None

    def stage_small_body(self, data: bytes, staging_url: str, *, mode: int | None,
                         mtime: float | None, verify: str,
                         buffer: bytearray) -> tuple[int, str] | None:
        """``stage_small_file`` for bytes already in hand (a small object's body, read
        by ``read_versions``): staged at ``staging_url`` in one call, with the writer's
        checks and errors (``buffer``: memory the verify may read the copy back into).
        ``(bytes staged, digest)``; None where this storage has no such way or the
        bytes are not small (the caller takes the writer)."""
        return None

    def open_stage(self, final_url: str, staging_url: str, *, verify: str = "size",
                   size_hint: int = 0, buffer_size: int = 0,
                   hold_small: bool = False) -> StageWriter:
        """A writer staging one stream for ``final_url``: here the file ``staging_url``,
        checked at commit (its size; with ``verify="digest"`` its bytes re-read).

        ``size_hint`` (the expected size, 0 if unknown) and ``buffer_size`` size an
        upload's parts; ``hold_small`` keeps a stream shorter than one part in memory
        for ``publish_whole`` (storages that stage into files ignore the three).
        """
        fs, path = self.fs(staging_url)
        return FileWriter(fs, path, staging_url, verify)

    def set_staged_attributes(self, url: str, *, mode: int | None, mtime: float | None,
                              owner: str | None, group: str | None) -> str | None:
        """Give a staged file the attributes the publish keeps, where this storage keeps
        them (here only the mtime, where the filesystem offers ``set_mtime``). A note
        when the filesystem refused (the copy stands), else None."""
        return self.set_mtime(url, mtime)

    def keep_mtime(self, staged: Staged, mtime: float | None) -> Staged:
        """``staged`` as it publishes with ``mtime`` (an int: nanoseconds) kept, where
        this storage writes a kept mtime with the object at the publish (Azure: the
        blob's metadata, at the commit of its blocks); here ``staged`` unchanged (files
        get theirs from ``set_staged_attributes``; S3 keeps none)."""
        return staged

    def write_range(self, staged: Staged, at: RangeAt, source: RangeSource,
                    buffer: bytearray, verify: str, folder_url: str,
                    attempt: str) -> WrittenRange:
        """Stage one range of the split file ``staged``: here its own part file in
        ``folder_url`` (named per attempt, see ``part_name``), which ``join`` later
        concatenates (no offset writes, no uploads). Checked before it returns."""
        name = part_name(at.index, attempt)
        url = fsutil.join(folder_url, name)
        fs, path = self.fs(url)
        return WrittenRange("", write_part_file(fs, path, url, at, source, buffer, verify),
                            name)

    def copy_range(self, staged: Staged, at: RangeAt, source_url: str) -> str:
        """Have the store copy one range of ``source_url`` into the upload ``staged``
        (``capabilities.server_side_copy``); the part's ETag."""
        raise NotImplementedError(f"{self.name} storage copies nothing server-side")

    def copy_in(self, source_url: str, final_url: str, size: int,
                part_size: int, staging_url: str = "") -> StagedStream:
        """Stage ``final_url`` as a copy the store makes of ``source_url`` itself
        (``capabilities.server_side_copy``), no byte passing through the task; at
        ``staging_url`` where the storage stages into files (stores with uploads stage on
        the final name and need none)."""
        raise NotImplementedError(f"{self.name} storage copies nothing server-side")

    def publish_whole(self, url: str, body: bytes, mtime: float | None = None,
                      mode: int | None = None) -> Staged:
        """Per-file visibility: write a small file held in memory straight to its final
        ``url``, whole or not at all, and check it; ``Staged.published(url)``. ``mtime``
        (an int: nanoseconds) and ``mode``: the file's, kept where the store writes
        them with the object (``keep_mtime``; a mode only where the store keeps one)."""
        raise NotImplementedError(f"{self.name} storage publishes file sets, not files")

    def publish_wholes(self, urls: Sequence[str], body: Callable[[int], bytes | None]
                       ) -> Iterator[tuple[int, Staged | None, request_count.Counts]] | None:
        """``publish_whole`` for many small files at once: ``body(index)`` is asked for
        each file's bytes when the store is ready to take them (None: that file is not
        sent), and ``(index, Staged.published(url), requests)`` comes back for each one
        written whole and checked, as they are; ``Staged`` None for one this way did
        not write (the caller publishes it its usual way, whose errors say why). None:
        this storage publishes one file at a time."""
        return None

    def publish_checked(self, staged: Staged, size: int, parts: Parts,
                        final_url: str = "") -> Staged:
        """Per-file visibility: publish a staged upload (or empty file, or a staged file
        to ``final_url``) at once and check the result holds exactly ``parts`` (or
        ``size``); ``Staged.published(final)``. Here: ``publish``, then ``is_published``."""
        if not self.capabilities.file_visibility:
            raise NotImplementedError(f"{self.name} storage publishes file sets, not files")
        final = staged.final or final_url
        self.publish(staged, final, parts)
        if not self.is_published(staged, final, size):
            raise IntegrityError(f"{fsutil.display(final)} does not hold the {size} bytes "
                                 "staged for it after its publish", path=final)
        return Staged.published(final)

    def publish(self, staged: Staged, final_url: str, parts: Parts = ()) -> None:
        """Make a staged file visible at ``final_url`` (a file: moved there)."""
        if staged.needs_rename:
            self.move(staged.location, final_url)

    def all_published(self, files: Sequence[StagedFile]) -> bool:
        """Whether every staged file of a file set is published (``is_published``),
        judged from what the storage holds now: a commit step's ``verify``."""
        return all(self.is_published(f.staged, f.final, f.size) for f in files)

    def publish_all(self, files: Sequence[StagedFile],
                    after_each: Callable[[StagedFile], None] | None = None,
                    folders: Sequence[FolderMove] = ()) -> None:
        """Publish a file set's staged files (``publish``), concurrently where calls are
        remote; one an interrupted earlier run already published is fine. ``after_each``
        runs after each file (the commit step's crash point; None: nothing). ``folders``:
        more of them, grouped by staging folder; a storage that can publish a folder by
        one move does (local disk), this one publishes their files one by one."""
        def one(f: StagedFile) -> None:
            try:
                self.publish(f.staged, f.final, f.parts)
            except FileNotFoundError:
                if not self.is_published(f.staged, f.final, f.size):
                    raise
            if after_each is not None:
                after_each(f)

        # one list, made by for_each: a publish of 300,000 files is not copied twice
        self.for_each(chain(files, (f for move in folders for f in move.files())), one)

    def stored_checksum(self, status: FileStatus) -> str | None:
        """A digest of the file's bytes that the store keeps and its listing gave
        (``algorithm:hex``, no request sent), or None: ``copy --checksum`` compares two
        of one algorithm instead of reading both files. Most stores keep none."""
        return None

    def digest_of(self, url: str, buffer: bytearray) -> Digest:
        """The digest of the file at ``url``, read through ``buffer``."""
        fs, path = self.fs(url)
        with fs.open(path, "rb") as f:
            return digest_of_stream(f, buffer)

    def move(self, src: str, dst: str) -> None:
        """Publish a staged file: move it from its staging URL to its final URL."""
        fs, s = self.fs(src)
        _, d = self.fs(dst)
        fs.mv(s, d)

    def remove(self, url: str) -> None:
        """Remove the entry at ``url`` (recursively; a link itself, never its target).

        ``url`` is a name, never a pattern: fsspec's ``rm`` (s3fs's too) expands glob
        characters, so removing ``[x]*?.txt`` would remove every name it matches
        (``xab.txt``). The entries are found below ``url`` and removed one by one; a
        file is removed alone (asked to ``find`` below a file, an FTP server answers
        "not a directory" and adlfs a list of names).
        """
        fs, path = self.fs(url)
        if not fs.exists(path):
            return
        if not fs.isdir(path):
            self.call(fs, f"removing {path}", "rm_file", path)
            return
        found = fs.find(path, withdirs=True, detail=True)
        files = {p for p, info in found.items() if info.get("type") != "directory"}
        for p in sorted(files):
            self.call(fs, f"removing {p}", "rm_file", p)
        if self.capabilities.directories:  # an object store's folders go with their keys
            for folder in sorted({*found, path} - files, key=len, reverse=True):
                if fs.isdir(folder):
                    fs.rmdir(folder)

    def remove_file(self, url: str) -> None:
        """Remove the file at ``url``; one gone already is fine (a record replayed twice)."""
        fs, path = self.fs(url)
        try:
            self.call(fs, f"removing {path}", "rm_file", path)
        except FileNotFoundError:
            pass

    def remove_empty_folder(self, url: str) -> None:
        """Remove the folder at ``url`` only if it is empty (OSError if it holds
        anything: a file that arrived since it was seen empty stays)."""
        fs, path = self.fs(url)
        fs.rmdir(path)

    def set_aside(self, src: str, dst: str) -> None:
        """Move the entry at ``src`` (a file or a folder) to ``dst``, making the folder
        ``dst`` goes in: records and kept copies set aside for a person to look at."""
        fs, s = self.fs(src)
        _, d = self.fs(dst)
        fs.makedirs(d.rsplit("/", 1)[0], exist_ok=True)
        fs.mv(s, d, recursive=True)

    def discard(self, staged: Staged) -> None:
        """Remove a staged file that will not be published; gone already is fine."""
        if not staged.needs_rename:
            return
        fs, path = self.fs(staged.location)
        try:
            fs.rm_file(path)
        except OSError:
            pass

    def set_attributes(self, url: str, mode: int | None, mtime: float | None) -> None:
        """Set mode and mtime (an int is nanoseconds) where the filesystem keeps them."""

    def has_attributes(self, url: str, mode: int | None, mtime: float | None) -> bool:
        """Whether ``url`` already shows that mode and mtime; True where
        ``set_attributes`` sets nothing (so a replay never waits on it)."""
        return True

    def set_owner(self, url: str, owner: str | None, group: str | None) -> None:
        """Give ``url`` the owner and group (names or numeric ids) where the filesystem
        keeps them (--chown on directories); here none are kept."""

    def has_owner(self, url: str, owner: str | None, group: str | None) -> bool:
        """Whether ``url`` has that owner and group; True where ``set_owner`` sets
        nothing (so a replay never waits on it)."""
        return True

    def set_mtime(self, url: str, mtime: float | None) -> str | None:
        """Set a staged file's mtime where the filesystem offers ``set_mtime`` (FTP: MFMT);
        a note when the server refused it (the copy stands), else None."""
        if mtime is None:
            return None
        fs, path = self.fs(url)
        set_mtime = getattr(fs, "set_mtime", None)
        if not callable(set_mtime):
            return None
        try:
            set_mtime(path, mtime)
        except OSError as exc:  # a server without MFMT, or not allowed: keep the copy
            reason = exc.strerror or str(exc)
            return f"mtimes were not kept: the {fs.protocol} server refused to set them ({reason})"
        return None

    def sweep_orphans(self, prefix_url: str, keep: AbstractSet[str], older_than: float = 0.0,
                      dry_run: bool = False) -> int:
        """Abort staged uploads under ``prefix_url`` whose id is not in ``keep``, started
        ``older_than`` seconds ago or earlier; the count. Nothing to do without uploads."""
        return 0

    def for_each(self, items: Iterable[T], fn: Callable[[T], Any]) -> None:
        """``fn`` on every item: serial where calls are cheap, else a bounded pool."""
        items = list(items)
        if self.capabilities.local_paths or len(items) <= 1:
            for item in items:
                fn(item)
            return
        with ThreadPoolExecutor(self.capabilities.parallel_ops) as pool:
            list(pool.map(fn, items))
