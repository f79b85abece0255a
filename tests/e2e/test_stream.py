"""``--finder stream`` over three scheduled runs, through the API on the shared Spark
session: hourly partitions appear, one waits for its _SUCCESS, a late file arrives in a
published partition. Files, watermarks, file sets, the OpenLineage events a real HTTP
server on 127.0.0.1 received (schema-checked) and the metrics file (parsed back with
prometheus-client) are checked after each run."""

from __future__ import annotations

import calendar
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.configuration import CopyConfiguration
from distcp.datasets.base import DatasetHistory
from distcp.datasets.partitions import Watermarks
from distcp.finders.stream import StreamDatasetsFinder
from tests.conftest import run_cli
from tests.fixtures.events_server import EventServer, event_server, validate  # noqa: F401
from tests.fixtures.s3_server import S3Server, moto_server  # noqa: F401 - the fixture
from tests.unit.test_metrics_file import samples

pytestmark = pytest.mark.e2e
DAY = "2026/11/20"


def hour(h: int) -> float:
    return float(calendar.timegm((2026, 11, 20, h, 0, 0)))


def put(root: Path, rel: str, data: bytes = b"") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data or rel.encode())


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".pydistcp" not in p.relative_to(root).parts}


def marks(report: Any, topic: str) -> tuple[str | None, ...]:
    (d,) = [d for d in report["datasets"] if d["dataset"].endswith("/" + topic)]
    w = d["watermarks"]
    return w["low"]["utc"], w["expected_high"]["utc"], w["actual_high"]["utc"]


def file_sets(report: Any, topic: str) -> list[tuple[str, int]]:
    (d,) = [d for d in report["datasets"] if d["dataset"].endswith("/" + topic)]
    return [(r["file_set"], r["files"]) for r in d["last_runs"]]


def run(src: Path, dst: Path, **kwargs: Any) -> Any:
    return distcp.copy(str(src), str(dst), finder="stream", ready_marker="_SUCCESS",
                       lookback="2h", progress=False, **kwargs)


def announced(server: EventServer, job_id: str) -> list[tuple[str, int]]:
    """The run's events, in the order received: START, its file sets (sorted: tasks
    finish in any order), COMPLETE; each one valid OpenLineage."""
    mine = [r for r in server.received if r.key.startswith(job_id)]
    for r in mine:
        validate(r.event)
    assert [r.key for r in (mine[0], mine[-1])] == [f"{job_id}-start", f"{job_id}-complete"]
    return sorted((f["file_set"], f["files"]) for f in
                  (r.event["run"]["facets"].get("pydistcp_copy") for r in mine[1:-1]) if f)


def gauges(prom: Path, topic: str) -> dict[str, float]:
    return {dict(labels)["watermark"]: value for (name, labels), value in samples(prom).items()
            if name == "pydistcp_watermark_timestamp_seconds"
            and dict(labels)["dataset"].endswith("/" + topic)}


