"""Object stores (S3 through s3fs): the multipart upload is the staging (driver and executor).

Staging a file creates an uncompleted multipart upload on its final key
(invisible to readers); completing it publishes; aborting it discards. A state
document is one PUT (atomic); the state folder's names and documents are read through
the lean wire (``distcp.storage.s3.lean``). Every request is bounded: by
``s3.sync_bounded``, or the lean wire's own deadline within the same bound.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import closing
from typing import Any

from distcp import request_count
from distcp.model import FileStatus
from distcp.mtimes import aged
from distcp.storage import filesystems as fsutil
from distcp.storage import treelisting as tl
from distcp.storage.base import Capabilities, Storage, Tree
from distcp.storage.errors import VersionChanged
from distcp.storage.folders import FolderMove
from distcp.storage.s3 import inflight, settings, uploads
from distcp.storage.s3 import lean as s3get
from distcp.storage.s3 import ops as s3
from distcp.storage.s3.probe import probe_problem
from distcp.storage.s3.reach import LazyS3, Reach, StandIns, fingerprint, plain_reach
from distcp.storage.staged import Staged, StagedKind
from distcp.storage.staging import (
    Parts,
    RangeAt,
    RangeSource,
    StagedFile,
    StagedStream,
    StageWriter,
    WrittenRange,
)
from distcp.storage.watchdog import watchdog_seconds
from distcp.storage.writes import WriteOptions
from distcp.usercache import user_cache

#: Keys a DeleteObjects request takes at most (S3's limit).
DELETE_BATCH = 1000
#: A single-part upload's ETag: the 32 hex digits of its MD5.
_MD5 = re.compile(r"[0-9a-f]{32}")


class ObjectStorage(Storage):
    """S3 and S3-compatible servers."""

    name = "object"
    capabilities = Capabilities(multipart=True, server_side_copy=True, directories=False,
                                server_side_ranges=True, conditional_reads=True,
                                file_visibility=True, lists_after=True, thin_writes=True)
    write_options = frozenset({"storage_class", "kms_key_id", "acl", "metadata", "tags",
                               "requester_pays"})

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)  # requester pays: s3fs sends RequestPayer every time
        #: What each data object is created with (CreateMultipartUpload, PutObject):
        #: with any, those requests go through botocore instead of the lean path.
        self._extra = s3.object_arguments(self.writes)
        self._stand_ins = StandIns()
        self._reach: tuple[tuple[object, ...], Reach | None] = ((), None)
        #: (endpoint, bucket) -> whether its server refused a second PutObject with
        #: ``If-None-Match: *`` (``create_new`` learns it once per process).
        self._exclusive: dict[tuple[str, str], bool] = {}

    def fs(self, url: str) -> tuple[Any, str]:
        """A plain reach's stand-in (``reach.LazyS3``: s3fs imported and its client made
        only if a request needs them), else s3fs's filesystem. The environment is read
        each time: a task applies its client's before it asks."""
        seen, found = self._reach
        if seen != fingerprint():  # 20 µs to read afresh, 0.4 µs to check
            seen = fingerprint()
            found = plain_reach(self.options)
            self._reach = (seen, found)
        if found is None or not url.startswith(("s3://", "s3a://")) or "::" in url:
            return super().fs(url)
        # s3fs's filesystem depends on the options alone, not on the URL's bucket: any
        # URL of this storage makes the one every stand-in of this reach stands for
        lazy = self._stand_ins.get(found, lambda: super(ObjectStorage, self).fs(url)[0])
        return lazy, lazy._strip_protocol(url)

    def reads_forked(self, url: str) -> bool:
        """A plain reach whose s3fs client was never made in this process, read on the
        lean path: its GETs' connections and locks are remade in a forked child
        (``lean._after_fork``), and a child that needs s3fs (a big object's ranges)
        makes its own. Downloads then copy in one process per core instead of threads
        whose per-object work holds the GIL: 20,000 objects of 64 B, warm, 5.5 s
        against 7.1 s on the engine's job (benchmarks/RESULTS.md, 2026-12-02)."""
        fs, _ = self.fs(url)
        return isinstance(fs, LazyS3) and not fs.made and s3get.lean(fs, lambda _: True) is True

    def write_value_problem(self, writes: WriteOptions, shown: str) -> str | None:
        """Metadata goes in HTTP headers (``x-amz-meta-KEY``): printable ASCII only."""
        for key, value in writes.metadata:
            if not (key + value).isascii() or not (key + value).isprintable():
                return (f"--metadata {key}: {shown} takes metadata of printable ASCII "
                        "(sent as HTTP headers)")
        return None

    def read_version(self, url: str, etag: str) -> bytes:
        """One GET If-Match (through the lean path where it serves): the bytes are the
        listed version's, so no HEAD is needed before or after."""
        try:
            return s3.get_if_match(self.fs(url)[0], url, etag)
        except OSError as exc:
            if s3.precondition_failed(exc):
                raise VersionChanged(f"{fsutil.display(url)} is no longer {etag}") from exc
            raise

    def read_versions(self, wanted: Sequence[tuple[str, str]]
                      ) -> Iterator[tuple[int, bytes | None]] | None:
        """Small objects read from one thread over kept connections
        (``distcp.storage.s3.inflight``) where the lean path serves the filesystem;
        else None (read one at a time, through s3fs)."""
        if not wanted:
            return None
        fs = self.fs(wanted[0][0])[0]
        getter = s3get.lean(fs, lambda g: g)  # None: s3fs serves this filesystem
        if getter is None:
            return None
        return inflight.fetch(getter, [(*s3.bucket_key(fs, url), etag) for url, etag in wanted],
                              timeout=min(settings.READ_TIMEOUT_S, watchdog_seconds()))

    def stored_checksum(self, status: FileStatus) -> str | None:
        """The ETag of an object uploaded in one part is the MD5 of its bytes:
        ``md5:<hex>``. A multipart upload's (``<hex>-<parts>``, which pydistcp's staged
        uploads have) depends on its part sizes: None, the bytes are read instead. An
        object encrypted with SSE-KMS or SSE-C has an ETag of the same form that is no
        MD5: two of them differ even for the same bytes, so the file is copied again
        (never skipped on a guess)."""
        etag = (status.etag or "").strip('"').lower()
        return f"md5:{etag}" if _MD5.fullmatch(etag) else None

    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        """One PUT: atomic (through the lean path where it serves, with its Content-MD5;
        not counted as a file's request); bounded, as a silent server would hang."""
        fs, path = self.fs(url)
        bucket, key, version = fs.split_path(path)
        if not version and s3get.put(fs, "put_object", bucket, key, data, {},
                                     {"Content-MD5": s3.content_md5(data)}) is not None:
            s3.written(fs, bucket, key)
            return
        s3.sync_bounded(fs, f"writing {fsutil.display(url)}", fs._pipe_file, path, data)

    def stat(self, url: str) -> FileStatus:
        """A HEAD (then, for a folder, one page) through the lean path while s3fs has
        listed nothing it would answer from; else s3fs's ``info``."""
        fs, path = self.fs(url)
        info = s3.lean_info(fs, path) if isinstance(fs, LazyS3) and not fs.made else None
        if info is None:
            return super().stat(url)
        request_count.count("head")
        return fsutil.status(fs, info)

    def isdir(self, url: str) -> bool:
        """One page of one key under ``url`` through the lean path while s3fs has listed
        nothing it would answer from (s3fs lists the whole folder); else s3fs's."""
        fs, path = self.fs(url)
        bucket, key, version = fs.split_path(path)
        if isinstance(fs, LazyS3) and not fs.made and key.strip("/") and not version:
            found = s3.lean_holds_keys(fs, bucket, key)
            if found is not None:
                return found
        return super().isdir(url)

    def remove_file(self, url: str) -> None:
        """One DELETE (a key that is not there is no error on S3)."""
        fs, path = self.fs(url)
        bucket, key, version = fs.split_path(path)
        if key and not version and s3get.delete(fs, bucket, key) is not None:
            s3.written(fs, bucket, key)
            return
        super().remove_file(url)

    def read_bytes(self, url: str, what: str) -> bytes:
        """One GET through the lean client (s3fs's asks the key's status first, unless a
        listing of its own left it: a HEAD more for each state document read, such as
        the progress files a run polls); a versioned URL through s3fs."""
        fs, path = self.fs(url)
        bucket, key, version = fs.split_path(path)
        data = None if version else s3get.get(fs, bucket, key)
        if data is not None:
            return data
        return bytes(s3.sync_bounded(fs, f"reading the {what} {fsutil.display(url)}",
                                     fs._cat_file, path))

    def listing_kind(self, tree: Tree) -> str | None:
        """By key range, where the API lists keys in order (not a versioned listing,
        whose pages are not cut by key)."""
        return None if getattr(tree.handle, "version_aware", False) else tl.KEYS

    def names(self, url: str) -> list[str]:
        """One listing with a delimiter a page, through the lean client
        (``listing.folder_names``), not s3fs's, which lists an empty folder's parent as
        well; FileNotFoundError when nothing is under ``url``, as s3fs says it."""
        from distcp.storage.s3 import listing as s3list

        fs, path = self.fs(url)
        bucket, key, _ = fs.split_path(path)
        found = s3list.folder_names(fs, bucket, f"{key.rstrip('/')}/" if key else "")
        if found is None:
            return super().names(url)
        if not found:
            raise FileNotFoundError(errno.ENOENT, "no such folder", fsutil.display(url))
        return sorted(found)

    def walk_after(self, url: str, after: str | None) -> Iterator[tuple[str, FileStatus]]:
        """One ListObjectsV2 from StartAfter on: the keys below ``url`` after ``after``
        (a path as ``walk`` spells it: ``bucket/key``)."""
        fs, path = self.fs(url)
        root = path.rstrip("/")
        key = root.partition("/")[2]
        after_key = after.partition("/")[2] if after else None
        task = tl.ListingTask("keys", url, root)
        for info in tl.scan_keys(fs, task, f"{key}/" if key else "", after_key):
            name = info["name"]
            rel = fsutil.relpath(name, root)
            if name.endswith("/") or not rel or fsutil.at_state_dir(rel):
                continue
            yield name, fsutil.status(fs, info)

    def part_size(self, size: int, wanted: int) -> int:
        return s3.part_size_for(size, wanted)

    def call(self, fs: Any, what: str, name: str, *args: Any, **kwargs: Any) -> Any:
        """Under the request watchdog: a silent server must not hang a run."""
        return s3.sync_bounded(fs, what, getattr(fs, f"_{name}"), *args, **kwargs)

    def create_new(self, url: str, data: bytes) -> bool:
        """One PUT with If-None-Match; a 412 (PreconditionFailed) means someone was
        first. Not every server honours it (rclone serve s3 writes over the key): so
        first a HEAD of the key, unless this server is known to honour it. The first
        create on the lean wire learns which: the same PUT sent again must be refused
        (same bytes, so a server that takes it changes nothing), and from then on
        ``creates_exclusively`` says so. A server that took it is remembered on this
        machine (``_writes_over``), so that later runs do not send the second PUT. Only
        that answer is kept: a server remembered as honouring it that changed since
        would make the lock unsafe; one remembered as not that changed only keeps the
        read-back."""
        fs, path = self.fs(url)
        bucket, key, _ = fs.split_path(path)
        server = (s3get.endpoint_of(fs), bucket)
        honours = self._exclusive.get(server)
        if honours is None and server[0] and _writes_over(server[0]):
            honours = self._exclusive[server] = False  # learnt by an earlier run
        try:
            if not honours:
                if s3get.head(fs, bucket, key) is None:
                    s3.call(fs, "head_object", Bucket=bucket, Key=key)
                return False
        except FileNotFoundError:
            pass
        try:
            if s3get.put(fs, "put_object", bucket, key, data, {}, _create_headers(data)) is None:
                s3.sync_bounded(fs, f"creating {fsutil.display(url)}", fs._pipe_file, path,
                                data, mode="create")  # served by s3fs: nothing learnt
                return True
            s3.written(fs, bucket, key)
            learnt = _refused_again(fs, bucket, key, data) if honours is None else None
            if learnt is not None:
                self._exclusive[server] = learnt
                if not learnt:
                    _remember_writes_over(server[0])
        except OSError as exc:
            if "PreconditionFailed" in str(exc) or "412" in str(exc):
                return False
            raise
        return True

    def creates_exclusively(self, url: str) -> bool:
        """Only where this server refused a second create of one key (``create_new``)."""
        fs, path = self.fs(url)
        return self._exclusive.get((s3get.endpoint_of(fs), fs.split_path(path)[0]), False)

    def probe(self, url: str, setting: str) -> None:
        """HEAD of the bucket: credentials present and accepted, endpoint reachable,
        bucket there (``distcp.storage.s3.probe`` words what went wrong)."""
        try:
            fs, path = self.fs(url)
            bucket = path.split("/", 1)[0]
            if s3get.head(fs, bucket, "") is None:
                s3.call(fs, "head_bucket", Bucket=bucket)
        except Exception as exc:  # noqa: BLE001 - classified, re-raised as ours
            bucket = self.fs(url)[1].split("/", 1)[0]
            raise probe_problem(exc, url, bucket, f"{setting} or the AWS_* variables") from None

    def prepare_folder(self, url: str) -> None:
        """Nothing: keys need no folder."""

    def makedirs(self, url: str) -> None:
        """Nothing: keys need no folder. (s3fs's asks for the bucket each time, and
        would create a missing one: the run's probe has found it there.)"""

    def remove(self, url: str) -> None:
        """The key at ``url`` and the keys below it, found by one listing, removed a
        thousand a request (DeleteObjects; a server without it, one DELETE a key). s3fs
        asked the key's status and listed it as a folder before listing it again, then
        removed each key alone: a job's four progress documents took seven requests,
        now two. Only keys listed are sent: ``rclone serve s3`` refuses to delete a key
        that names one of its folders (InternalError). Keys are names, never patterns."""
        from distcp.storage.s3 import listing as s3list

        fs, path = self.fs(url)
        bucket, key, version = fs.split_path(path)
        key = key.rstrip("/")
        # listed from ``key`` itself, the first name it prefixes; no page is asked for
        # past the folder (siblings such as ``key0`` sort after ``key/...``)
        pages = None if version or not key else s3list.page_stream(
            fs, bucket, key, beyond=lambda last: last > f"{key}/" and
            not last.startswith(f"{key}/"))
        if pages is None:  # a bucket, a version, or a filesystem s3fs serves
            super().remove(url)
            return
        keys = []
        with closing(pages):
            for page in pages:
                keys += [c["Key"] for c in page["Contents"]
                         if c["Key"] == key or c["Key"].startswith(f"{key}/")]
        fs.invalidate_cache(path)
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start:start + DELETE_BATCH]
            try:
                refused = s3.delete_keys(fs, bucket, batch)
            except OSError as exc:
                if not s3.not_implemented(exc):
                    raise
                for k in batch:  # a server without DeleteObjects: one request a key
                    s3.delete_key(fs, bucket, k)
                continue
            if refused:  # quiet: only the keys it could not remove
                first, code, message = refused[0]
                raise OSError(f"removing s3://{bucket}/{first}: {code} {message}".rstrip())

    def name_problem(self, url: str) -> str | None:
        """Asked of every file a task copies here: the filesystem is the bucket's."""
        return s3.key_problem(s3.bucket_key(self.fs(url)[0], url)[1])

    def stage_split(self, final_url: str, folder_url: str, name: str) -> Staged:
        """A new, empty multipart upload on the final key: its parts are the ranges."""
        fs, path = self.fs(final_url)
        final = fsutil.to_url(fs, path)
        return Staged.upload(s3.create(fs, final, self._extra), final)

    def uploaded_parts(self, staged: Staged) -> dict[int, tuple[str, int]] | None:
        if not staged.upload_id:
            return None
        fs, _ = self.fs(staged.location)
        return s3.list_parts(fs, staged.location, staged.upload_id)

    def stage(self, data: bytes, final_url: str, staging_url: str) -> tuple[Staged, Parts]:
        """An upload on the final key holding ``data`` as one part (nothing for 0 bytes)."""
        fs, path = self.fs(final_url)
        final = fsutil.to_url(fs, path)
        if not data:
            return Staged.empty(final), ()
        upload_id = s3.create(fs, final, self._extra)
        etag = s3.upload_part(fs, final, upload_id, 1, data)
        return Staged.upload(upload_id, final), ((1, etag, len(data)),)

    def _final(self, url: str) -> tuple[Any, str]:
        """The filesystem and the canonical ``s3://bucket/key`` form of ``url``."""
        fs, path = self.fs(url)
        return fs, fsutil.to_url(fs, path)

    def open_stage(self, final_url: str, staging_url: str, *, verify: str = "size",
                   size_hint: int = 0, buffer_size: int = 0,
                   hold_small: bool = False) -> StageWriter:
        """A new upload on the final key (``staging_url`` is not used): parts of the
        S3 size for ``size_hint`` bytes, at least one buffer; parts are listed back
        instead of re-reading (``verify`` is not used)."""
        fs, final = self._final(final_url)
        part_size = s3.part_size_for(size_hint, max(buffer_size, s3.MIN_PART))
        return uploads.UploadWriter(fs, final, part_size, hold_small, self._extra)

    def copy_in(self, source_url: str, final_url: str, size: int,
                part_size: int, staging_url: str = "") -> StagedStream:
        fs, final = self._final(final_url)
        return uploads.copy_in(fs, source_url, final, size, max(part_size, s3.MIN_PART),
                               self._extra)

    def write_range(self, staged: Staged, at: RangeAt, source: RangeSource,
                    buffer: bytearray, verify: str, folder_url: str,
                    attempt: str) -> WrittenRange:
        """The range is part ``index + 1`` of the upload the driver created."""
        fs, _ = self.fs(staged.location)
        return WrittenRange(*uploads.write_part(fs, staged, at, source))

    def copy_range(self, staged: Staged, at: RangeAt, source_url: str) -> str:
        fs, _ = self.fs(staged.location)
        return uploads.copy_range(fs, staged, at, source_url)

    def publish_whole(self, url: str, body: bytes, mtime: float | None = None,
                      mode: int | None = None) -> Staged:
        fs, final = self._final(url)
        return uploads.put_whole(fs, final, body, self._extra)

    def publish_wholes(self, urls: Sequence[str], body: Callable[[int], bytes | None]
                       ) -> Iterator[tuple[int, Staged | None, request_count.Counts]] | None:
        """Small files each written with one PutObject from one thread over kept
        connections (``distcp.storage.s3.inflight``), where the lean path serves the
        filesystem and the objects are created with nothing more (``_extra``); else
        None. The ETag must be the MD5 sent, as ``put_whole`` checks: one that is not
        gives None (written again and checked the usual way)."""
        if not urls or self._extra:
            return None
        finals = [self._final(url) for url in urls]
        fs = finals[0][0]
        getter = s3get.lean(fs, lambda g: g)  # None: s3fs serves this filesystem
        if getter is None or any(f is not fs for f, _ in finals):
            return None
        keys = [s3.bucket_key(fs, final) for _, final in finals]
        sent = inflight.put(getter, keys, body,
                            timeout=min(settings.READ_TIMEOUT_S, watchdog_seconds()))
        return _published(fs, keys, [final for _, final in finals], sent)

    def publish_checked(self, staged: Staged, size: int, parts: Parts,
                        final_url: str = "") -> Staged:
        fs, _ = self.fs(staged.location)
        return uploads.complete_now(fs, staged, size, parts, self._extra)

    def publish(self, staged: Staged, final_url: str, parts: Parts = ()) -> None:
        """Complete the upload (an empty file: one PUT); the object appears whole."""
        fs, _ = self.fs(staged.location or final_url)
        if staged.kind is StagedKind.UPLOAD:
            s3.complete(fs, staged.location, staged.upload_id, parts)
        elif staged.kind is StagedKind.EMPTY:
            s3.put(fs, staged.location, b"", self._extra)
        else:
            super().publish(staged, final_url, parts)

    def is_published(self, staged: Staged, final: str, size: int) -> bool:
        if staged.upload_id and self.uploaded_parts(staged) is not None:
            return False  # still pending: whatever the key holds is not ours
        return super().is_published(staged, final, size)

    def all_published(self, files: Sequence[StagedFile]) -> bool:
        """One LIST of the set's pending uploads, then a HEAD per object (its size and
        multipart ETag), instead of a LIST of parts per upload."""
        if not files:
            return True
        fs, _ = self.fs(files[0].final)
        return uploads.all_published(fs, files, self.capabilities.parallel_ops)

    def publish_all(self, files: Sequence[StagedFile],
                    after_each: Callable[[StagedFile], None] | None = None,
                    folders: Sequence[FolderMove] = ()) -> None:
        """Complete the set's uploads concurrently; each object is checked (see
        ``uploads.publish_all``). An object store stages no folder: ``folders`` are
        files staged on a filesystem, which ``Storage.publish_all`` renames."""
        if folders:
            super().publish_all(files, after_each, folders)
            return
        if not files:
            return
        fs, _ = self.fs(files[0].final)
        uploads.publish_all(fs, files, after_each, self.capabilities.parallel_ops, self._extra)

    def discard(self, staged: Staged) -> None:
        if staged.upload_id:
            fs, _ = self.fs(staged.location)
            s3.abort(fs, staged.location, staged.upload_id)
        elif staged.needs_rename:
            super().discard(staged)

    def set_mtime(self, url: str, mtime: float | None) -> str | None:
        """Objects keep their own mtime (the time of the PUT)."""
        return None

    def sweep_orphans(self, prefix_url: str, keep: AbstractSet[str], older_than: float = 0.0,
                      dry_run: bool = False) -> int:
        fs, path = self.fs(prefix_url)
        aborted = 0
        for final, upload_id, initiated in list(s3.uploads(fs, fsutil.to_url(fs, path))):
            if upload_id in keep or not aged(initiated, older_than):
                continue
            if not dry_run:
                s3.abort(fs, final, upload_id)
            aborted += 1
        return aborted


