"""The summary's counts agree with its lists (issue 38 point 6): ``files_failed`` is the
number of source files ``failures`` stands for, and a fork's counts are its branches'."""

from __future__ import annotations

import json

from distcp.commit.outcome import FileSetOutcome
from distcp.commit.publish import _record_failures
from distcp.configuration import CopyConfiguration
from distcp.fork.branches import Branch
from distcp.model import TaskResult
from distcp.run.branch import BranchRun
from distcp.run.fork import fold
from distcp.summary import Failure, Summary, Tally, failed_files


def _failed(guid: str, destination: str) -> TaskResult:
    return TaskResult(guid=guid, unit_id=0, attempt="a0", origin=f"/src/{guid}",
                      destination=destination, dataset_urn="/src", file_set="s",
                      status="failed", error_type="ConversionError",
                      message=f"/src/{guid}: {destination} refused")


def test_a_source_counts_once_however_many_of_its_outputs_failed() -> None:
    outcome = FileSetOutcome("/src", "s", "/dst", (
        _failed("a.tar", "/dst/a/m1"), _failed("a.tar", "/dst/a/m2"), _failed("b", "/dst/b")))
    tally = _record_failures(outcome)
    assert [(f.path, f.files, f.dataset) for f in tally.failures] == [
        ("/src/a.tar", 1, "/src"), ("/src/a.tar", 0, "/src"), ("/src/b", 1, "/src")]
    assert tally.files_failed == 2


def test_files_failed_is_counted_from_the_failures_never_apart() -> None:
    replay = Tally(failures=(Failure("/src", "replay of commit c failed: down", "/src",
                                     files=0),))
    published = Tally(failures=(Failure("/dst", "cannot rename; the next run retries it",
                                        "/src", files=3),))
    s = Summary(job_id="j")
    for tally in (replay, published, Tally(failures=(Failure("/src/x", "boom", "/src"),))):
        s.add(tally)
    assert (replay.files_failed, published.files_failed) == (0, 3)
    assert s.files_failed == failed_files(s.failures) == 4
    data = json.loads(s.to_json())
    assert data["files_failed"] == sum(f["files"] for f in data["failures"])


def test_the_summary_line_counts_files_and_names_the_other_failures() -> None:
    s = Summary(job_id="j")
    s.add(Tally(failures=(Failure("/src", "replay of commit c failed: down", "/src", files=0),
                          Failure("/src/x", "/src/x: boom", "/src"))))
    lines = s.render().splitlines()
    assert "failed 1, deleted 0" in lines[0]
    assert ("of the FAILED lines, 1 count no file failed here (an earlier run's commit, a "
            "kept copy, another output of a file counted)") in lines


def test_nothing_failed_says_nothing_more() -> None:
    s = Summary(job_id="j")
    s.add(Tally(files_copied=2))
    assert s.ok and "FAILED" not in s.render() and "failed 0" in s.render()


def _branch(name: str, copied: int, failures: tuple[Failure, ...]) -> BranchRun:
    summary = Summary(job_id="j")
    summary.add(Tally(files_copied=copied, failures=failures))
    return BranchRun(Branch(name, CopyConfiguration(("/src",), f"/{name}")), [],
                     f"/{name}/.pydistcp", summary, forked=True)


def test_a_fork_adds_its_branches_counts_and_lists_as_its_branches_section_shows() -> None:
    """A file failed in two branches counts once in each branch, and once in the run:
    the run counts files, not branch attempts; its list holds each branch's lines."""
    both = Failure("/src/x", "/src/x: boom", "/src")
    runs = [_branch("a", 2, (both,)), _branch("b", 1, (both, Failure("/src/y", "y", "/src")))]
    s = Summary(job_id="j")
    fold(s, runs)
    assert {n: (b["files_copied"], b["files_failed"]) for n, b in s.branches.items()} == {
        "a": (2, 1), "b": (1, 2)}
    assert (s.files_copied, s.files_failed) == (3, 2)  # /src/x and /src/y
    assert s.files_failed == failed_files(s.failures) and len(s.failures) == 3
    assert "of the FAILED lines, 1 count no file failed here" in s.render()
