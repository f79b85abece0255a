"""Part files of a split file joined into its one staging file (executor).

On filesystems that can neither write at an offset (local) nor hold parts of
one object (S3 multipart uploads) -- FTP, SFTP, WebDAV and the like -- each
range of a split file is its own part file (``Storage.write_range``). After the
range job, one join task per split file (``distcp.copying.join``) asks its storage
to finish the file: the parts are concatenated, in order, into the file's staging
file (``<state>/splits/<guid>/data``), which is then published like any staged
file (a rename). It is a second pass over the bytes on the destination.

The join writes to a per-attempt temporary name, checks what it read from each
part against that range's record, re-reads what it wrote against the composed
digest of the ranges, and only then renames it to ``data`` and removes the part
files: a run killed at any point leaves either the parts (and their records) or
a verified ``data`` for the next run. A part that no longer matches its record
loses the record, so the next run copies that range again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distcp.checksum import Digest, compose, digest_of_stream
from distcp.errors import IntegrityError
from distcp.faults import crash_point
from distcp.storage import filesystems as fsutil


@dataclass(frozen=True, slots=True)
class SplitParts:
    """A split file whose ranges are part files: where they are, what they must become.

    ``staging`` is the joined file's name (``data``), ``checksum`` the composed digest
    of the ranges (empty: not checked), ``origin`` the source URL errors name.
    """

    staging: str
    folder: str
    count: int
    size: int
    checksum: str
    origin: str


#: How a storage concatenates the part files into the temporary file: (job, the ranges'
#: records, temporary path, options, buffer). By default a task reads and writes them
#: (``_concatenate``); a store that joins objects itself passes its own (GCS: compose).
Concatenate = Callable[[SplitParts, list[dict[str, Any]], str, dict[str, Any], bytearray],
                       None]


def join_parts(job: SplitParts, options: dict[str, Any], buffer: bytearray, verify: str,
               attempt: str, concatenate: Concatenate | None = None) -> None:
    """Concatenate, verify, rename into place, remove the parts; raises what failed."""
    fs, target = fsutil.filesystem(job.staging, options)
    if not _already_joined(fs, target, job, buffer, verify):
        records = _records(job, options)
        tmp = f"{target}.{attempt}.tmp"
        try:
            (concatenate or _concatenate)(job, records, tmp, options, buffer)
            _verify(fs, tmp, job, buffer, verify)
            if fs.exists(target):
                fs.rm_file(target)  # a stale, unverified one: mv need not replace
            fs.mv(tmp, target)
        except BaseException:
            _remove_quietly(fs, tmp)
            raise
    crash_point("after_join")
    _remove_parts(fs, job.folder, options)


def _already_joined(fs: Any, target: str, job: SplitParts, buffer: bytearray, verify: str) -> bool:
    """An earlier attempt or run joined and verified it (``data`` appears only then)."""
    try:
        if fs.size(target) != job.size:
            return False
    except FileNotFoundError:
        return False
    try:
        _verify(fs, target, job, buffer, verify)
    except IntegrityError:
        _remove_quietly(fs, target)  # join it again from the parts, if they are there
        return False
    return True


def _records(job: SplitParts, options: dict[str, Any]) -> list[dict[str, Any]]:
    fs, folder = fsutil.filesystem(job.folder, options)
    out = []
    for i in range(job.count):
        path = fsutil.join(folder, f"r{i}.json")
        try:
            out.append(json.loads(fs.cat_file(path)))
        except FileNotFoundError as exc:
            raise IntegrityError(f"{fsutil.display(job.origin)}: the record of range {i} "
                                 "vanished before the join; the next run copies it again",
                                 path=job.staging) from exc
    return out


def _concatenate(job: SplitParts, records: list[dict[str, Any]], tmp: str, options: dict[str, Any],
                 buffer: bytearray) -> None:
    """Parts in order into ``tmp``; each part's bytes checked against its record.

    Reads and writes go through two filesystem instances: on FTP one control
    connection cannot run a download and an upload at once.
    """
    out_fs, _ = fsutil.filesystem(job.staging, options)
    in_fs, folder = fsutil.filesystem(job.folder, options)
    view = memoryview(buffer)
    with out_fs.open(tmp, "wb", block_size=len(buffer)) as out:
        for i, rec in enumerate(records):
            part = fsutil.join(folder, str(rec.get("part", "")))
            got = Digest()
            with in_fs.open(part, "rb", block_size=len(buffer)) as f:
                while n := f.readinto(view):
                    got.update(view[:n])
                    out.write(view[:n])
            if got.size != rec["length"] or got.blocks().hex() != rec["blocks"]:
                _forget_range(in_fs, folder, i, part)
                raise IntegrityError(
                    f"{fsutil.display(job.origin)}: part file of range {i} differs "
                    "from its record; the next run copies that range again", path=part)


def _verify(fs: Any, path: str, job: SplitParts, buffer: bytearray, verify: str) -> None:
    """The joined file's size, and with ``--verify digest`` its bytes re-read."""
    shown = fsutil.display(job.origin)
    fs.invalidate_cache()  # the file was written through another instance (FTP: listings)
    size = fs.size(path)
    if size != job.size:
        raise IntegrityError(f"{shown}: joined file holds {size} bytes, its ranges {job.size}",
                             path=path)
    if verify != "digest" or not job.checksum:
        return
    with fs.open(path, "rb", block_size=len(buffer)) as f:
        got = digest_of_stream(f, buffer)
    if compose([got.blocks()]) != job.checksum:
        raise IntegrityError(f"{shown}: joined file differs from its ranges (digest "
                             f"{compose([got.blocks()])}, ranges {job.checksum})",
                             path=path)


def _forget_range(fs: Any, folder: str, index: int, part: str) -> None:
    """Drop a bad part and its record, so that the next run copies the range again."""
    for path in (fsutil.join(folder, f"r{index}.json"), part):
        _remove_quietly(fs, path)


def _remove_parts(fs: Any, folder_url: str, options: dict[str, Any]) -> None:
    """Remove every part file of the folder (the verified ones and lost attempts')."""
    pfs, folder = fsutil.filesystem(folder_url, options)
    for info in pfs.ls(folder, detail=True):  # FTP's detail=False gives bare names
        base = info["name"].rstrip("/").rsplit("/", 1)[-1]
        if base.startswith("p") and "-" in base:
            _remove_quietly(pfs, info["name"])


def _remove_quietly(fs: Any, path: str) -> None:
    try:
        fs.rm_file(path)
    except Exception:  # noqa: BLE001, S110 - ftplib's errors are no OSError
        pass  # gone already, or left for the removal of the split's folder at publish
