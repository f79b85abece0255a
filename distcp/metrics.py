"""Prometheus text-format metrics of a run, for node_exporter's textfile collector (driver).

A cron-driven copy has no process left to scrape, so the run writes a file instead
(``--metrics-file``): on every progress tick while it copies, and once at its end,
whatever the end. ``prometheus_client.write_to_textfile`` writes a temporary file and
renames it, so the collector never reads half a file.

The counters are the run's own totals, like rclone's stats: each run starts them at
zero (Prometheus' ``rate``/``increase`` read a restart as a counter reset).
``pydistcp_last_success_timestamp_seconds`` must outlive a failed run, so it is read
back from the previous file: an alert on "no success for a day" works across runs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from distcp.callbacks import Callback
from distcp.summary import Summary

if TYPE_CHECKING:  # imported where a file is written: most runs write none (0.03 s)
    from prometheus_client import CollectorRegistry

LAST_SUCCESS = "pydistcp_last_success_timestamp_seconds"
#: Seconds between two writes on progress ticks: 0, every tick (the driver ticks twice a second).
TICK_INTERVAL = 0.0

#: The run's totals: metric (without ``_total``) -> (help, Summary field).
_TOTALS = {
    "pydistcp_files_transferred": ("Files copied and published", "files_copied"),
    "pydistcp_bytes_transferred": ("Bytes copied", "bytes_copied"),
    "pydistcp_files_skipped": ("Files already up to date at the destination", "files_skipped"),
    "pydistcp_files_deleted": ("Files deleted at the destination (--delete)", "files_deleted"),
    "pydistcp_sources_deleted": ("Source files deleted by a move", "sources_deleted"),
    "pydistcp_errors": ("Files that failed", "files_failed"),
    "pydistcp_partitions_registered": ("Partitions registered in the catalog",
                                       "partitions_registered"),
}
#: Per dataset (label ``dataset``, its URN): metric -> (help, key of the dataset's counts).
_PER_DATASET = {
    "pydistcp_dataset_files_transferred": ("Files of the dataset published by the run",
                                           "files_transferred"),
    "pydistcp_dataset_bytes_transferred": ("Bytes of the dataset published by the run",
                                           "bytes_transferred"),
    "pydistcp_dataset_files_skipped": ("Files of the dataset already up to date",
                                       "files_skipped"),
    "pydistcp_dataset_errors": ("Files of the dataset that failed", "errors"),
}
#: Per fork branch (label ``branch``): metric -> (help, key of the branch's counts).
_PER_BRANCH = {
    "pydistcp_branch_files_transferred": ("Files a fork branch copied", "files_copied"),
    "pydistcp_branch_bytes_transferred": ("Bytes a fork branch copied", "bytes_copied"),
    "pydistcp_branch_errors": ("Files a fork branch failed", "files_failed"),
}


@dataclass(frozen=True)
class RunMetrics:
    """A run's numbers at one moment: at its end (``summary`` given, ``success``) or
    on a progress tick (files and bytes copied so far)."""

    started: float
    now: float
    summary: Summary | None = None
    files_so_far: int = 0
    bytes_so_far: int = 0
    success: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.summary is not None


def previous_last_success(path: str) -> float | None:
    """The last success recorded by an earlier run's file, or None (no file, none
    recorded, or a file that is not in the text format)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for family in text_string_to_metric_families(text):
            if family.name == LAST_SUCCESS:
                for sample in family.samples:
                    return float(sample.value)
    except (FileNotFoundError, ValueError):
        return None
    return None


def build_registry(metrics: RunMetrics, last_success: float | None) -> CollectorRegistry:
    """The registry for ``metrics``; ``last_success`` is the earlier runs' value,
    replaced by ``metrics.now`` when this run finished successfully."""
    from prometheus_client import CollectorRegistry, Counter, Gauge

    registry = CollectorRegistry()
    s = metrics.summary
    totals = {f: getattr(s, f) for _, f in _TOTALS.values()} if s else {
        "files_copied": metrics.files_so_far, "bytes_copied": metrics.bytes_so_far}
    for name, (text, key) in _TOTALS.items():
        if key in totals:
            Counter(name, text, registry=registry).inc(totals[key])
    if s is not None:
        _labelled(registry, _PER_DATASET, "dataset", s.per_dataset)
        _labelled(registry, _PER_BRANCH, "branch", s.branches)
        _watermarks(registry, s.per_dataset)
        _tables(registry, s.per_dataset)
    Gauge("pydistcp_run_start_timestamp_seconds", "When the run started (Unix time)",
          registry=registry).set(metrics.started)
    Gauge("pydistcp_run_duration_seconds", "Seconds the run has taken so far",
          registry=registry).set(round(metrics.now - metrics.started, 3))
    continuous = metrics.extra.get("continuous")
    finished = metrics.finished and not (continuous and continuous["running"])
    Gauge("pydistcp_run_finished", "1 once the run has ended, 0 while it runs",
          registry=registry).set(1 if finished else 0)
    if continuous:
        _continuous(registry, continuous)
    if metrics.finished:
        Gauge("pydistcp_run_success", "1 if the run ended with every file published",
              registry=registry).set(1 if metrics.success else 0)
    if metrics.finished and metrics.success:
        last_success = metrics.now
    if last_success is not None:
        Gauge(LAST_SUCCESS, "When a run last succeeded (Unix time)",
              registry=registry).set(last_success)
    return registry