def test_three_scheduled_runs_of_a_stream(spark: Any, tmp_path: Path,
                                          event_server: EventServer) -> None:  # noqa: F811
    src, dst, prom = tmp_path / "src", tmp_path / "dst", tmp_path / "pydistcp.prom"
    watch = {"events": event_server.url, "metrics_file": str(prom)}
    for h in (8, 9):
        put(src, f"clicks/{DAY}/{h:02d}/part-0.json")
        put(src, f"clicks/{DAY}/{h:02d}/_SUCCESS", b"-")
    put(src, f"clicks/{DAY}/10/part-0.json")  # written, not yet marked ready
    put(src, f"views/{DAY}/08/part-0.json")
    put(src, f"views/{DAY}/08/_SUCCESS", b"-")
    put(src, "clicks/_temporary/x.json")  # no partition: never copied

    # run 1: 08 and 09 of clicks, 08 of views; 10 waits for its _SUCCESS
    s = run(src, dst, **watch)
    assert s.ok and s.datasets == 2 and s.files_copied == 6
    assert [e.path.rsplit("/", 4)[1:] for e in s.entries_skipped] == [["2026", "11", "20", "10"]]
    assert "not ready (no _SUCCESS yet)" in s.entries_skipped[0].error
    assert set(files_under(dst)) == {f"clicks/{DAY}/08/part-0.json", f"clicks/{DAY}/08/_SUCCESS",
                                     f"clicks/{DAY}/09/part-0.json", f"clicks/{DAY}/09/_SUCCESS",
                                     f"views/{DAY}/08/part-0.json", f"views/{DAY}/08/_SUCCESS"}
    report = distcp.status(str(dst))
    assert marks(report, "clicks") == (None, "2026-11-20T09:00:00Z", "2026-11-20T09:00:00Z")
    assert marks(report, "views") == (None, "2026-11-20T08:00:00Z", "2026-11-20T08:00:00Z")
    assert file_sets(report, "clicks") == [(f"{DAY}/08", 2), (f"{DAY}/09", 2)]
    assert announced(event_server, s.job_id) == [(f"{DAY}/08", 2), (f"{DAY}/08", 2),
                                                 (f"{DAY}/09", 2)]
    assert gauges(prom, "clicks") == {"expected_high": hour(9), "actual_high": hour(9)}
    assert samples(prom)[("pydistcp_files_transferred_total", ())] == 6

    # run 2: 10 is ready, 11 appears; 05 appears but is older than low (09) - 2h: not listed
    put(src, f"clicks/{DAY}/10/_SUCCESS", b"-")
    put(src, f"clicks/{DAY}/11/part-0.json")
    put(src, f"clicks/{DAY}/11/_SUCCESS", b"-")
    put(src, f"clicks/{DAY}/05/part-0.json")
    put(src, f"clicks/{DAY}/05/_SUCCESS", b"-")
    s = run(src, dst, **watch)
    assert s.ok and s.files_copied == 4 and not s.entries_skipped
    assert f"clicks/{DAY}/05/part-0.json" not in files_under(dst)
    assert files_under(dst)[f"clicks/{DAY}/11/part-0.json"] == \
        (src / f"clicks/{DAY}/11/part-0.json").read_bytes()
    report = distcp.status(str(dst))
    assert marks(report, "clicks") == ("2026-11-20T09:00:00Z", "2026-11-20T11:00:00Z",
                                       "2026-11-20T11:00:00Z")
    # a run with nothing new for views still records that it looked (low = expected high)
    assert marks(report, "views") == ("2026-11-20T08:00:00Z", "2026-11-20T08:00:00Z",
                                      "2026-11-20T08:00:00Z")
    assert file_sets(report, "clicks")[-2:] == [(f"{DAY}/10", 2), (f"{DAY}/11", 2)]
    assert announced(event_server, s.job_id) == [(f"{DAY}/10", 2), (f"{DAY}/11", 2)]
    assert gauges(prom, "clicks") == {"low": hour(9), "expected_high": hour(11),
                                      "actual_high": hour(11)}

    # run 3: a late file in 09, published already: its own file set, announced again
    put(src, f"clicks/{DAY}/09/part-1.json", b"late rows")
    s = run(src, dst, **watch)
    # listed again: clicks 09, 10, 11 (from low 11 - 2h; not 08) and views 08, 2 files each
    assert s.ok and s.files_copied == 1 and s.files_skipped == 8
    assert files_under(dst)[f"clicks/{DAY}/09/part-1.json"] == b"late rows"
    report = distcp.status(str(dst))
    assert marks(report, "clicks") == ("2026-11-20T11:00:00Z", "2026-11-20T11:00:00Z",
                                       "2026-11-20T11:00:00Z")  # late data moves no mark
    assert file_sets(report, "clicks")[-1] == (f"{DAY}/09+late", 1)
    assert announced(event_server, s.job_id) == [(f"{DAY}/09+late", 1)]  # announced again
    got = samples(prom)
    assert got[("pydistcp_files_transferred_total", ())] == 1
    assert got[("pydistcp_files_skipped_total", ())] == 8
    assert got[("pydistcp_run_success", ())] == 1
    assert gauges(prom, "clicks") == {"low": hour(11), "expected_high": hour(11),
                                      "actual_high": hour(11)}
    # every published file set was announced exactly once, across the three runs
    every = [(f["file_set"], f["files"]) for f in
             (r.event["run"]["facets"].get("pydistcp_copy") for r in event_server.received) if f]
    assert sorted(every) == [(f"{DAY}/08", 2), (f"{DAY}/08", 2), (f"{DAY}/09", 2),
                             (f"{DAY}/09+late", 1), (f"{DAY}/10", 2), (f"{DAY}/11", 2)]
    assert files_under(dst) == {k: v for k, v in files_under(src).items()
                                if "/05/" not in k and "_temporary" not in k}

    # the status command shows the three marks per stream dataset
    out = run_cli("status", str(dst))
    assert out.returncode == 0, out.stderr
    assert (f"{(src / 'clicks').as_posix()}" in out.stdout
            and "partitions: low 2026-11-20T11:00:00Z, expected high 2026-11-20T11:00:00Z, "
                "actual high 2026-11-20T11:00:00Z" in out.stdout), out.stdout


