"""The executor's writer and the join of part files, driven directly (no Spark), on real
disk and through fsspec. A staged copy is either whole and verified or absent; a read
failure stays a read failure (DistCp's rule); a join never leaves a half-joined file."""

from __future__ import annotations

import errno
import io
import itertools
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import fsspec
import pytest

from distcp.checksum import Digest, digest_of_bytes
from distcp.copying.join import Join, join_file
from distcp.copying.writer import SourceReader, write_staged
from distcp.errors import ConversionError, DestinationWriteError, SourceReadError
from distcp.model import TaskResult

DATA = b"".join(b"%06d:" % i + bytes(range(i % 251)) for i in range(2000))


class FailingAfter(io.RawIOBase):
    """A real stream that fails like a dying disk after ``n`` bytes (EIO), or raises
    ``exc`` (a converter rejecting its input)."""

    def __init__(self, data: bytes, n: int, exc: BaseException | None = None) -> None:
        self.inner = io.BytesIO(data)
        self.left = n
        self.exc = exc

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.left <= 0:
            raise self.exc or OSError(errno.EIO, "Input/output error")
        chunk = self.inner.read(min(len(buffer), self.left))
        self.left -= len(chunk)
        buffer[:len(chunk)] = chunk
        return len(chunk)


# ---- write_staged -------------------------------------------------------------------

@pytest.mark.parametrize("verify", ["size", "digest"])
def test_a_stream_is_staged_whole_with_its_digest(tmp_path: Path, verify: str) -> None:
    out = tmp_path / "staging" / "f0"
    out.parent.mkdir()
    staged = write_staged(io.BytesIO(DATA), str(out), {}, bytearray(4096), verify)
    assert out.read_bytes() == DATA
    assert (staged.url, staged.size, staged.checksum) == (str(out), len(DATA),
                                                          digest_of_bytes(DATA))


def test_a_local_source_file_is_staged_by_the_kernel_copy_identically(tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(DATA)
    out = tmp_path / "f0"
    with open(src, "rb") as raw:
        reader = SourceReader(raw, str(src))
        staged = write_staged(reader, str(out), {}, bytearray(4096), "digest")
    assert out.read_bytes() == DATA
    assert (staged.size, staged.checksum, reader.count) == (len(DATA), digest_of_bytes(DATA),
                                                            len(DATA))


def test_staging_through_an_fsspec_filesystem() -> None:
    fs = fsspec.filesystem("memory")
    try:
        staged = write_staged(io.BytesIO(DATA), "memory://pydistcp-writer/f0", {},
                              bytearray(4096), "digest")
        assert fs.cat_file("/pydistcp-writer/f0") == DATA
        assert staged.checksum == digest_of_bytes(DATA)
    finally:
        fs.rm("/pydistcp-writer", recursive=True)


def test_a_read_failure_is_a_source_error_and_leaves_no_staged_file(tmp_path: Path) -> None:
    out = tmp_path / "f0"
    reader = SourceReader(FailingAfter(DATA, 10_000), "/data/src.bin")  # type: ignore[arg-type]
    with pytest.raises(SourceReadError, match="^cannot read /data/src.bin: .*Input/output error"):
        write_staged(reader, str(out), {}, bytearray(4096), "digest")
    assert not out.exists()


def test_a_converter_rejecting_its_input_leaves_no_staged_file(tmp_path: Path) -> None:
    out = tmp_path / "f0"
    bad = FailingAfter(DATA, 5000, ConversionError("cannot gunzip /x.gz: corrupt", path="/x.gz"))
    with pytest.raises(ConversionError, match="cannot gunzip /x.gz"):
        write_staged(bad, str(out), {}, bytearray(4096), "size")
    assert not out.exists()


def test_an_unwritable_staging_path_is_a_destination_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "staging").write_bytes(b"a file where the staging directory must be")
    out = tmp_path / "staging" / "f0"
    with pytest.raises(DestinationWriteError, match=f"^cannot write staging copy {out}: "):
        write_staged(io.BytesIO(DATA), str(out), {}, bytearray(4096), "size")
    assert (tmp_path / "staging").read_bytes().startswith(b"a file where")


