"""Values that travel to executors survive pickling, and guids are stable."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from pyspark import cloudpickle

from distcp.errors import ConversionError, SourceReadError
from distcp.model import CopyableDirectory, CopyableFile, FileStatus, Split, TaskResult, WorkUnit

ORIGIN = FileStatus(url="/data/ü b.txt", size=10, mtime=1700000000.25, mode=0o640)
FILE = CopyableFile(ORIGIN, "/dst/ü b.txt", "urn:x", "all", mode=0o640, converters=("gunzip",))
VALUES = [
    ORIGIN,
    FILE,
    CopyableDirectory(ORIGIN, "/dst", "urn:x", "all", 0o755, 1.5),
    WorkUnit(3, (FILE, FILE), Split(0, 2, 0, 5)),
    WorkUnit(4, (FILE,), publish_now=(FILE.guid,)),
    TaskResult(FILE.guid, 3, "s0p1a0", ORIGIN.url, FILE.destination, "urn:x", "all", "ok",
               staging="/s/0-0", bytes_written=10, checksum="xxh3_128:ab",
               requests=(("part", 2), ("put", 1))),
    FileStatus(url="/data/l", size=5, mtime=1.5, link_target="../ü"),
    TaskResult("g", 3, "s0p1a0", "/data/l", "/dst/l", "urn:x", "all", "ok",
               staging="/s/0-1", bytes_written=4, link_target="../ü"),
]


def test_a_links_guid_depends_on_its_target_text() -> None:
    a = CopyableFile(FileStatus("/s/l", 1, 5.0, link_target="a"), "/d/l", "u", "all")
    b = CopyableFile(FileStatus("/s/l", 1, 5.0, link_target="b"), "/d/l", "u", "all")
    plain = CopyableFile(FileStatus("/s/l", 1, 5.0), "/d/l", "u", "all")
    assert len({a.guid, b.guid, plain.guid}) == 3


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_model_values_round_trip(value: object, dumps) -> None:  # type: ignore[no-untyped-def]
    assert pickle.loads(dumps(value)) == value


def test_guid_is_stable_across_processes() -> None:
    code = ("from distcp.model import *; o=FileStatus(url='/data/ü b.txt', size=10, "
            "mtime=1700000000.25, mode=0o640); print(CopyableFile(o, '/elsewhere', 'u', 's').guid)")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == FILE.guid
    assert len(FILE.guid) == 40


def test_guid_changes_with_origin_length_mtime_and_checksum() -> None:
    from dataclasses import replace

    variants = [replace(ORIGIN, size=11), replace(ORIGIN, mtime=1.0), replace(ORIGIN, checksum="c"),
                replace(ORIGIN, url="/data/other")]
    guids = {replace(FILE, origin=o).guid for o in variants}
    assert len(guids) == 4 and FILE.guid not in guids


def test_errors_keep_their_attributes_through_pickle() -> None:
    err = pickle.loads(pickle.dumps(ConversionError("cannot gunzip /a: bad CRC", path="/a")))
    assert isinstance(err, ConversionError) and err.path == "/a" and str(err).endswith("bad CRC")
    assert SourceReadError.retryable and not ConversionError.retryable


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_model_values_pickle_as_calls_with_their_field_values(value: object) -> None:
    """Not through ``__getstate__``, which asks ``dataclasses.fields()`` per object
    (seconds per million files on the driver and in the tasks)."""
    from dataclasses import astuple, fields

    cls, args = value.__reduce__()  # type: ignore[misc]
    assert cls is type(value) and cls(*args) == value
    assert args == tuple(getattr(value, f.name) for f in fields(value))  # type: ignore[arg-type]
    assert astuple(value) is not None  # still a dataclass to every other tool


def test_model_values_take_their_defaults_and_refuse_unknown_fields() -> None:
    status = FileStatus("/a", 1, 2.0)
    assert (status.mode, status.is_dir, status.link_target) == (None, False, None)
    result = TaskResult("g", 1, "a", "/o", "/d", "u", "all", "ok")
    assert (result.split_index, result.parts, result.mtime, result.branch) == (-1, (), None, "")
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        FileStatus("/a", 1, 2.0, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'mtime'"):
        FileStatus("/a", 1)  # type: ignore[call-arg]

