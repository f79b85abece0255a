"""Which names a storage can hold, asked before an output is staged."""

from __future__ import annotations

import os

from distcp.storage.pathlimits import posix_problem
from distcp.storage.spec import spec_for


def test_a_local_path_holds_names_up_to_255_bytes_each_and_4095_in_all() -> None:
    assert posix_problem("/dst/" + "a" * 255) is None
    assert posix_problem("/dst/" + "a" * 256 + "/b") == (
        "a name in its path is 256 bytes, and the destination holds at most 255 per name")
    deep = "/dst" + "/" + "/".join(["b" * 200] * 21)
    assert posix_problem(deep) == (
        f"its path is {len(deep):,} bytes, and the destination holds at most 4,095")
    # bytes, not characters: 128 two-byte characters are 256 bytes
    assert posix_problem("/dst/" + "é" * 128) is not None
    # a name in another encoding is held as its bytes
    assert posix_problem(os.fsdecode(b"/dst/caf\xe9")) is None
    # a remote URL's host is not part of the name
    assert posix_problem("ftp://" + "h" * 300 + "/dst/a") is None
    assert posix_problem("file:///dst/" + "a" * 256) is not None


def test_each_backend_answers_for_its_names() -> None:
    long_name = "/" + "n" * 300
    assert spec_for("/tmp/x").open().name_problem("/tmp/x" + long_name) is not None
    # object keys have no components: 300 bytes is a fine key, 1,025 is not
    s3 = spec_for("s3://b/x").open()
    assert s3.name_problem("s3://b/x" + long_name) is None
    assert s3.name_problem("s3://b/" + "k" * 1025) is not None
