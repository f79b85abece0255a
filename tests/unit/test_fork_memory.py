"""A fork task's memory does not follow a slow branch: issue 12's proof that one branch
ten times slower than the others back-pressures the one read instead of filling memory.

A 1 GiB (sparse) file is read once into three branches, the third pausing 10 ms per
1 MiB chunk (about 100 MB/s, a tenth of what the others take here), in a fresh process
running what a Spark task runs; its peak RSS is measured (its own ``VmHWM``: a child of
a big pytest process would report the parent's size as ``ru_maxrss``)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.fixtures.forkpeak import fork_peak

GIB = 1 << 30


def test_a_slow_branch_holds_a_task_under_256_mib_on_a_1_gib_file(tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    with open(source, "wb") as f:
        f.seek(GIB - 4)
        f.write(b"tail")
    os.utime(source, (1_700_000_000, 1_700_000_000))
    out = fork_peak(source, tmp_path / "work", slow=0.01)
    branches = out["branches"]
    assert set(branches) == {"fast", "also-fast", "slow"}
    for name, b in branches.items():
        assert b["ok"], (name, b["message"])
        assert b["bytes_written"] == GIB
    assert branches["fast"]["bytes_read"] == GIB  # the one read, reported once
    assert branches["slow"]["bytes_read"] == branches["also-fast"]["bytes_read"] == 0
    assert out["seconds"] >= 1024 * 0.01  # the slow branch set the pace ...
    assert branches["slow"]["queue"]["full_waits"] > 500  # ... by back pressure
    assert out["peak_rss_mib"] < 256, out
    for name in branches:  # each branch staged the whole file in its own folder
        staging = tmp_path / "work" / name / ".pydistcp" / "staging"
        staged = [p for p in staging.rglob("*") if p.is_file()]
        assert [p.stat().st_size for p in staged] == [GIB], name
        with open(staged[0], "rb") as f:
            f.seek(GIB - 4)
            assert f.read() == b"tail"
