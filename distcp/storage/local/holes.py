"""A local file's data segments and holes; digests that skip holes (driver and executor).

A sparse file (fewer blocks allocated than its size) reads as zeros where it has holes;
``SEEK_DATA``/``SEEK_HOLE`` find them without reading. Copies keep the holes
(``distcp.storage.local.copyfile``) and verifying a local copy reads only its data segments, while
the digest stays that of the full logical content: the same as any other path computes
(``distcp.checksum``), so manifests compare across runs. Stdlib, ``checksum`` and ``storage.buffers`` only,
so the commit side may use it as well as the executors.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator

from distcp.checksum import BLOCK, Digest
from distcp.storage.buffers import ReadBuffer, aligned

#: Bytes read and hashed at a time: a piece that stays in the CPU cache between the
#: read and the hash (2 GiB verified in 1.54 s with 1 MiB, 1.88 s with 8 MiB; benchmarks/RESULTS.md).
HASH_CHUNK = 1 << 20

_ZEROS = bytes(HASH_CHUNK)


def is_sparse(fd: int) -> bool:
    """Fewer bytes allocated than the size says: worth looking for holes."""
    st = os.fstat(fd)
    return st.st_blocks * 512 < st.st_size


def segments(fd: int, start: int, end: int) -> Iterator[tuple[int, int, bool]]:
    """(start, stop, is_data) pieces of ``[start, end)``: one data piece for a dense file."""
    if start >= end:
        return
    if not is_sparse(fd):
        yield start, end, True
        return
    pos = start
    while pos < end:
        try:
            data = min(os.lseek(fd, pos, os.SEEK_DATA), end)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # EINVAL: no SEEK_DATA here, read it all
                yield pos, end, True
                return
            data = end  # only a hole left up to the end of the file
        if data > pos:
            yield pos, data, False
        if data >= end:
            return
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        yield data, hole, True
        pos = hole


def hash_zeros(digest: Digest, length: int) -> None:
    """Hash ``length`` zero bytes (a hole) from one shared zero buffer."""
    while length > 0:
        take = min(length, len(_ZEROS))
        digest.update(_ZEROS[:take] if take < len(_ZEROS) else _ZEROS)
        length -= take


def digest_span(fd: int, offset: int, length: int, buffer: bytearray) -> Digest:
    """Digest of ``length`` bytes of ``fd`` at ``offset``, holes hashed as zeros unread.

    Stops early at the end of the file: the caller compares sizes or digests.
    """
    digest = Digest()
    view = aligned(buffer)[:HASH_CHUNK]
    for start, stop, data in segments(fd, offset, offset + length):
        if not data:
            hash_zeros(digest, stop - start)
            continue
        pos = start
        while pos < stop:
            n = os.preadv(fd, [view[:min(len(view), stop - pos)]], pos)
            if not n:
                return digest
            digest.update(view[:n])
            pos += n
    return digest


#: A file of at least this many bytes is read by ``readers`` threads at once, each a
#: span of whole digest blocks: ``os.preadv`` and xxhash let go of the GIL, so the
#: threads read and hash on every core. The publish's re-read of a 2 GiB file joined
#: from ranges (``CheckDigests``) took 0.33 s on one core here (2026-12-03).
SPANS_FROM = 256 << 20


def digest_of_file(path: str, buffer: bytearray, readers: int = 1) -> Digest:
    """Digest of the whole file at ``path`` (a re-read of a local copy), by ``readers``
    threads when it is big (``SPANS_FROM``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if readers > 1 and st.st_size >= SPANS_FROM:
            return _digest_in_spans(fd, st.st_size, buffer, readers)
        return digest_of_fd(fd, buffer, st)
    finally:
        os.close(fd)


def _digest_in_spans(fd: int, size: int, buffer: bytearray, readers: int) -> Digest:
    """``fd``'s digest from ``readers`` spans hashed at once (this thread hashes the
    first into ``buffer``); a span that ends short (the file shrank) ends the digest
    there, so its size tells the caller. Every thread has ended before this returns or
    raises: the caller closes ``fd`` next."""
    span = -(-size // readers // BLOCK) * BLOCK
    spans = [(at, min(span, size - at)) for at in range(0, size, span)]
    parts: list[Digest] = [Digest()] * len(spans)
    failed: list[Exception] = []

    def hash_span(i: int, into: bytearray) -> None:
        try:
            parts[i] = digest_span(fd, *spans[i], into)
        except Exception as exc:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(exc)

    threads = [threading.Thread(target=hash_span, args=(i, ReadBuffer(HASH_CHUNK)),
                                name="digest-span", daemon=True)
               for i in range(1, len(spans))]
    for t in threads:
        t.start()
    try:
        hash_span(0, buffer)
    finally:
        for t in threads:
            t.join()
    if failed:
        raise failed[0]
    short = next((i for i, part in enumerate(parts) if part.size < spans[i][1]), len(parts) - 1)
    return Digest.joined(parts[:short + 1])


def digest_of_fd(fd: int, buffer: bytearray, st: os.stat_result | None = None) -> Digest:
    """Digest of the whole file open at ``fd``, whatever its position (``st``: its
    status, if the caller has it).

    A dense file that fits the buffer is one read: the verify of each small file of a
    million, where the general loop's steps cost more than the read."""
    st = st if st is not None else os.fstat(fd)
    view = aligned(buffer)
    if st.st_size < min(len(view), HASH_CHUNK) and st.st_blocks * 512 >= st.st_size:
        view = view[:st.st_size]
        digest = Digest()
        digest.update(view[:os.preadv(fd, [view], 0)])
        return digest
    return digest_span(fd, 0, st.st_size, buffer)
