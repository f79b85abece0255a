"""The Prometheus metrics file: values parsed back, last success kept across runs."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from distcp.metrics import DatasetTally, RunMetrics, metrics_of_summary, write_metrics_file
from distcp.summary import Summary


def _samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_values_parse_back_per_dataset(tmp_path: Path) -> None:
    path = tmp_path / "textfile" / "pydistcp.prom"
    write_metrics_file(str(path), RunMetrics(
        started=100.0, now=130.0, finished=True, success=True,
        datasets={"urn:a": DatasetTally(3, 3000, 2, 1, 0),
                  "urn:b": DatasetTally(1, 10, 0, 0, 4)}))
    got = _samples(path)
    assert got[("pydistcp_bytes_transferred_total", (("dataset", "urn:a"),))] == 3000
    assert got[("pydistcp_files_transferred_total", (("dataset", "urn:b"),))] == 1
    assert got[("pydistcp_files_skipped_total", (("dataset", "urn:a"),))] == 2
    assert got[("pydistcp_files_deleted_total", (("dataset", "urn:a"),))] == 1
    assert got[("pydistcp_errors_total", (("dataset", "urn:b"),))] == 4
    assert got[("pydistcp_run_duration_seconds", ())] == 30.0
    assert got[("pydistcp_run_finished", ())] == 1
    assert got[("pydistcp_last_success_timestamp_seconds", ())] == 130.0
    assert not list(path.parent.glob("*.tmp*"))  # the rename left no temporary file


def test_failed_run_and_progress_tick_keep_last_success(tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    write_metrics_file(str(path), RunMetrics(started=0.0, now=50.0, finished=True, success=True))
    write_metrics_file(str(path), RunMetrics(started=60.0, now=70.0))  # a progress tick
    assert _samples(path)[("pydistcp_run_finished", ())] == 0
    assert _samples(path)[("pydistcp_last_success_timestamp_seconds", ())] == 50.0
    write_metrics_file(str(path), RunMetrics(started=60.0, now=90.0, finished=True,
                                             success=False,
                                             datasets={"": DatasetTally(errors=1)}))
    got = _samples(path)
    assert got[("pydistcp_last_success_timestamp_seconds", ())] == 50.0
    assert got[("pydistcp_errors_total", (("dataset", ""),))] == 1


def test_no_success_yet_writes_no_last_success(tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    write_metrics_file(str(path), RunMetrics(started=0.0, now=5.0, finished=True, success=False))
    assert not any(name == "pydistcp_last_success_timestamp_seconds" for name, _ in _samples(path))


def test_summary_of_a_failed_run_counts_errors_and_keeps_no_success(tmp_path: Path) -> None:
    path = tmp_path / "pydistcp.prom"
    summary = Summary(files_copied=2, bytes_copied=20, files_skipped=5, files_deleted=1,
                      files_failed=3)
    write_metrics_file(str(path), metrics_of_summary(summary, started=1.0, now=4.0))
    got = _samples(path)
    assert got[("pydistcp_files_transferred_total", (("dataset", ""),))] == 2
    assert got[("pydistcp_bytes_transferred_total", (("dataset", ""),))] == 20
    assert got[("pydistcp_files_skipped_total", (("dataset", ""),))] == 5
    assert got[("pydistcp_errors_total", (("dataset", ""),))] == 3
    assert ("pydistcp_last_success_timestamp_seconds", ()) not in got
    write_metrics_file(str(path), metrics_of_summary(Summary(files_copied=1), 5.0, 9.0))
    assert _samples(path)[("pydistcp_last_success_timestamp_seconds", ())] == 9.0
