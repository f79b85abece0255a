"""How each dataset's last run went, kept by the run for ``pydistcp status`` (issue 38
point 6): failed with its first failure, cleared by a run that fails nothing."""

from __future__ import annotations

from pathlib import Path

from distcp.commit.status import last_run, render_status, status_report
from distcp.run.report import record_outcomes
from distcp.state.outcomes import CAUSE_MAX, OutcomeStore, RunOutcome, cause_of
from distcp.summary import Failure

URN = "/data/src"


def _root(tmp_path: Path) -> str:
    return str(tmp_path / ".pydistcp")


def test_a_failed_run_keeps_its_first_failure_of_the_dataset(tmp_path: Path) -> None:
    record_outcomes(_root(tmp_path), {}, "job1", [URN, "/other"], [
        Failure("/data", "replay of /elsewhere failed", "/elsewhere", files=0),
        Failure("/data/src/a.tar.gz", "cannot copy a.tar.gz: name too long\nmore", URN),
        Failure("/data/src/b", "second", URN)])
    store = OutcomeStore(_root(tmp_path), {})
    outcome = store.load(URN)
    assert outcome is not None
    assert (outcome.job_id, outcome.status, outcome.cause) == (
        "job1", "failed", "cannot copy a.tar.gz: name too long")
    assert store.load("/other") is None  # ok, and no failure to clear: no trace
    assert store.urns() == [URN]


def test_a_run_that_fails_nothing_clears_the_failure(tmp_path: Path) -> None:
    record_outcomes(_root(tmp_path), {}, "job1", [URN], [Failure("/x", "boom", URN)])
    record_outcomes(_root(tmp_path), {}, "job2", [URN], [])
    outcome = OutcomeStore(_root(tmp_path), {}).load(URN)
    assert outcome is not None and (outcome.job_id, outcome.status, outcome.cause) == (
        "job2", "ok", "")


def test_a_long_cause_keeps_what_failed_and_why() -> None:
    cause = cause_of(f"cannot copy /s/a.tgz to /d/{'x' * 300}: a name is 300 bytes\nmore")
    assert len(cause) == CAUSE_MAX
    assert cause.startswith("cannot copy /s/a.tgz to /d/xxx")
    assert cause.endswith("xxx: a name is 300 bytes") and "…" in cause


def test_an_outcome_is_never_read_for_another_dataset() -> None:
    assert RunOutcome.from_dict({"urn": "/b", "status": "failed"}, "/a") is None


def test_status_tells_the_newer_of_the_outcome_and_the_history() -> None:
    line = {"job_id": "job1", "status": "ok", "ended": 100.0}
    failed = RunOutcome(URN, "job1", "failed", "boom", 101.0)
    assert last_run([line], failed) == {"job_id": "job1", "status": "failed",
                                         "cause": "boom", "ended": 101.0}
    later = {"job_id": "recover-1", "status": "ok", "ended": 200.0}  # recover finished it
    assert last_run([line, later], failed) == {"job_id": "recover-1", "status": "ok",
                                               "cause": "", "ended": 200.0}
    assert last_run([], None) is None


def test_status_shows_a_dataset_that_failed_before_anything_was_published(
        tmp_path: Path) -> None:
    record_outcomes(_root(tmp_path), {}, "job1", [URN], [
        Failure("/data/src/a.tar.gz", "cannot copy /data/src/a.tar.gz: too long", URN)])
    report = status_report(_root(tmp_path), {})
    [dataset] = report["datasets"]
    assert (dataset["dataset"], dataset["files"], dataset["last_runs"]) == (URN, 0, [])
    assert dataset["last_run"]["status"] == "failed"
    lines = render_status(report).splitlines()
    assert any(ln.startswith(f"  {URN}: watermark -, 0 files published, last run job1 ")
               and ln.endswith(" failed") for ln in lines)
    assert "    failed: cannot copy /data/src/a.tar.gz: too long" in lines
