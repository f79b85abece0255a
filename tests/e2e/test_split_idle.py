"""Without ``--split-size``, a big file that would keep one core copying while the
others wait is copied in ranges spread over the cores (issue "fast", point 4): to an
object store as parts of its upload, to a local disk written at their offsets into one
staging file.

The limit is lowered so that a 12 MiB file counts as big on the shared ``local[2]``
session; the proof that it was split is the range results the driver collected, and
the bytes that arrive are the whole file's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.planning import splitting
from tests.conftest import tree
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e
MiB = 1 << 20


def _source(root: Path) -> dict[str, bytes]:
    root.mkdir()
    files = {"big.bin": os.urandom(12 * MiB), **{f"small{n}.txt": b"%d\n" % n for n in range(3)}}
    for name, data in files.items():
        (root / name).write_bytes(data)
    return files


def _objects(server: S3Server) -> dict[str, bytes]:
    return {k.removeprefix("t/"): v for k, v in server.objects("dst", "t/").items()
            if not k.startswith("t/.pydistcp/")}


@pytest.mark.parametrize("copying", ["auto", "spark"])
@pytest.mark.parametrize("local", [False, True], ids=["s3", "local"])
def test_a_big_file_alone_is_spread_over_the_idle_cores(
        spark: Any, tmp_path: Path, s3: S3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, copying: str, local: bool) -> None:
    """By the run's threads or processes (``auto``: a small plan, each range a part of
    the file's upload or written at its offset) and by a Spark job."""
    src = tmp_path / "src"
    files = _source(src)
    monkeypatch.setattr(splitting, "IDLE_SPLIT_FROM", 2 * MiB)
    dst = str(tmp_path / "dst") if local else "s3://dst/t"
    s = distcp.copy(str(src), dst, dst_options={} if local else s3.options, progress=False,
                    copying=copying)
    assert s.ok, s.failures
    assert [w["strategy"] for w in s.strategy["copy"]] == \
        (["here"] if copying == "auto" else ["collected"])
    assert s.files_copied == 4
    # half a share (6 MiB and 3 bytes) is just over 3 MiB: whole MiB on a local disk
    # (4 + 4 + 4), and S3 parts are 5 MiB at least (5 + 5 + 2)
    assert s.results_collected == 3 + 3  # so 3 ranges and 3 small files
    assert "1 big file(s) copied in ranges of about 3 MiB over the idle cores" in s.notes[0]
    if local:
        assert tree(tmp_path / "dst") == tree(src)
        assert not list((tmp_path / "dst" / ".pydistcp").rglob("data"))  # staging gone
    else:
        assert _objects(s3) == files and s3.pending_uploads() == []


@pytest.mark.parametrize("options", [{"verify": "size"}, {"tasks": 1}, {"check": ["not-empty"]},
                                     {"split_size": 0}, {"local": True, "split_size": 0}])
def test_files_that_keep_the_cores_busy_or_a_run_that_needs_them_whole_are_not_split(
        spark: Any, tmp_path: Path, s3: S3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> None:
    """``verify``: a control (its big file alone is split); one task has no idle core; a
    ``--check`` needs each file whole in one task; ``--split-size 0`` never splits, on
    a local disk as well."""
    src = tmp_path / "src"
    files = _source(src)
    monkeypatch.setattr(splitting, "IDLE_SPLIT_FROM", 2 * MiB)
    local = options.pop("local", False)
    dst = str(tmp_path / "dst") if local else "s3://dst/t"
    s = distcp.copy(str(src), dst, dst_options={} if local else s3.options, progress=False,
                    **options)
    assert s.ok, s.failures
    assert s.results_collected == (6 if "verify" in options else 4)
    if local:
        assert tree(tmp_path / "dst") == tree(src)
    else:
        assert _objects(s3) == files