#: What one file written by ``publish_wholes`` cost: one PutObject.
_ONE_PUT = ((request_count.KINDS["put_object"], 1),)


def _published(fs: Any, keys: Sequence[tuple[str, str]], finals: Sequence[str],
               sent: Iterator[tuple[int, bool | None]]
               ) -> Iterator[tuple[int, Staged | None, request_count.Counts]]:
    """``publish_wholes``' answers: each object written and checked is published (and
    forgotten by ``fs``'s cached listings, as ``s3.put`` does)."""
    for index, ok in sent:
        if not ok:
            yield index, None, ()
            continue
        s3.written(fs, *keys[index])
        yield index, Staged.published(finals[index]), _ONE_PUT


def _create_headers(data: bytes) -> dict[str, str]:
    return {"Content-MD5": s3.content_md5(data), "If-None-Match": "*"}


def _refused_again(fs: Any, bucket: str, key: str, data: bytes) -> bool | None:
    """Whether the server refuses a PutObject If-None-Match of a key just written (the
    same bytes: one that takes it changes nothing); None when its answer says neither
    (another error: asked again at the next create, which it never fails)."""
    try:
        s3get.put(fs, "put_object", bucket, key, data, {}, _create_headers(data))
    except OSError as exc:
        return True if s3.precondition_failed(exc) else None
    return False


#: Endpoints (by digest) whose servers wrote over a key on a second create.
WRITES_OVER = "s3-writes-over"


def _writes_over(endpoint: str) -> bool:
    try:
        with open(user_cache(WRITES_OVER), encoding="ascii") as known:
            return _endpoint_key(endpoint) in known.read().split()
    except (OSError, ValueError):
        return False


def _remember_writes_over(endpoint: str) -> None:
    try:
        os.makedirs(os.path.dirname(user_cache(WRITES_OVER)), exist_ok=True)
        with open(user_cache(WRITES_OVER), "a", encoding="ascii") as known:
            known.write(_endpoint_key(endpoint) + "\n")
    except OSError:
        pass  # found out again by the next run


def _endpoint_key(endpoint: str) -> str:
    """A digest: an endpoint URL could carry a user name, never written in the clear."""
    return hashlib.sha256(endpoint.encode()).hexdigest()[:32]