def _continuous(registry: CollectorRegistry, figures: Mapping[str, Any]) -> None:
    """A continuous copy's lag: the age of the oldest source file not yet published,
    what waits for later batches, and the batches so far."""
    from prometheus_client import Gauge

    for name, text, key in (
            ("pydistcp_continuous_lag_seconds", ("Age of the oldest source file not yet "
             "published (0: none waiting)"), "lag"),
            ("pydistcp_continuous_waiting_files", "Source files waiting for a batch",
             "waiting_files"),
            ("pydistcp_continuous_waiting_bytes", "Bytes of the files waiting", "waiting_bytes"),
            ("pydistcp_continuous_batches", "Batches run since the copy started", "batches")):
        Gauge(name, text, registry=registry).set(figures[key])


def _labelled(registry: CollectorRegistry, specs: Mapping[str, tuple[str, str]], label: str,
              rows: Mapping[str, Mapping[str, Any]]) -> None:
    from prometheus_client import Counter

    if not rows:
        return
    for name, (text, key) in specs.items():
        counter = Counter(name, text, [label], registry=registry)
        for value, counts in sorted(rows.items()):
            counter.labels(value).inc(counts.get(key, 0))


def _watermarks(registry: CollectorRegistry, per_dataset: Mapping[str, Mapping[str, Any]]) -> None:
    """A stream dataset's three watermarks (the start of a partition, Unix time)."""
    from prometheus_client import Gauge

    marks = {(urn, which): at for urn, counts in per_dataset.items()
             for which, at in (counts.get("watermarks") or {}).items() if at is not None}
    if not marks:
        return
    gauge = Gauge("pydistcp_watermark_timestamp_seconds",
                  "A stream dataset's watermark: low, expected_high, actual_high",
                  ["dataset", "watermark"], registry=registry)
    for (urn, which), at in sorted(marks.items()):
        gauge.labels(urn, which).set(at)


def _tables(registry: CollectorRegistry, per_dataset: Mapping[str, Mapping[str, Any]]) -> None:
    """A table's version at the destination after the run, and how many versions of
    its source it is behind (a vacuumed file or a failed copy keeps it behind)."""
    from prometheus_client import Gauge

    tables = {urn: counts["table"] for urn, counts in per_dataset.items() if "table" in counts}
    if not tables:
        return
    version = Gauge("pydistcp_table_version", "A table's version at the destination",
                    ["dataset"], registry=registry)
    behind = Gauge("pydistcp_table_versions_behind", "Versions of its source a destination "
                   "table does not have yet", ["dataset"], registry=registry)
    for urn, table in sorted(tables.items()):
        version.labels(urn).set(table["version"])
        behind.labels(urn).set(table["versions_behind"])


def write_metrics_file(path: str, metrics: RunMetrics) -> None:
    """Write ``metrics`` to ``path`` atomically, keeping the earlier runs' last success."""
    from prometheus_client import write_to_textfile

    write_to_textfile(path, build_registry(metrics, previous_last_success(path)))


class MetricsReport(Callback):
    """Passes progress on to ``inner`` and, with a ``path``, writes the metrics file on
    a tick (at most every ``interval`` seconds); ``finish`` writes the run's end."""

    def __init__(self, path: str | None, inner: Callback, interval: float | None = None
                 ) -> None:
        self.path, self.inner = path, inner
        self.interval = TICK_INTERVAL if interval is None else interval
        self.started = time.time()
        self.last_write = 0.0

    def set_size(self, files: int, nbytes: int) -> None:
        self.inner.set_size(files, nbytes)

    def message(self, text: str) -> None:
        self.inner.message(text)

    def close(self) -> None:
        self.inner.close()

    def update(self, files: int, nbytes: int) -> None:
        self.inner.update(files, nbytes)
        now = time.monotonic()
        if self.path and now - self.last_write >= self.interval:
            self.last_write = now
            write_metrics_file(self.path, RunMetrics(self.started, time.time(),
                                                     files_so_far=files, bytes_so_far=nbytes))

    def finish(self, summary: Summary) -> None:
        if self.path:
            write_metrics_file(self.path, RunMetrics(self.started, time.time(),
                                                     summary=summary, success=summary.ok))


@contextlib.contextmanager
def reporting(path: str | None, callback: Callback) -> Iterator[MetricsReport]:
    """``callback``, wrapped to write ``path`` (when given) on ticks; the caller calls
    ``finish`` with the summary. A run that raises (refused, or broken) still writes its
    end where it can: no success, one error, the last success kept."""
    report = MetricsReport(path, callback)
    try:
        yield report
    except BaseException:
        with contextlib.suppress(OSError):  # the run's own error is the one to report
            report.finish(Summary(files_failed=1))
        raise
