"""The operator's view tells the truth (issue 38, point 6).

A run whose archive failed whole says ``failed 1`` beside its FAILED line and counts
what its summary JSON lists; ``status`` shows the dataset's last run as failed, with
the cause, in its text and its JSON; the source mended, the rerun clears it. The real
CLI on the suite's warm engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.archives import tgz_of

pytestmark = pytest.mark.e2e

#: A name component longer than the 255 bytes local filesystems hold.
LONG = "x" * 300


def _status(dst: Path, env: dict[str, str]) -> tuple[list[str], dict[str, object]]:
    text = run_cli("status", str(dst), env=env)
    as_json = run_cli("status", str(dst), "--json", env=env)
    assert text.returncode == as_json.returncode == 0, text.stderr + as_json.stderr
    [dataset] = json.loads(as_json.stdout)["datasets"]
    return text.stdout.splitlines(), dataset


def test_a_failed_archive_is_counted_and_status_shows_it_failed_until_a_good_rerun(
        tmp_path: Path, warm_engine: dict[str, str]) -> None:
    src, dst, summary = tmp_path / "src", tmp_path / "dst", tmp_path / "s.json"
    tgz_of(src / "a.tar.gz", [("ok.txt", b"one"), (LONG, b"two")])
    copy = ("copy", str(src), str(dst), "--convert", "untar", "--no-progress",
            "--summary-json", str(summary))
    r = run_cli(*copy, env=warm_engine)
    assert r.returncode == 1, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("pydistcp: FAILED ")] == [
        (f"pydistcp: FAILED cannot copy {src}/a.tar.gz to {dst}/a/{LONG}: a name in its path "
        "is 300 bytes, and the destination holds at most 255 per name; rename it at the "
        "source or exclude it (--exclude)")]
    assert r.stdout.startswith("copied 0 files (0 B), skipped 0, failed 1, deleted 0 in ")
    data = json.loads(summary.read_text())
    assert data["files_failed"] == len(data["failures"]) == 1 and not data["ok"]
    assert data["failures"][0]["dataset"] == str(src)

    lines, dataset = _status(dst, warm_engine)
    last = dataset["last_run"]
    assert isinstance(last, dict) and last["status"] == "failed"
    assert last["job_id"] == data["job_id"]
    cause = str(last["cause"])
    # shortened in the middle (the long name): what failed and why both kept
    assert cause.startswith(f"cannot copy {src}/a.tar.gz to ") and "…" in cause
    assert cause.endswith("; rename it at the source or exclude it (--exclude)")
    assert len(cause) <= 240
    [line] = [ln for ln in lines if ln.startswith(f"  {src}: ")]
    assert line.endswith(" failed") and f"last run {data['job_id']} " in line
    assert f"    failed: {cause}" in lines

    tgz_of(src / "a.tar.gz", [("ok.txt", b"one"), ("short.txt", b"two")])  # mended
    r = run_cli(*copy, env=warm_engine)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("copied 2 files (6 B), skipped 0, failed 0, deleted 0 in ")
    again = json.loads(summary.read_text())
    lines, dataset = _status(dst, warm_engine)
    assert dataset["last_run"] == {"job_id": again["job_id"], "status": "ok", "cause": "",
                                   "ended": dataset["last_run"]["ended"]}  # type: ignore[index]
    [line] = [ln for ln in lines if ln.startswith(f"  {src}: ")]
    assert line.endswith(" ok") and not any(ln.startswith("    failed: ") for ln in lines)