def test_per_file_ready_markers_and_partition_age(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    put(src, "t/dt=2026-11-20/hr=08/a.json")
    put(src, "t/dt=2026-11-20/hr=08/a.json.ready", b"-")
    put(src, "t/dt=2026-11-20/hr=08/b.json")  # its marker not there yet
    put(src, "t/dt=2026-11-20/hr=09/c.json")
    put(src, "t/dt=2026-11-20/hr=09/c.json.ready", b"-")
    s = distcp.copy(str(src), str(dst), finder="stream", ready_marker="{file}.ready",
                    partition_pattern="dt=yyyy-MM-dd/hr=HH", progress=False)
    assert s.ok and s.files_copied == 2
    assert set(files_under(dst)) == {"t/dt=2026-11-20/hr=08/a.json", "t/dt=2026-11-20/hr=09/c.json"}
    assert [e.path.rsplit("/", 1)[-1] for e in s.entries_skipped] == ["b.json"]
    report = distcp.status(str(dst))
    assert marks(report, "t")[1:] == ("2026-11-20T09:00:00Z", "2026-11-20T09:00:00Z")
    # --max-age counts from a partition's end: everything of 2026-11-20 is too old now
    put(src, "t/dt=2026-11-20/hr=08/b.json.ready", b"-")
    s = distcp.copy(str(src), str(dst), finder="stream", ready_marker="{file}.ready",
                    partition_pattern="dt=yyyy-MM-dd/hr=HH", max_age="1h", progress=False)
    assert s.ok and s.files_copied == 0
    assert "t/dt=2026-11-20/hr=08/b.json" not in files_under(dst)


def test_an_s3_topic_lists_from_its_history_without_spark(moto_server: S3Server) -> None:  # noqa: F811
    """Listing only (no copy): S3 prefixes as partition folders, the lookback window,
    late files named after their partition, per-file markers never copied."""
    moto_server.reset()
    client = moto_server.client()
    for key in ("t/clicks/2026/11/19/23/a.json", "t/clicks/2026/11/20/08/a.json",
                "t/clicks/2026/11/20/09/a.json", "t/clicks/2026/11/20/09/b.json",
                "t/clicks/2026/11/20/09/b.json.ready", "t/clicks/2026/11/20/09/a.json.ready",
                "t/clicks/2026/11/20/10/a.json", "t/clicks/2026/11/20/10/a.json.ready"):
        client.put_object(Bucket="src", Key=key, Body=key.encode())
    cfg = CopyConfiguration.build(["s3://src/t"], "s3://dst/t", finder="stream",
                                  lookback="1h", ready_marker="{file}.ready",
                                  src_options=moto_server.options,
                                  dst_options=moto_server.options)
    (ds,) = StreamDatasetsFinder(cfg).find()
    assert ds.urn == "s3://src/t/clicks"
    history = DatasetHistory(Watermarks(None, hour(9), hour(9)),
                             frozenset({"s3://dst/t/clicks/2026/11/20/09/a.json"}))
    listing = ds.with_history(history).listing(cfg)
    # from 09 - 1h = 08: 19/23 is not listed; 08 has no marker for a.json
    assert sorted((f.destination, f.file_set) for f in listing.files) == [
        ("s3://dst/t/clicks/2026/11/20/09/a.json", "2026/11/20/09+late"),
        ("s3://dst/t/clicks/2026/11/20/09/b.json", "2026/11/20/09+late"),
        ("s3://dst/t/clicks/2026/11/20/10/a.json", "2026/11/20/10")]
    assert [sk.path for sk in listing.skipped] == ["s3://src/t/clicks/2026/11/20/08/a.json"]
    assert listing.marks is not None
    assert (listing.marks.low, listing.marks.expected_high) == (hour(9), hour(10))
    assert listing.marks.time_of("2026/11/20/09+late") == hour(9)
