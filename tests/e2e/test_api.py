"""``distcp.copy`` in-process, on the test session's shared SparkSession."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.callbacks import Callback
from tests.conftest import tree

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "warehouse"


class Recorder(Callback):
    def __init__(self) -> None:
        self.sizes: list[tuple[int, int]] = []
        self.updates: list[tuple[int, int]] = []
        self.messages: list[str] = []

    def set_size(self, files: int, nbytes: int) -> None:
        self.sizes.append((files, nbytes))

    def update(self, files: int, nbytes: int) -> None:
        self.updates.append((files, nbytes))

    def message(self, text: str) -> None:
        self.messages.append(text)


def test_copy_returns_the_summary_and_keeps_the_active_session(spark: Any, tmp_path: Path) -> None:
    rec = Recorder()
    s = distcp.copy(str(EXAMPLES), str(tmp_path / "out"), callback=rec,
                    dataset_glob="*/tables/*")
    assert s.ok and s.datasets == 3 and s.files_copied == 5
    assert tree(tmp_path / "out" / "sales" / "tables") == tree(EXAMPLES / "sales" / "tables")
    assert rec.sizes == [(5, sum(p.stat().st_size for p in EXAMPLES.rglob("*/tables/*/**/*")
                                 if p.is_file()))]
    assert rec.updates[-1] == rec.sizes[0]
    assert spark.range(3).count() == 3  # the session we did not start is still alive


def test_many_small_files_are_packed_into_few_tasks(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    for d in range(10):
        (src / f"d{d}").mkdir(parents=True)
        for i in range(50):
            (src / f"d{d}" / f"f{i}").write_bytes(os.urandom(100 + i))
    s = distcp.copy(str(src), str(tmp_path / "dst"), parallelism=2)
    assert s.ok and s.files_copied == 500
    assert tree(tmp_path / "dst") == tree(src)
    state = tmp_path / "dst" / ".pydistcp"
    assert not [p for p in (state / "staging").rglob("*") if p.is_file()]  # no debris
    assert not list((state / "commits").glob("*.json"))  # nothing pending


def test_convert_chain_with_an_unknown_name_fails_before_copying(spark: Any, tmp_path: Path) -> None:
    from distcp.errors import PluginError

    with pytest.raises(PluginError, match="unknown converters plugin 'rot13'"):
        distcp.copy(str(EXAMPLES), str(tmp_path / "o"), convert=["rot13"])
    assert not (tmp_path / "o").exists()


def test_typed_call_with_the_flags_names(spark: Any, tmp_path: Path) -> None:
    """The CLI's flags as typed keywords: a str for a repeatable flag, a size string,
    a mapping for --conf, --checksum as a boolean, --summary-json written by the API."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "d").mkdir(parents=True)
    (src / "d" / "a.csv").write_bytes(b"a,b\n1,2\n")
    (src / "b.csv").write_bytes(b"x" * 5000)
    (src / "c.log").write_bytes(b"not this one")
    report = tmp_path / "summary.json"
    first = distcp.copy(str(src), str(dst), include="*.csv", buffer_size="64K",
                        conf={"spark.sql.shuffle.partitions": "2"}, progress=False,
                        summary_json=str(report), recovery_retention=60.0)
    assert first.ok and first.files_copied == 2
    assert tree(dst) == {k: v for k, v in tree(src).items() if not k.endswith(".log")}
    assert json.loads(report.read_text()) == first.to_dict()
    (dst / "b.csv").write_bytes(b"y" * 5000)  # same size, another mtime and content
    plans = {flag: {row["path"]: (row["action"], row["reason"]) for row in distcp.copy(
        str(src), str(dst), include="*.csv", dry_run=True, **{flag: True}).plan}
        for flag in ("overwrite", "size_only", "checksum")}
    b = str(dst / "b.csv")
    assert plans["overwrite"][b] == ("copy", "--overwrite")
    assert plans["size_only"][b] == ("skip", "same size (--size-only)")
    assert plans["checksum"][b] == ("copy", "contents differ (--checksum)")  # read: y, not x
    again = distcp.copy([str(src)], str(dst), include=["*.csv"], ignore_existing=True,
                        progress=False)
    assert (again.files_copied, again.files_skipped) == (0, 2)
    assert (dst / "b.csv").read_bytes() == b"y" * 5000
