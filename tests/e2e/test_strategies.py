"""Each run names how it planned and copied, and why (issue "One run, one state, one
seam", point 1): in the summary, the log file and ``-v``'s lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e


def _tree(root: Path, n: int) -> Path:
    (root / "d").mkdir(parents=True)
    for i in range(n):
        (root / "d" / f"f{i:04d}").write_bytes(b"x" * (i % 7))
    return root


def _plan(s: distcp.Summary) -> list[tuple[str, str]]:
    return [(row["strategy"], row["why"]) for row in s.strategy["plan"]]


def _copy(s: distcp.Summary) -> list[str]:
    return [row["strategy"] for row in s.strategy["copy"]]


def test_the_plan_and_copy_strategies_with_their_reasons(spark: Any, tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", 1_200)
    driver = distcp.copy(str(src), str(tmp_path / "a"), listing="driver")
    assert _plan(driver) == [("driver-paired-walk", "--listing driver: two local trees "
                                                    "walked side by side in this process")]
    assert _copy(driver) == ["kept"]  # more than a chunk of files to copy: thin path
    assert driver.strategy["plan"][0]["dataset"] == str(src)
    on_spark = distcp.copy(str(src), str(tmp_path / "b"), listing="spark")
    assert _plan(on_spark) == [("spark-paired-walk", "--listing spark")]
    moved = distcp.copy(str(src), str(tmp_path / "c"), listing="driver", check=["not-empty"],
                        exclude=["f0000", "f0007", "f0014"])
    assert _copy(moved) == ["collected"]
    assert moved.strategy["copy"][0]["why"] == "--check inspects each output"
    again = distcp.copy(str(src), str(tmp_path / "a"), listing="driver")
    assert _copy(again) == ["nothing"]
    listed = tmp_path / "list.txt"
    listed.write_text("d/f0001\n")
    f = distcp.copy(str(src), str(tmp_path / "e"), files_from=str(listed))
    assert _plan(f) == [("files-from", f"--files-from {listed} names the files; the tree "
                                       "is not walked")]


def test_minus_v_and_the_log_file_say_how_and_why(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", 3)
    log = tmp_path / "run.jsonl"
    out = run_cli("copy", str(src), str(tmp_path / "dst"), "-v", "--listing", "driver",
                  "--log-file", str(log), "--summary-json", str(tmp_path / "s.json"))
    assert out.returncode == 0, out.stderr
    assert (f"pydistcp: plan {src}: driver-paired-walk (--listing driver: two local trees "
            "walked side by side in this process)") in out.stderr
    why = ("3 files copied by processes forked here, no Spark job: --copying auto: 3 files "
           "of 3 bytes on a local master, at most 20,000 files: a Spark job's start would cost "
           "more than the copy")
    assert f"pydistcp: copy: here ({why})" in out.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    chosen = [(e["phase"], e["strategy"], e.get("path") or e["destination"])
              for e in events if e["event"] == "strategy"]
    assert chosen == [("plan", "driver-paired-walk", str(src)),
                      ("copy", "here", str(tmp_path / "dst"))]
    dry = run_cli("copy", str(src), str(tmp_path / "dst"), "--dry-run")
    assert dry.returncode == 0 and "driver-paired-walk" not in dry.stderr  # -v's, not a dry run's
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["strategy"]["copy"] == [{"strategy": "here", "why": why}]
    on_spark = run_cli("copy", str(src), str(tmp_path / "d2"), "-v", "--copying", "spark")
    assert on_spark.returncode == 0, on_spark.stderr
    assert "pydistcp: copy: collected (every decision is shown or logged)" in on_spark.stderr
