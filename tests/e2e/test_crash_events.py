"""A scheduled stream run killed at every commit boundary: no event or registration is
ever lost, and none announces data that is not published.

One ``pydistcp copy`` of two hourly partitions is killed (``os._exit(137)``) right
after it logged the first partition's commit. Then ``pydistcp recover`` (no Spark: a
fraction of a second each) replays that commit and is killed again before each of its
steps in turn, once between sending the event and recording it, and once before the
commit's removal. After every kill, each file-set event the HTTP server on 127.0.0.1
received names a partition whose files are all published, byte-identical. A last run
publishes the second partition; then every partition has its event, every event is
valid OpenLineage, and an event sent twice carries the same key and run id.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.conftest import PYDISTCP, cli_env, run_cli
from tests.fixtures.events_server import EventServer, event_server, validate  # noqa: F401

pytestmark = pytest.mark.e2e
DAY = "2026/11/20"


def _published_as_announced(server: EventServer, src: Path, dst: Path) -> None:
    for r in server.received:
        facet = r.event["run"]["facets"].get("pydistcp_copy")
        if not facet:
            continue
        part = facet["file_set"]
        want = {p.name: p.read_bytes() for p in (src / "clicks" / part).iterdir()}
        there = dst / "clicks" / part
        got = {p.name: p.read_bytes() for p in there.iterdir()} if there.exists() else {}
        assert got == want and facet["files"] == len(want), (r.key, part)


def test_a_stream_run_killed_at_every_commit_boundary_loses_no_event(
        spark: Any, tmp_path: Path, event_server: EventServer) -> None:  # noqa: F811
    src, dst = tmp_path / "src", tmp_path / "dst"
    for h in ("08", "09"):
        for name, data in (("part-0.json", f"rows of {h}".encode()), ("_SUCCESS", b"-")):
            (src / "clicks" / DAY / h).mkdir(parents=True, exist_ok=True)
            (src / "clicks" / DAY / h / name).write_bytes(data)
    table = ("--catalog-table", "crash_ev.clicks", "--catalog-partitions", "dt={0}-{1}-{2}/hr={3}")
    killed = run_cli("copy", str(src), str(dst), "--finder", "stream", "--ready-marker",
                     "_SUCCESS", "--events", event_server.url, "--no-progress", *table,
                     env={"DISTCP_CRASH_AT": "after_persist:1"})
    assert killed.returncode == 137, killed.stderr
    assert event_server.keys() == [event_server.received[0].key]  # START only
    (pending,) = (dst / ".pydistcp" / "commits").glob("*.json")
    kinds = [s["kind"] for s in json.loads(pending.read_text())["steps"]]
    assert "event" in kinds and kinds.index("event") > kinds.index("publish")
    assert kinds[-1] == "catalog-partitions"

    points = []
    for k, kind in enumerate(kinds, 1):
        points.append(f"before_step:{k}")
        if kind == "event":
            points.append("event_sent:1")
    points.append("")  # the last recover runs to the registration, which needs Spark
    for point in points:
        out = subprocess.run([*PYDISTCP, "recover", str(dst), "--events", event_server.url,
                              "--max-replays", "100"], check=False, capture_output=True,
                             text=True,
                             env=cli_env({"DISTCP_CRASH_AT": point} if point else None),
                             stdin=subprocess.DEVNULL, timeout=120)
        if point:
            assert out.returncode == 137, (point, out.stderr)
        else:  # everything but the registration: exit 1, saying why and who finishes it
            assert out.returncode == 1 and "CATALOG FAILED replay of commit" in out.stderr, out
            assert "catalog table crash_ev.clicks: no Spark session" in out.stderr, out
            assert "the data is published, the next run registers it" in out.stderr, out
        _published_as_announced(event_server, src, dst)
    first = [r for r in event_server.received if r.event["run"]["facets"].get("pydistcp_copy")]
    assert len(first) == 2, [r.key for r in first]  # sent, killed, sent again by the replay
    assert first[0].key == first[1].key
    assert first[0].event["run"]["runId"] == first[1].event["run"]["runId"]
    assert len(list((dst / ".pydistcp" / "commits").glob("*.json"))) == 1  # registration waits

    spark.sql("CREATE DATABASE IF NOT EXISTS crash_ev")
    spark.sql(f"CREATE TABLE crash_ev.clicks (line STRING, dt STRING, hr INT) USING text "
              f"PARTITIONED BY (dt, hr) LOCATION '{dst / 'clicks'}'")
    s = distcp.copy(str(src), str(dst), finder="stream", ready_marker="_SUCCESS",
                    events=event_server.url, progress=False, catalog_table="crash_ev.clicks",
                    catalog_partitions="dt={0}-{1}-{2}/hr={3}", max_replays=100)  # 10 kills
    assert s.ok and s.sequences_replayed == 1 and s.partitions_registered == 2, s.failures
    assert not list((dst / ".pydistcp" / "commits").glob("*.json"))
    rows = spark.sql("SELECT line, dt, hr FROM crash_ev.clicks WHERE line LIKE 'rows%' "
                     "ORDER BY hr").collect()
    assert [tuple(r) for r in rows] == [("rows of 08", "2026-11-20", 8),
                                        ("rows of 09", "2026-11-20", 9)]
    _published_as_announced(event_server, src, dst)
    sets = {r.event["run"]["facets"]["pydistcp_copy"]["file_set"]
            for r in event_server.received if r.event["run"]["facets"].get("pydistcp_copy")}
    assert sets == {f"{DAY}/08", f"{DAY}/09"}
    for r in event_server.received:
        validate(r.event)
    outbox = dst / ".pydistcp" / "events" / "outbox"
    assert not outbox.exists() or not list(outbox.iterdir())  # every event went
