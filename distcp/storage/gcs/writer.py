"""A stream staged on GCS: a small one in one checked upload, a long one through gcsfs (executor).

Staging through gcsfs as any filesystem does (``distcp.storage.files.FileWriter``) costs a
small file about eight requests: a resumable upload's start and its one chunk, two
metadata reads for the size check and two more with the reads of ``--verify digest``,
then the metadata PATCH of its mtime. rclone sends one. So a stream is held in memory
until it is longer than one part (``part_size``): a shorter one goes up in ONE upload
request, its metadata (mtime, mode) in the same request, its MD5 computed by the SDK
and checked against the one the service answers with for the object it stored (a
mismatch deletes the object and raises), and the answer's size checked against the
bytes read.
That check stands in for reading the object back: the service's own digest of the
bytes it holds is compared with the bytes sent. A longer stream continues through
gcsfs, checked as before (its size, and with ``--verify digest`` its bytes re-read).

With ``hold_small`` (``--visibility file``) a short stream is not sent at all: it comes
back in memory, and once its source is checked ``GcsStorage.publish_whole`` uploads it
to its final name in that one checked request, where staging, a rewrite, a delete and
a check of the final object took four.
"""

from __future__ import annotations

from typing import Any

from google.api_core import exceptions as gexc
from google.resumable_media import common as media

from distcp.checksum import Digest
from distcp.errors import DestinationWriteError, IntegrityError
from distcp.storage import filesystems as fsutil
from distcp.storage.files import FileWriter
from distcp.storage.gcs import objects, uploads
from distcp.storage.staged import Staged
from distcp.storage.staging import StagedStream, StageWriter


class HeldWriter(StageWriter):
    """Bytes held until they pass ``part_size``; then a ``FileWriter`` takes over. With
    ``hold_small`` a stream that never passed it comes back unsent (module docstring)."""

    def __init__(self, options: dict[str, Any], fs: Any, path: str, url: str, verify: str,
                 part_size: int, hold_small: bool = False) -> None:
        self.options, self.fs, self.path, self.url = options, fs, path, url
        self.verify, self.part_size, self.hold_small = verify, part_size, hold_small
        self._held = bytearray()
        self._long: FileWriter | None = None
        self._metadata: dict[str, str] = {}

    attributes_with_bytes = True

    def keep_attributes(self, mode: int | None, mtime: float | None) -> bool:
        """The mtime and mode go up as the object's metadata, with its bytes (a stream
        handed to gcsfs gets them once it is staged: one PATCH)."""
        self._metadata = objects.kept_attributes(mode, mtime)
        return True

    def write(self, chunk: memoryview) -> None:
        if self._long is not None:
            self._long.write(chunk)
            return
        self._held += chunk
        if len(self._held) > self.part_size:
            self._long = FileWriter(self.fs, self.path, self.url, self.verify)
            self._long.write(memoryview(self._held))
            self._held = bytearray()

    def commit(self, digest: Digest, buffer: bytearray) -> StagedStream:
        if self._long is not None:
            staged = self._long.commit(digest, buffer)
            if self._metadata:
                try:
                    objects.set_metadata(self.options, self.path, self._metadata)
                except (gexc.GoogleAPIError, OSError) as exc:
                    self._long.abort()
                    raise self.failure(OSError(str(exc))) from exc
            return staged
        body = bytes(self._held)
        if self.hold_small:  # per-file visibility: one upload to the final name, later
            return StagedStream(None, digest.size, digest.hexdigest(), body=body)
        try:
            held = uploads.upload(self.options, self.path, body, self._metadata)
        except (gexc.GoogleAPIError, media.DataCorruption, OSError) as exc:
            raise self.failure(exc if isinstance(exc, OSError) else OSError(str(exc))) from exc
        finally:
            self.fs.invalidate_cache()
        if held != digest.size or len(body) != digest.size:
            objects.delete(self.options, self.path)
            raise IntegrityError(f"size differs: read {digest.size} bytes but staged {held} "
                                 f"({fsutil.display(self.url)})", path=self.url)
        return StagedStream(Staged.path(self.url), digest.size, digest.hexdigest())

    def abort(self) -> None:
        if self._long is not None:
            self._long.abort()
        self._held = bytearray()  # nothing was sent: the upload is the commit

    def failure(self, exc: OSError) -> Exception:
        return DestinationWriteError(
            f"cannot write staging copy {fsutil.display(self.url)}: {exc}", path=self.url)
