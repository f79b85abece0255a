"""The continuous copy's stream positions and what its source offers (no Spark)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.metrics import RunMetrics, build_registry
from distcp.model import FileStatus
from distcp.planning import offsets
from distcp.planning.arrivals import Arrival, Arrivals, read_waiting
from distcp.run.continuous import (
    Batches,
    Client,
    Progress,
    Stopped,
    cleared_unstarted,
    stopped_cleanly,
)
from distcp.state.layout import StateLayout
from distcp.summary import Failure, Summary


def test_an_offset_moves_each_datasets_mark_to_the_newest_file_offered() -> None:
    start = offsets.initial()
    end = offsets.advanced(start, [("a", (5.0, "/s/x")), ("a", (3.0, "/s/y")),
                                   ("b", (1.0, "/t/z"))])
    assert end == {"seq": 1, "marks": {"a": {"m": 5.0, "p": "/s/x"},
                                       "b": {"m": 1.0, "p": "/t/z"}}}
    late = offsets.advanced(end, [("a", (4.0, "/s/late"))])  # below its mark: stays
    assert late["marks"]["a"] == {"m": 5.0, "p": "/s/x"} and late["seq"] == 2
    assert json.loads(json.dumps(late)) == late  # Spark's offset log keeps it as JSON
    assert offsets.between(start, end, "a", (5.0, "/s/x"))
    assert not offsets.between(end, late, "a", (5.0, "/s/x"))
    assert offsets.between(start, end, "a", (5.0, "/s/a"))  # same mtime, path before
    assert not offsets.between(start, end, "a", (5.0, "/s/z"))


def _cfg(src: Path, dst: Path, **kw: object) -> CopyConfiguration:
    return CopyConfiguration.build([str(src)], str(dst), continuous=True, settle=0.0, **kw)


def _put(path: Path, data: bytes, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def _names(batch: list[Arrival]) -> list[str]:
    return [Path(a.path).name for a in batch]


def test_files_are_offered_oldest_first_at_most_a_batch_each_once(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    for n, name in enumerate(["c", "a", "b"]):
        _put(src / name, b"x" * n, mtime=1_700_000_000 + n)
    arrivals = Arrivals(_cfg(src, dst, max_files_per_batch=2),
                        waiting_url=str(tmp_path / "waiting.json"))
    first, end = arrivals.read(offsets.initial())
    assert _names(first) == ["c", "a"] and end["seq"] == 1
    waiting = read_waiting(str(tmp_path / "waiting.json"), {})
    assert (waiting.files, waiting.bytes, waiting.oldest, waiting.offered) == \
        (1, 2, 1_700_000_002, 2)
    second, end2 = arrivals.read(end)
    assert _names(second) == ["b"]
    nothing, same = arrivals.read(end2)
    assert nothing == [] and same == end2  # Spark runs no batch for it
    assert _names(arrivals.between(offsets.initial(), end)) == ["c", "a"]  # a replay


def test_late_rewritten_and_unsettled_files(tmp_path: Path) -> None:
    """An old mtime below the marks is still new; a file rewritten in place is offered
    again; one still being written waits for ``--settle``; what the catch-up's listing
    knew is not offered."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _put(src / "known", b"k", mtime=1_700_000_000)
    cfg = _cfg(src, dst)
    known = frozenset(a.fingerprint for a in Arrivals(cfg).listed())
    arrivals = Arrivals(cfg.with_(settle=60.0), known)
    _put(src / "new", b"n", mtime=time.time() - 120)
    _put(src / "fresh", b"f")  # written just now: not settled
    batch, end = arrivals.read(offsets.initial())
    assert _names(batch) == ["new"] and arrivals.unsettled == 1
    _put(src / "late", b"l", mtime=1_600_000_000)  # cp -p: far below the mark
    _put(src / "new", b"rewritten", mtime=time.time() - 100)
    batch, _ = arrivals.read(end)
    assert _names(batch) == ["late", "new"]
    assert batch[1].status.size == len(b"rewritten")