# ---- join_file ----------------------------------------------------------------------

RANGES = (0, 4000, 9000, len(DATA))


def _split(tmp_path: Path) -> Join:
    """Three ranges of DATA as part files with their records, as the range tasks leave
    them on a filesystem without offset writes."""
    folder = tmp_path / "splits" / "guid1"
    folder.mkdir(parents=True)
    for i, (a, b) in enumerate(itertools.pairwise(RANGES)):
        part = f"p{i}-t{i}"
        (folder / part).write_bytes(DATA[a:b])
        d = Digest()
        d.update(DATA[a:b])
        (folder / f"r{i}.json").write_text(json.dumps(
            {"index": i, "offset": a, "length": b - a, "etag": "", "blocks": d.blocks().hex(),
             "part": part}))
    result = TaskResult(guid="guid1", unit_id=7, attempt="", origin="/src/big.bin",
                        destination="/dst/big.bin", dataset_urn="urn", file_set="all",
                        status="ok", staging=str(folder / "data"), bytes_written=len(DATA),
                        checksum=digest_of_bytes(DATA), records=str(folder))
    return Join(result, str(folder), len(RANGES) - 1, len(DATA))


def _names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


def test_join_concatenates_verifies_and_removes_the_parts(tmp_path: Path) -> None:
    job = _split(tmp_path)
    got = join_file(job, {}, bytearray(4096), "digest", "a1")
    assert got == replace(job.result, attempt="a1")  # the driver's result, now joined
    assert Path(job.result.staging).read_bytes() == DATA
    assert _names(Path(job.folder)) == ["data", "r0.json", "r1.json", "r2.json"]


def test_joining_again_after_a_crash_keeps_the_verified_file(tmp_path: Path) -> None:
    job = _split(tmp_path)
    join_file(job, {}, bytearray(4096), "digest", "a1")
    again = join_file(job, {}, bytearray(4096), "digest", "a2")
    assert again.ok and Path(job.result.staging).read_bytes() == DATA


def test_a_stale_joined_file_of_the_right_size_is_joined_again(tmp_path: Path) -> None:
    job = _split(tmp_path)
    Path(job.result.staging).write_bytes(b"\0" * len(DATA))  # an unverified leftover
    got = join_file(job, {}, bytearray(4096), "digest", "a1")
    assert got.ok and Path(job.result.staging).read_bytes() == DATA


def test_a_part_that_differs_from_its_record_fails_and_only_that_range_is_forgotten(
        tmp_path: Path) -> None:
    job = _split(tmp_path)
    folder = Path(job.folder)
    part = folder / "p1-t1"
    part.write_bytes(b"X" + part.read_bytes()[1:])
    got = join_file(job, {}, bytearray(4096), "digest", "a1")
    assert (got.status, got.error_type, got.staging) == ("failed", "IntegrityError", "")
    assert got.message == ("/src/big.bin: part file of range 1 differs from its record; "
                           "the next run copies that range again")
    assert _names(folder) == ["p0-t0", "p2-t2", "r0.json", "r2.json"]  # no data, no temp


def test_a_vanished_record_fails_the_join_naming_the_range(tmp_path: Path) -> None:
    job = _split(tmp_path)
    os.unlink(Path(job.folder) / "r2.json")
    got = join_file(job, {}, bytearray(4096), "digest", "a1")
    assert not got.ok
    assert got.message.startswith("/src/big.bin: the record of range 2 vanished")
    assert not Path(job.result.staging).exists()


def test_a_join_travels_to_executors_by_pickle(tmp_path: Path) -> None:
    import pickle

    job = _split(tmp_path)
    assert pickle.loads(pickle.dumps(job)) == job
