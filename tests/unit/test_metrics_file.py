"""The Prometheus metrics file: values parsed back, ticks, last success kept across runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from distcp.callbacks import Callback
from distcp.metrics import MetricsReport, RunMetrics, reporting, write_metrics_file
from distcp.summary import Summary

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(path: Path) -> Samples:
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _end(summary: Summary, started: float = 100.0, now: float = 130.0) -> RunMetrics:
    return RunMetrics(started=started, now=now, summary=summary, success=summary.ok)


def test_a_finished_run_writes_totals_per_dataset_per_branch_and_watermarks(
        tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    summary = Summary(files_copied=4, bytes_copied=3010, files_skipped=2, files_deleted=1,
                      partitions_registered=3)
    summary.per_dataset = {
        "file:///a": {"files_transferred": 3, "bytes_transferred": 3000, "files_skipped": 2,
                      "errors": 0, "watermarks": {"low": 7200.0, "expected_high": 10800.0,
                                                  "actual_high": None}},
        "file:///b": {"files_transferred": 1, "bytes_transferred": 10, "files_skipped": 0,
                      "errors": 0}}
    summary.branches = {"lake": {"files_copied": 4, "bytes_copied": 3010, "files_failed": 0}}
    write_metrics_file(str(path), _end(summary))
    got = samples(path)
    assert got[("pydistcp_files_transferred_total", ())] == 4
    assert got[("pydistcp_bytes_transferred_total", ())] == 3010
    assert got[("pydistcp_files_skipped_total", ())] == 2
    assert got[("pydistcp_files_deleted_total", ())] == 1
    assert got[("pydistcp_errors_total", ())] == 0
    assert got[("pydistcp_partitions_registered_total", ())] == 3
    assert got[("pydistcp_dataset_bytes_transferred_total", (("dataset", "file:///a"),))] == 3000
    assert got[("pydistcp_dataset_files_transferred_total", (("dataset", "file:///b"),))] == 1
    assert got[("pydistcp_dataset_files_skipped_total", (("dataset", "file:///a"),))] == 2
    assert got[("pydistcp_branch_bytes_transferred_total", (("branch", "lake"),))] == 3010
    assert got[("pydistcp_watermark_timestamp_seconds",
                (("dataset", "file:///a"), ("watermark", "expected_high")))] == 10800.0
    assert not any(k[0] == "pydistcp_watermark_timestamp_seconds" and
                   ("watermark", "actual_high") in k[1] for k in got)  # not known yet
    assert got[("pydistcp_run_duration_seconds", ())] == 30.0
    assert got[("pydistcp_run_start_timestamp_seconds", ())] == 100.0
    assert got[("pydistcp_run_finished", ())] == 1
    assert got[("pydistcp_run_success", ())] == 1
    assert got[("pydistcp_last_success_timestamp_seconds", ())] == 130.0
    assert [p.name for p in path.parent.iterdir()] == ["pydistcp.prom"]  # no temporary left


def test_a_tick_then_a_failed_end_keep_the_last_success(tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    write_metrics_file(str(path), _end(Summary(files_copied=1), 0.0, 50.0))
    write_metrics_file(str(path), RunMetrics(started=60.0, now=70.0, files_so_far=5,
                                             bytes_so_far=500))  # a progress tick
    got = samples(path)
    assert got[("pydistcp_run_finished", ())] == 0
    assert ("pydistcp_run_success", ()) not in got  # not known while it runs
    assert got[("pydistcp_files_transferred_total", ())] == 5
    assert got[("pydistcp_bytes_transferred_total", ())] == 500
    assert got[("pydistcp_last_success_timestamp_seconds", ())] == 50.0
    write_metrics_file(str(path), _end(Summary(files_failed=2), 60.0, 90.0))
    got = samples(path)
    assert got[("pydistcp_errors_total", ())] == 2
    assert got[("pydistcp_run_success", ())] == 0
    assert got[("pydistcp_last_success_timestamp_seconds", ())] == 50.0


def test_no_success_yet_writes_no_last_success_and_a_foreign_file_is_ignored(
        tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    path.write_text("this is not the text format {{{\n")
    write_metrics_file(str(path), _end(Summary(files_failed=1)))
    assert not any(name == "pydistcp_last_success_timestamp_seconds"
                   for name, _ in samples(path))


class _Seen(Callback):
    def __init__(self) -> None:
        self.updates: list[tuple[int, int]] = []

    def update(self, files: int, nbytes: int) -> None:
        self.updates.append((files, nbytes))


def test_the_report_passes_progress_on_writes_ticks_and_a_raised_run_ends_failed(
        tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    inner = _Seen()
    with pytest.raises(RuntimeError), reporting(str(path), inner) as report:
        report.interval = 0.0
        report.update(3, 300)
        assert samples(path)[("pydistcp_bytes_transferred_total", ())] == 300
        raise RuntimeError("the run broke")
    assert inner.updates == [(3, 300)]
    got = samples(path)
    assert got[("pydistcp_run_success", ())] == 0 and got[("pydistcp_errors_total", ())] == 1


def test_without_a_path_nothing_is_written(tmp_path: Path) -> None:
    report = MetricsReport(None, Callback(), interval=0.0)
    report.update(1, 1)
    report.finish(Summary())
    assert list(tmp_path.iterdir()) == []
