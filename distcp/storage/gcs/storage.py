"""Google Cloud Storage (``gs://``, ``gcs://``) as a backend (driver and executor).

A file is staged as an object at its staging name (under the destination's state
directory, where no reader of the destination looks), and published by having the
service rewrite it to its final name, then deleting the staged object.

Why not a resumable upload finalised at publish, nor a compose of parts on the final
name: a resumable session takes chunks of multiples of 256 KiB and only the request
that carries the last bytes can finalise it, so a file's tail would have to wait in
the task until the driver publishes (the driver holds no bytes); its sessions cannot
be listed, so a crashed run's could not be swept; and neither emulator installable
here serves it as GCS does (fake-gcs-server shows the object after its first chunk
and answers a status query with 200, gcp-storage-emulator ignores the precondition
that makes the run lock exclusive). A rewrite within one location and storage class
is done by GCS in one call without copying the bytes (metadata only), is atomic for
readers (the object appears whole or not at all), keeps the staged object's metadata
(the mtime), and every emulator serves it. A split file's ranges are part files
composed by the service into the staging object (``distcp.storage.joins`` with
``finish_split``: no second pass over the bytes). GCS -> GCS is a rewrite
into the staging object (``copy_in``); ranges go through the tasks (no range rewrite).

A state document is one upload (atomic); the run lock one upload with
``ifGenerationMatch=0`` (exclusive). A tree is listed once through Google's SDK
(``walk``) and a unit's small objects are read from one thread with requests of this
package's own (``distcp.storage.gcs.reads``); a folder's entries, bigger reads and
staged streams go through gcsfs; everything else through the SDK, after which gcsfs's
cached listings are dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from google.api_core import exceptions as gexc
from google.resumable_media import common as media

from distcp.errors import DestinationWriteError, IntegrityError
from distcp.model import FileStatus
from distcp.storage import filesystems as fsutil
from distcp.storage.base import Capabilities, Storage
from distcp.storage.errors import ServerSideCopyUnsupported, VersionChanged
from distcp.storage.folders import FolderMove
from distcp.storage.gcs import objects, publishes, reads, uploads
from distcp.storage.gcs.probe import probe_problem
from distcp.storage.gcs.writer import HeldWriter
from distcp.storage.joins import SplitParts, join_parts
from distcp.storage.staged import Staged
from distcp.storage.staging import Parts, RangeAt, StagedFile, StagedStream, StageWriter

#: GCS's limit for an object name, in bytes of UTF-8.
MAX_NAME = 1024


class GcsStorage(Storage):
    """Google Cloud Storage and its emulators (fake-gcs-server)."""

    name = "gcs"
    capabilities = Capabilities(server_side_copy=True, directories=False,
                                conditional_reads=True, exclusive_create=True,
                                file_visibility=True)
    #: Requester pays is gcsfs's option, and the SDK's requests name the payer
    #: (``objects.bucket``).
    write_options = frozenset({"storage_class", "kms_key_id", "acl", "metadata",
                               "requester_pays"})
    own_metadata_keys = frozenset({objects.MTIME_KEY, objects.MODE_KEY})

    def _path(self, url: str) -> tuple[Any, str]:
        """The gcsfs filesystem of ``url`` and its ``bucket/name`` path."""
        fs, path = self.fs(url)
        return fs, path.rstrip("/")

    def _written(self, fs: Any) -> None:
        """Forget gcsfs's cached listings: an object was written or removed behind them."""
        fs.invalidate_cache()

    # -- reading ------------------------------------------------------------------
    def read_bytes(self, url: str, what: str) -> bytes:
        _, path = self._path(url)
        try:
            return bytes(objects.blob(self.options, path).download_as_bytes(
                timeout=objects.TIMEOUT))
        except gexc.NotFound as exc:
            raise FileNotFoundError(f"no {what} at {fsutil.display(url)}") from exc

    def read_version(self, url: str, etag: str) -> bytes:
        """One GET of the listed generation (what a GCS listing gives as a FileStatus's
        ``etag``): the bytes are that version's by construction. An object replaced
        since the listing has lost that generation (404 where the bucket keeps no
        versions; a bucket with versioning still serves the listed bytes): then one
        more request tells VersionChanged from a deleted object."""
        _, path = self._path(url)
        pinned = etag.isdigit()  # else an ETag (a manifest's): GET If-Match it
        try:
            return bytes(objects.blob(self.options, path, int(etag) if pinned else None)
                         .download_as_bytes(if_etag_match=None if pinned else etag,
                                            timeout=objects.TIMEOUT))
        except gexc.PreconditionFailed as exc:
            raise VersionChanged(f"{fsutil.display(url)} is no longer {etag}") from exc
        except gexc.NotFound as exc:
            if objects.exists(self.options, path):
                raise VersionChanged(f"{fsutil.display(url)} is no longer generation "
                                     f"{etag}") from exc
            raise FileNotFoundError(fsutil.display(url)) from exc

    def walk(self, url: str, links: str = "follow",
             skipped: list[fsutil.Skipped] | None = None, most: int | None = None
             ) -> Iterator[tuple[str, FileStatus]]:
        """The objects below the folder ``url`` from one listing through the SDK
        (``objects.listed``), the folders derived from their names and an object that is
        also a folder's name reported from the same listing (``fsutil.walk_keys``)."""
        fs, path = self._path(url)
        return fsutil.walk_keys(fs, path, objects.listed(self.options, fs, path), skipped)

    def reads_forked(self, url: str) -> bool:
        """A GCS source is read by the copying processes forked here: a child builds
        its own SDK client (``objects._after_fork``) and connections for the small
        objects' GETs (``reads._after_fork``), and gcsfs's filesystem is made anew
        there (fsspec drops its instances and its event loop in a child). A chain
        (``zip::gs://``) is not: its layers are fsspec's, made here."""
        return "::" not in url

    def read_versions(self, wanted: Sequence[tuple[str, str]]
                      ) -> Iterator[tuple[int, bytes | None]] | None:
        """Small objects' listed generations read from one thread over kept
        connections (``distcp.storage.gcs.reads``); None where that way cannot send."""
        if not wanted:
            return None
        return reads.fetch(self.options, [(self._path(url)[1], generation)
                                          for url, generation in wanted])

    def probe(self, url: str, setting: str) -> None:
        """The bucket's metadata, asked once without retries: credentials found and
        accepted, endpoint reachable, bucket there (``probe`` words what went wrong)."""
        bucket = ""
        try:
            _, path = self._path(url)
            bucket = objects.split(path)[0]
            objects.bucket(self.options, bucket, objects.build(self.options)).reload(
                timeout=(5, 20), retry=None)
        except Exception as exc:  # noqa: BLE001 - classified, re-raised as ours
            raise probe_problem(exc, url, bucket, setting) from None

    def name_problem(self, url: str) -> str | None:
        """GCS takes names of up to 1,024 bytes, without carriage returns or line feeds."""
        name = objects.split(self._path(url)[1])[1]
        if len(name.encode()) > MAX_NAME:
            return f"an object name is at most {MAX_NAME} bytes ({len(name.encode())} here)"
        if "\r" in name or "\n" in name:
            return "an object name cannot hold a carriage return or a line feed"
        return None

    # -- writing ------------------------------------------------------------------
    def write_atomic(self, url: str, data: bytes, durable: bool = True) -> None:
        fs, path = self._path(url)  # one upload: readers see the old or the new object
        objects.blob(self.options, path).upload_from_string(data, timeout=objects.TIMEOUT)
        self._written(fs)

    def create_new(self, url: str, data: bytes) -> bool:
        """One upload with ``ifGenerationMatch=0``: a 412 means someone was first; of
        writers racing for one name exactly one wins (``exclusive_create``)."""
        fs, path = self._path(url)
        try:
            objects.blob(self.options, path).upload_from_string(
                data, if_generation_match=0, timeout=objects.TIMEOUT)
        except gexc.PreconditionFailed:
            return False
        finally:
            self._written(fs)
        return True

    def prepare_folder(self, url: str) -> None:
        """Nothing: object names need no folder."""

    def makedirs(self, url: str) -> None:
        """Nothing: object names need no folder."""

    def remove(self, url: str) -> None:
        super().remove(url)
        self._written(self.fs(url)[0])

    def remove_file(self, url: str) -> None:
        fs, path = self._path(url)
        objects.delete(self.options, path)
        self._written(fs)

    # -- staging and publishing -----------------------------------------------------
    def stage(self, data: bytes, final_url: str, staging_url: str) -> tuple[Staged, Parts]:
        """One upload of ``data`` to the staging object."""
        self.write_atomic(staging_url, data)
        return Staged.path(staging_url), ()

    def open_stage(self, final_url: str, staging_url: str, *, verify: str = "size",
                   size_hint: int = 0, buffer_size: int = 0,
                   hold_small: bool = False) -> StageWriter:
        """The staging object, a stream of up to one part sent in one checked upload
        (``distcp.storage.gcs.writer``), a longer one through gcsfs. ``hold_small``: a
        stream of up to one part is kept in memory for ``publish_whole``, unless the new
        objects take write options (made by the rewrite that publishes them)."""
        fs, path = self._path(staging_url)
        return HeldWriter(self.options, fs, path, staging_url, verify,
                          buffer_size or (8 << 20),
                          hold_small=hold_small and not self.writes.for_objects)

    def publish_whole(self, url: str, body: bytes, mtime: float | None = None,
                      mode: int | None = None) -> Staged:
        """One upload of ``body`` to its final name, its mtime and mode in the same
        request (the object appears whole, with them); the service's MD5 of what it
        stored is checked against the body's (``uploads.upload``: a mismatch deletes it
        and raises) and its size against the body's."""
        fs, path = self._path(url)
        try:
            held = uploads.upload(self.options, path, body, objects.kept_attributes(mode, mtime))
        except (gexc.GoogleAPIError, media.DataCorruption, OSError) as exc:
            raise DestinationWriteError(f"cannot write {fsutil.display(url)}: {exc}",
                                        path=url) from exc
        finally:
            self._written(fs)
        if held != len(body):
            objects.delete(self.options, path)
            raise IntegrityError(f"{fsutil.display(url)}: the service holds {held} bytes, "
                                 f"not the {len(body)} sent", path=url)
        return Staged.published(url)

    def move(self, src: str, dst: str) -> None:
        """Publish: the service rewrites the staged object to ``dst``, then the staged
        object is deleted. A staged object gone (published by an interrupted run, or
        lost) raises FileNotFoundError, as a rename would."""
        fs, source = self._path(src)
        _, target = self._path(dst)
        try:
            objects.rewrite(self.options, source, target, self.writes)
        except gexc.NotFound as exc:
            raise FileNotFoundError(f"staged {fsutil.display(src)} is gone") from exc
        finally:
            self._written(fs)
        objects.delete(self.options, source)
        self._written(fs)

    def publish_all(self, files: Sequence[StagedFile],
                    after_each: Callable[[StagedFile], None] | None = None,
                    folders: Sequence[FolderMove] = ()) -> None:
        """A file set's staged objects rewritten to their final names, then deleted,
        from one thread (``distcp.storage.gcs.publishes``); what that way did not
        publish, a run with write options for the new objects (``rewrite_with``) and
        any folder staged on a filesystem go ``Storage.publish_all``'s way (``move``,
        through the SDK). ``after_each`` runs once a file's staged object is gone."""
        moving = [f for f in files if f.staged.needs_rename]
        pairs = [(self._path(f.staged.location)[1], self._path(f.final)[1])
                 for f in moving] if moving and not folders and not self.writes.for_objects \
            else []
        done = publishes.rewrites(self.options, pairs) if pairs else None
        if done is None:
            super().publish_all(files, after_each, folders)
            return
        fs = self.fs(moving[0].final)[0]
        try:
            rewritten = sorted(index for index, whole in done if whole)
        finally:
            self._written(fs)
        staged = [pairs[index][0] for index in rewritten]
        gone = publishes.deletes(self.options, staged) or (
            (n, False) for n in range(len(staged)))
        try:
            for n, deleted in gone:
                if not deleted:
                    objects.delete(self.options, staged[n])  # its error is the publish's
                if after_each is not None:
                    after_each(moving[rewritten[n]])
        finally:
            self._written(fs)
        published = set(rewritten)
        rest = [f for f in files if not f.staged.needs_rename]
        rest += [f for index, f in enumerate(moving) if index not in published]
        if rest:
            super().publish_all(rest, after_each)

    def copy_in(self, source_url: str, final_url: str, size: int,
                part_size: int, staging_url: str = "") -> StagedStream:
        """The service rewrites the source object into the staging object (GCS -> GCS
        with one set of credentials), published like any staged file; no byte comes
        through the task. The staged object must then hold ``size`` bytes."""
        if not staging_url:
            raise ServerSideCopyUnsupported("GCS rewrites into a staging object; none given")
        fs, target = self._path(staging_url)
        _, source = self._path(source_url)
        try:
            objects.rewrite(self.options, source, target)
            held = objects.size(self.options, target)
        except (gexc.GoogleAPIError, OSError) as exc:
            raise DestinationWriteError(f"cannot copy {fsutil.display(source_url)} to "
                                        f"{fsutil.display(staging_url)} server-side: {exc}",
                                        path=staging_url) from exc
        finally:
            self._written(fs)
        if held != size:
            objects.delete(self.options, target)
            raise IntegrityError(f"size differs: src {size} vs staged {held} "
                                 f"({fsutil.display(staging_url)})", path=staging_url)
        return StagedStream(Staged.path(staging_url), size, "", (), size)

    def copy_range(self, staged: Staged, at: RangeAt, source_url: str) -> str:
        """GCS rewrites whole objects only: a range's bytes come through the task."""
        raise ServerSideCopyUnsupported("GCS copies whole objects, not ranges")

    def finish_split(self, parts: SplitParts, buffer: bytearray, verify: str,
                     attempt: str) -> None:
        """Join a split file's part objects by compose: the service concatenates them,
        no byte passes through the task (``--verify digest`` still reads the result)."""
        join_parts(parts, self.options, buffer, verify, attempt, self._compose_parts)

    def _compose_parts(self, job: SplitParts, records: list[dict[str, Any]], tmp: str,
                       options: dict[str, Any], buffer: bytearray) -> None:
        """The part objects, each first checked to hold its range's length, composed in
        order into ``tmp`` (``bucket/name``, gcsfs's path, as the join names it)."""
        fs, folder = self._path(job.folder)
        fs.invalidate_cache()
        names = []
        for i, rec in enumerate(records):
            name = fsutil.join(folder, str(rec.get("part", "")))
            try:
                held = objects.size(self.options, name)
            except FileNotFoundError:
                held = -1
            if held != rec["length"]:
                raise IntegrityError(f"{fsutil.display(job.origin)}: part of range {i} holds "
                                     f"{held} bytes, its record {rec['length']}; the next "
                                     "run copies that range again", path=name)
            names.append(name)
        objects.compose_all(self.options, names, tmp.rstrip("/"))
        self._written(fs)

    def is_published(self, staged: Staged, final: str, size: int) -> bool:
        self._written(self.fs(final)[0])  # judged from what the store holds now
        return super().is_published(staged, final, size)

    def discard(self, staged: Staged) -> None:
        if staged.needs_rename:
            fs, path = self._path(staged.location)
            objects.delete(self.options, path)
            self._written(fs)

    def set_staged_attributes(self, url: str, *, mode: int | None, mtime: float | None,
                              owner: str | None, group: str | None) -> str | None:
        """Keep the mtime (and mode) as the staged object's metadata, under the keys
        gsutil and ``gcloud storage`` use (``-P``); the rewrite carries them to the
        final object, and listings read the mtime back (``distcp.storage.keptmtimes``;
        ``capabilities.mtimes`` stays False: modes are not read back, and a rerun skips
        what is not older than its source)."""
        values = objects.kept_attributes(mode, mtime)
        if not values:
            return None
        fs, path = self._path(url)
        objects.set_metadata(self.options, path, values)
        self._written(fs)
        return None

    def set_mtime(self, url: str, mtime: float | None) -> str | None:
        """Objects keep GCS's own time; the kept one is metadata (above)."""
        return None
