"""Block-composite digests, range sizing and the joining of split results (no Spark, no I/O)."""

from __future__ import annotations

import os
import pickle
from dataclasses import replace

import pytest
from pyspark import cloudpickle

from distcp.checksum import BLOCK, Digest, compose, digest_of_bytes
from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.model import CopyableFile, FileStatus, Split, TaskResult, WorkUnit
from distcp.planning.splitting import SplitFile, assemble_ranges, range_size, units_for
from distcp.storage.local.storage import LocalStorage
from distcp.storage.s3.storage import ObjectStorage

MiB = 1 << 20


def test_a_file_split_anywhere_on_block_boundaries_has_its_whole_digest() -> None:
    data = os.urandom(7 * BLOCK + 12345)
    whole = digest_of_bytes(data)
    for cut in (BLOCK, 3 * BLOCK, 7 * BLOCK):
        a, b = Digest(), Digest()
        a.update(data[:cut])
        b.update(data[cut:])
        assert compose([a.blocks(), b.blocks()]) == whole
    odd = Digest()
    for i in range(0, len(data), 777_777):  # reads that straddle block boundaries
        odd.update(data[i:i + 777_777])
    assert odd.hexdigest() == whole and odd.size == len(data)
    assert digest_of_bytes(b"") == compose([]) and whole.startswith("xxh3c128-1m:")
    assert digest_of_bytes(data[:-1]) != whole


def test_digests_of_spans_join_into_the_whole_files_digest() -> None:
    """What the spans a publish re-reads at once (``holes.digest_of_file``) hash into:
    the digest one ``Digest`` gives the same bytes, the last span's partial block
    included; a span before the last must end on a block boundary."""
    data = os.urandom(5 * BLOCK + 999)
    parts = [Digest(), Digest(), Digest()]
    for part, (a, b) in zip(parts, [(0, 2 * BLOCK), (2 * BLOCK, 4 * BLOCK), (4 * BLOCK, None)]):
        part.update(data[a:b])
    joined = Digest.joined(parts)
    assert joined.hexdigest() == digest_of_bytes(data) and joined.size == len(data)
    joined.update(b"more")  # it goes on as the whole file's digest would
    assert joined.hexdigest() == digest_of_bytes(data + b"more")
    assert parts[2].hexdigest() == digest_of_bytes(data[4 * BLOCK:])  # parts untouched
    with pytest.raises(ValueError, match="inside a block"):
        Digest.joined([parts[2], parts[0]])