def test_the_filters_apply_and_a_row_round_trips(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _put(src / "keep.csv", b"1,2\n", mtime=1_700_000_000)
    _put(src / "skip.tmp", b"x", mtime=1_700_000_000)
    arrivals = Arrivals(_cfg(src, tmp_path / "dst", exclude=("*.tmp",)))
    (only,) = arrivals.read(offsets.initial())[0]
    assert Path(only.path).name == "keep.csv"
    again = Arrival.of_row(*only.row())
    assert again == only and isinstance(again.status, FileStatus)


@pytest.mark.parametrize("options, says", [
    ({"until_idle": True}, "--until-idle needs --continuous"),
    ({"listing_after_seen": True}, "--listing-after-seen needs --continuous"),
    ({"continuous": True, "full_listing_every": 0.5}, "--full-listing-every must be at least"),
    ({"continuous": True, "dry_run": True}, "cannot be used with --dry-run"),
    ({"continuous": True, "finder": "delta"}, "cannot be used with --finder delta"),
    ({"continuous": True, "master": "sc://localhost:15002"}, "a Spark Connect master"),
    ({"continuous": True, "max_files_per_batch": 0}, "--max-files-per-batch must be at least 1"),
    ({"continuous": True, "settle": -1.0}, "--settle must not be negative"),
])
def test_a_continuous_copy_refuses_what_it_cannot_do(tmp_path: Path, options: dict[str, object],
                                                     says: str) -> None:
    with pytest.raises(ConfigurationError, match=says.replace("-", r"\-")):
        CopyConfiguration.build([str(tmp_path)], str(tmp_path / "dst"), **options)


def test_the_metrics_carry_the_lag_and_a_running_copy_is_not_finished() -> None:
    from distcp.summary import Summary

    figures = {"running": True, "batches": 4, "lag": 2.5, "waiting_files": 10,
               "waiting_bytes": 1000}
    registry = build_registry(RunMetrics(1.0, 5.0, summary=Summary(), success=True,
                                         extra={"continuous": figures}), None)
    value = registry.get_sample_value
    assert value("pydistcp_continuous_lag_seconds") == 2.5
    assert value("pydistcp_continuous_waiting_files") == 10
    assert value("pydistcp_continuous_waiting_bytes") == 1000
    assert value("pydistcp_continuous_batches") == 4
    assert value("pydistcp_run_finished") == 0


def test_a_failure_a_later_batch_published_is_no_failure_of_the_copy() -> None:
    from distcp.run.batch import Failures
    def arrival(name: str) -> Arrival:
        return Arrival("ds", f"/s/{name}", FileStatus(f"/s/{name}", 1, 1.0))

    failures = Failures()
    changed = Failure("/s/a", "source changed while copying: /s/a", "ds")
    failures.settle(Summary(failures=[changed, Failure("/s/b", "boom", "ds")]),
                    [arrival("a"), arrival("b"), arrival("c")])
    aside = Failure("/d/x", "an earlier run's commit set aside", files=0)
    failures.settle(Summary(failures=[aside]), [arrival("a")])  # a published this time
    total = Summary()
    failures.into(total)
    assert [f.path for f in total.failures] == ["/d/x", "/s/b"] and total.files_failed == 1


def test_a_summary_crosses_the_state_folder_whole() -> None:
    """What the warm engine's worker writes (``continuous/summary.json``) is what its
    client reports: counts, lists of failures, notes, phases."""
    s = Summary(job_id="j", files_copied=3, bytes_copied=10, files_failed=1,
                failures=[Failure("/s/a", "changed while copied", "urn:a")],
                catalog_pending=[Failure("t", "later", files=0)], notes=["n"],
                phases={"copy_s": 0.5}, requests={"put": 3},
                strategy={"copy": [{"name": "here", "why": "small"}]})
    back = Summary.from_dict(json.loads(s.to_json()))
    assert back == s and back.failures[0].dataset == "urn:a" and not back.ok


def test_a_stopped_client_stops_its_batches(tmp_path: Path) -> None:
    """Its end is known on its host: a pid that no longer runs."""
    assert not Client.here().gone()
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    assert Client(Client.here().host, int(ended.stdout)).gone()
    assert not Client("another-host", int(ended.stdout)).gone()  # not known from here


def test_a_batch_started_after_a_stop_is_refused_and_says_so(tmp_path: Path) -> None:
    """The refusal is in the status document the conductor reads, so a clean stop is
    known without the query's error text (Spark Connect may shorten it)."""
    layout = StateLayout(str(tmp_path / "state"))
    progress = Progress(time.time(), "job-1", 1.0, Summary(job_id="job-1"), root=layout.root)
    sink = Batches(_cfg(tmp_path / "src", tmp_path / "dst"), layout.root, progress,
                   Client.here())
    Path(layout.continuous_stop).parent.mkdir(parents=True)
    Path(layout.continuous_stop).write_text(json.dumps({"job_id": "job-1"}))
    with pytest.raises(Stopped, match="batch 7 left to the next start"):
        sink(None, 7)  # the batch's rows are never read
    status = json.loads(Path(layout.continuous_status).read_text())
    assert (status["refused"], status["running"], status["batches"]) == (7, None, 0)
    # the conductor takes that document for a clean stop, whatever the error says
    shortened = RuntimeError("StreamingQueryException: [FOREACH_BATCH_USER_FUNCTION_...")
    assert stopped_cleanly(shortened, status)
    assert not stopped_cleanly(shortened, {**status, "refused": None})
    assert stopped_cleanly(RuntimeError("... Stopped: batch 7 left ..."), {})
    assert stopped_cleanly(None, {})


def test_the_stop_ends_a_query_that_fails_while_a_batch_is_said_to_run(tmp_path: Path
                                                                        ) -> None:
    """A batch refused after the stop fails the query while the status document may still
    name a running batch: Spark Connect's ``awaitTermination`` then raises the query's
    error, which the stop must leave to the conductor's judgement (``stopped_cleanly``)
    instead of raising it as an internal error (seen in CI on the warm engine)."""
    from distcp.run.continuous import _stop_between_batches

    layout = StateLayout(str(tmp_path / ".pydistcp"))
    Path(layout.continuous_status).parent.mkdir(parents=True, exist_ok=True)
    Path(layout.continuous_status).write_text(json.dumps({"running": 2, "refused": 2}))

    class FailedQuery:
        isActive, stopped = True, False

        def awaitTermination(self, timeout: float) -> None:  # noqa: N802 - Spark's name
            raise RuntimeError("[STREAM_FAILED] ... Stopped: batch 2 left to the next start")

        def stop(self) -> None:
            self.stopped = True

    query = FailedQuery()
    _stop_between_batches(query, layout, {}, "job")
    assert query.stopped
    assert json.loads(Path(layout.continuous_stop).read_text()) == {"job_id": "job"}


def test_a_checkpoint_with_a_logged_batch_is_kept(tmp_path: Path) -> None:
    """Only a checkpoint without any batch is cleared: one with batch offsets is what the
    query resumes from, temporary files beside them or not."""
    kept = tmp_path / "kept"
    (kept / "offsets").mkdir(parents=True)
    (kept / "offsets" / "0").write_text("v1\n{}\n")
    (kept / "offsets" / ".1.f00d.tmp").write_text("v1\n")
    assert not cleared_unstarted(str(kept)) and (kept / "offsets" / "0").exists()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "metadata").write_text("{}")  # a query stopped before anything arrived
    assert not cleared_unstarted(str(fresh)) and (fresh / "metadata").exists()
    assert not cleared_unstarted(str(tmp_path / "never"))
    left = tmp_path / "left"
    (left / "commits").mkdir(parents=True)
    (left / "offsets").mkdir()
    (left / "offsets" / ".0.f00d.tmp").write_text("v1\n")
    assert cleared_unstarted(f"file://{left}") and not left.exists()
