"""``distcp.state.sizes``: a manifest's sizes and mtimes kept as a file, and read back
only for the segments and root it was made from."""

from __future__ import annotations

import sys

import pytest

from distcp.state import sizes

ROWS = {"a": (1, 1.25), "sub/b\udce9": (2**40, 1.7e9 + 0.123456789), "caf\u00e9": (0, 0.0)}


def test_rows_come_back_as_they_were_kept() -> None:
    data = sizes.pack(ROWS, ["s1", "s2"], "/d/")
    back = sizes.unpack(data, ["s1", "s2"], "/d/")
    assert back == ROWS and list(back) == list(ROWS)
    assert sizes.unpack(sizes.pack({}, [], "/d/"), [], "/d/") == {}
    assert sizes.unpack(sizes.pack({"": (3, 3.0)}, ["s"], "/"), ["s"], "/") == {"": (3, 3.0)}


@pytest.mark.parametrize("segments, under", [(["s1"], "/d/"), (["s2", "s1"], "/d/"),
                                             (["s1", "s2"], "/e/")])
def test_a_file_made_for_other_segments_or_another_root_is_not_read(
        segments: list[str], under: str) -> None:
    assert sizes.unpack(sizes.pack(ROWS, ["s1", "s2"], "/d/"), segments, under) is None


def test_a_damaged_or_foreign_file_is_not_read() -> None:
    data = sizes.pack(ROWS, ["s"], "/d/")
    for bad in (b"", b"\n", data[:-1], data + b"x", b"{}\n", b"[1]\n" + data,
                data.replace(b'"rows": 3', b'"rows": 2'),
                data.replace(b'"rows": 3', b'"rows": -1'),
                data.replace(sys.byteorder.encode(), b"middle"),
                data.replace(b"pydistcp-sizes/1", b"pydistcp-sizes/9")):
        assert sizes.unpack(bad, ["s"], "/d/") is None


def test_a_name_that_cannot_be_written_refuses_to_pack() -> None:
    with pytest.raises(UnicodeError):
        sizes.pack({"\ud800": (1, 1.0)}, ["s"], "/d/")