def test_range_sizes_are_whole_mib_and_respect_s3_part_rules() -> None:
    assert range_size(10 << 30, 3 * MiB + 1, LocalStorage()) == 4 * MiB
    assert range_size(10 << 30, 1 * MiB, ObjectStorage()) == 5 * MiB  # S3's minimum part
    huge = 100 << 30  # 100 GiB at 8 MiB would be 12,800 parts
    size = range_size(huge, 8 * MiB, ObjectStorage())
    assert -(-huge // size) <= 10_000 and size % MiB == 0


def file(size: int) -> CopyableFile:
    return CopyableFile(FileStatus("/src/big", size, 1.0), "/dst/big", "urn", "all")


def test_units_cover_the_missing_ranges_and_results_join_in_order() -> None:
    sf = SplitFile(file(10 * MiB + 5), 4 * MiB, "/state/splits/g/data", "/state/splits/g")
    assert sf.count == 3 and sf.split(2).length == 2 * MiB + 5
    sf.done = {1: {"etag": "", "blocks": "", "length": 4 * MiB}}
    units = units_for(sf, 7)
    assert [(u.unit_id, u.split.index) for u in units] == [(7, 0), (8, 2)]  # type: ignore[union-attr]
    data = os.urandom(sf.file.origin.size)
    results = []
    for i in (2, 0, 1):  # any order
        s = sf.split(i)
        d = Digest()
        d.update(data[s.offset:s.offset + s.length])
        results.append(TaskResult(sf.file.guid, i, "a0", "/src/big", "/dst/big", "urn", "all",
                                  "ok", staging=sf.staging, bytes_read=s.length,
                                  bytes_written=s.length, split_index=i, blocks=d.blocks().hex()))
    sf.done = {}
    (joined,) = assemble_ranges(results, {sf.file.guid: sf})
    assert joined.ok and joined.checksum == digest_of_bytes(data)
    assert joined.bytes_written == len(data) and joined.records == sf.records
    failed = replace(results[0], status="failed", message="boom")
    (bad,) = assemble_ranges([failed, *results[1:]], {sf.file.guid: sf})
    assert not bad.ok and bad.message == "boom"
    (lost,) = assemble_ranges(results[1:], {sf.file.guid: sf})
    assert not lost.ok and "1 of 3 ranges" in lost.message


def test_split_values_pickle_for_executors() -> None:
    unit = WorkUnit(3, (file(9),), Split(1, 2, 4, 5, "s3-upload:id:s3://b/k", "s3://b/.p/s/g"))
    result = TaskResult("g", 3, "a0", "o", "d", "u", "f", "ok", parts=((1, '"e"', 5),),
                        split_index=1, blocks="00" * 16, records="r", bytes_server_side=5)
    for value in (unit, result):
        assert pickle.loads(pickle.dumps(value)) == value
        assert cloudpickle.loads(cloudpickle.dumps(value)) == value


def test_split_size_with_a_converter_is_refused_at_configuration_time() -> None:
    with pytest.raises(ConfigurationError, match="--split-size cannot be used with --convert"):
        CopyConfiguration.build(["/a"], "/b", split_size="256M", converters=["gunzip"])
    with pytest.raises(ConfigurationError, match="at least 1M"):
        CopyConfiguration.build(["/a"], "/b", split_size=1000)
    assert CopyConfiguration.build(["/a"], "/b", split_size="256M").split_size == 256 * MiB


def test_credentials_inside_a_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(ConfigurationError) as info:
        CopyConfiguration.build(["s3://AKIA123:s3cr3tvalue@bucket/x"], "/dst")
    assert "s3cr3tvalue" not in str(info.value)
    assert CopyConfiguration.build(["s3://bucket/a:b@c"], "/dst")  # a key may hold ':' and '@'


def range_results(sf: SplitFile, data: bytes, blocks: bool = True) -> list[TaskResult]:
    out = []
    for i in range(sf.count):
        s = sf.split(i)
        d = Digest()
        d.update(data[s.offset:s.offset + s.length])
        out.append(TaskResult(sf.file.guid, i, "a0", "/src/big", "/dst/big", "urn", "all", "ok",
                              staging=sf.staging, bytes_read=s.length + 1,
                              bytes_written=s.length, split_index=i,
                              blocks=d.blocks().hex() if blocks else "",
                              parts=((i + 1, f'"e{i}"', s.length),), bytes_server_side=i))
    return out


def test_an_assembled_local_file_gets_its_attributes_and_keeps_its_parts_in_order(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    staging = tmp_path / "data"
    data = os.urandom(2 * MiB + 3)
    staging.write_bytes(data)
    f = replace(file(len(data)), mode=0o640, preserve="pt")
    f = replace(f, origin=replace(f.origin, mtime=1_700_000_000.0))
    sf = SplitFile(f, MiB, str(staging), str(tmp_path))
    results = range_results(sf, data)
    (joined,) = assemble_ranges(list(reversed(results)), {f.guid: sf})
    assert joined.ok and joined.attempt == "split" and joined.unit_id == -1
    assert joined.checksum == digest_of_bytes(data) and joined.staging == str(staging)
    assert joined.bytes_read == len(data) + 3 and joined.bytes_written == len(data)
    assert joined.parts == ((1, '"e0"', MiB), (2, '"e1"', MiB), (3, '"e2"', 3))
    assert joined.bytes_server_side == 3 and joined.records == str(tmp_path)
    assert staging.stat().st_mode & 0o777 == 0o640
    assert staging.stat().st_mtime == 1_700_000_000.0


def test_a_missing_staging_or_a_range_without_blocks_still_assembles(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(MiB + 1)
    sf = SplitFile(file(len(data)), MiB, str(tmp_path / "gone"), str(tmp_path))
    results = range_results(sf, data)
    results[1] = replace(results[1], blocks="")
    (joined,) = assemble_ranges(results, {sf.file.guid: sf})
    assert joined.ok and joined.checksum == "" and not (tmp_path / "gone").exists()


def test_a_failed_range_fails_its_file_with_the_range_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(MiB + 1)
    sf = SplitFile(file(len(data)), MiB, str(tmp_path / "data"), str(tmp_path))
    results = range_results(sf, data)
    results[1] = replace(results[1], status="failed", error_type="SourceReadError",
                         message="boom")
    (bad,) = assemble_ranges(results, {sf.file.guid: sf})
    assert (bad.status, bad.error_type, bad.message) == ("failed", "SourceReadError", "boom")
    assert bad.retryable and bad.bytes_read == len(data) + 2 and bad.staging == ""
    (lost,) = assemble_ranges([], {sf.file.guid: sf})
    assert (lost.error_type, lost.message) == (
        "LostResult", "/src/big: 2 of 2 ranges not copied; the next run copies only those")
