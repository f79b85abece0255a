"""Prometheus text-format metrics of a run, for node_exporter's textfile collector.

A cron-driven copy has no process left to scrape, so the run writes a file instead
(``prometheus_client.write_to_textfile`` writes a temporary file and renames it: the
collector never reads half a file). ``pydistcp_last_success_timestamp_seconds`` must
survive a failed run, so it is read back from the previous file: an alert on
"no success for a day" then works across runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, write_to_textfile
from prometheus_client.parser import text_string_to_metric_families

from distcp.summary import Summary

LAST_SUCCESS = "pydistcp_last_success_timestamp_seconds"


@dataclass(frozen=True)
class DatasetTally:
    """What a run did to one dataset (or to everything, under dataset ``""``)."""

    files_transferred: int = 0
    bytes_transferred: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    errors: int = 0


@dataclass(frozen=True)
class RunMetrics:
    """A run's numbers at one moment: ``finished`` with ``success`` at its end, or a
    progress tick (``finished`` False) while it runs."""

    started: float
    now: float
    datasets: dict[str, DatasetTally] = field(default_factory=dict)
    finished: bool = False
    success: bool = False


def previous_last_success(path: str) -> float | None:
    """The last success recorded by an earlier run's file, or None (no file, or none recorded)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    for family in text_string_to_metric_families(text):
        if family.name == LAST_SUCCESS:
            for sample in family.samples:
                return float(sample.value)
    return None


def build_registry(metrics: RunMetrics, last_success: float | None) -> CollectorRegistry:
    """The registry for ``metrics``; ``last_success`` is the earlier runs' value,
    replaced by ``metrics.now`` when this run finished successfully."""
    registry = CollectorRegistry()
    label = ["dataset"]
    counters = {
        "files_transferred": Counter("pydistcp_files_transferred", "Files copied",
                                     label, registry=registry),
        "bytes_transferred": Counter("pydistcp_bytes_transferred", "Bytes copied",
                                     label, registry=registry),
        "files_skipped": Counter("pydistcp_files_skipped", "Files already up to date",
                                 label, registry=registry),
        "files_deleted": Counter("pydistcp_files_deleted", "Files deleted at the destination",
                                 label, registry=registry),
        "errors": Counter("pydistcp_errors", "Files that failed", label, registry=registry),
    }
    for urn, tally in metrics.datasets.items():
        for name, counter in counters.items():
            counter.labels(dataset=urn).inc(getattr(tally, name))
    Gauge("pydistcp_run_duration_seconds", "Seconds since the run started",
          registry=registry).set(metrics.now - metrics.started)
    Gauge("pydistcp_run_finished", "1 once the run has ended, 0 while it runs",
          registry=registry).set(1 if metrics.finished else 0)
    if metrics.finished and metrics.success:
        last_success = metrics.now
    if last_success is not None:
        Gauge(LAST_SUCCESS, "When a run last succeeded (Unix time)",
              registry=registry).set(last_success)
    return registry


def write_metrics_file(path: str, metrics: RunMetrics) -> None:
    """Write ``metrics`` to ``path`` atomically, keeping the earlier runs' last success."""
    registry = build_registry(metrics, previous_last_success(path))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_to_textfile(path, registry)


def metrics_of_summary(summary: Summary, started: float, now: float) -> RunMetrics:
    """A finished run's metrics from its ``Summary`` (whole-run numbers, dataset ``""``:
    the summary holds no per-dataset counts)."""
    tally = DatasetTally(files_transferred=summary.files_copied,
                         bytes_transferred=summary.bytes_copied,
                         files_skipped=summary.files_skipped,
                         files_deleted=summary.files_deleted,
                         errors=summary.files_failed)
    return RunMetrics(started=started, now=now, datasets={"": tally},
                      finished=True, success=summary.ok)
