"""``--events``: OpenLineage events of real runs (the API on the shared Spark session),
received by a real HTTP server on 127.0.0.1 and checked against OpenLineage's schema;
a dead or hung endpoint holds a run for one timeout at most and the next run delivers
what waited; the default JSON-lines file and the console."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest

import distcp
from tests.fixtures.events_server import EventServer, event_server, validate  # noqa: F401

pytestmark = pytest.mark.e2e
TOKEN = "Bearer s3cr3t-events-token"


def _tables(src: Path) -> None:
    for table, files in (("orders", {"a.csv": b"1,2\n", "b.csv": b"3,4,5\n"}),
                         ("users", {"u.csv": b"ann\n"})):
        for name, data in files.items():
            (src / "tables" / table / name).parent.mkdir(parents=True, exist_ok=True)
            (src / "tables" / table / name).write_bytes(data)


def test_a_run_sends_start_each_file_set_and_complete_in_order(
        spark: Any, tmp_path: Path, event_server: EventServer,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYDISTCP_EVENTS_AUTH", TOKEN)
    src, dst = tmp_path / "src", tmp_path / "dst"
    _tables(src)
    s = distcp.copy(str(src), str(dst), dataset_glob="tables/*", events=event_server.url,
                    progress=False)
    assert s.ok
    got = event_server.received
    assert [r.event["eventType"] for r in got] == ["START", "COMPLETE", "COMPLETE", "COMPLETE"]
    for r in got:
        validate(r.event)
        assert r.auth == TOKEN
    start, *sets, end = got
    assert start.key == f"{s.job_id}-start" and end.key == f"{s.job_id}-complete"
    assert start.event["run"]["runId"] == end.event["run"]["runId"]
    assert start.event["outputs"] == [{"namespace": "file", "name": str(dst), "facets": {},
                                       "outputFacets": {}}]
    facets = sorted((r.event["run"]["facets"]["pydistcp_copy"] for r in sets),
                    key=lambda f: f["files"])
    assert [(f["files"], f["bytes"], f["branch"], f["digest_algorithm"]) for f in facets] == [
        (1, 4, "main", "xxh3c128-1m"), (2, 10, "main", "xxh3c128-1m")]
    for r in sets:
        assert r.key == r.event["run"]["facets"]["pydistcp_copy"]["idempotency_key"]
        assert r.event["run"]["facets"]["parent"]["run"]["runId"] == start.event["run"]["runId"]
        (out,) = r.event["outputs"]
        assert out["namespace"] == "file" and out["name"].startswith(str(dst / "tables"))
    state = b"".join(p.read_bytes() for p in (dst / ".pydistcp").rglob("*") if p.is_file())
    assert b"s3cr3t" not in state  # the token is in no record, outbox or log

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "good.gz").write_bytes(gzip.compress(b"fine"))
    (bad / "broken.gz").write_bytes(b"not gzip")
    s = distcp.copy(str(bad), str(tmp_path / "dst2"), convert=["gunzip"],
                    events=event_server.url, progress=False)
    assert not s.ok
    fail = event_server.received[-1].event
    validate(fail)
    assert fail["eventType"] == "FAIL"
    assert "broken.gz" in fail["run"]["facets"]["errorMessage"]["message"]


@pytest.mark.parametrize("endpoint", ["refused", "stall"])
def test_a_dead_endpoint_holds_the_run_one_timeout_and_the_next_run_delivers(
        spark: Any, tmp_path: Path, event_server: EventServer, endpoint: str) -> None:  # noqa: F811
    src, dst = tmp_path / "src", tmp_path / "dst"
    _tables(src)
    if endpoint == "refused":
        url = "http://127.0.0.1:9/lineage"  # the discard port: nobody listens
    else:
        event_server.mode, url = "stall", event_server.url
    t = time.monotonic()
    s = distcp.copy(str(src), str(dst), dataset_glob="tables/*", events=url,
                    events_timeout="2s", progress=False)
    took = time.monotonic() - t
    assert s.ok  # data published: events never fail a run
    outbox = dst / ".pydistcp" / "events" / "outbox"
    waiting = sorted(json.loads(p.read_text())["key"] for p in outbox.iterdir())
    assert len(waiting) == 4 and f"{s.job_id}-start" in waiting
    assert took < 2 + 25, took  # one timeout, then the rest straight to the outbox

    event_server.mode = "ok"
    (src / "tables" / "users" / "v.csv").write_bytes(b"bob\n")
    s2 = distcp.copy(str(src), str(dst), dataset_glob="tables/*", events=event_server.url,
                     progress=False)
    assert s2.ok and s2.files_copied == 1
    keys = event_server.keys()
    assert sorted(keys[:4]) == waiting  # what waited goes first, with its own keys
    assert keys[4] == f"{s2.job_id}-start" and keys[-1] == f"{s2.job_id}-complete"
    assert list(outbox.iterdir()) == []
    for r in event_server.received:
        validate(r.event)


def test_the_default_is_a_json_lines_file_under_the_state_and_dash_is_stdout(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _tables(src)
    s = distcp.copy(str(src), str(dst), dataset_glob="tables/*", progress=False)
    lines = (dst / ".pydistcp" / "events" / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE", "COMPLETE", "COMPLETE"]
    for e in events:
        validate(e)
    assert events[0]["run"]["runId"] == events[-1]["run"]["runId"]

    capsys.readouterr()
    (src / "tables" / "users" / "v.csv").write_bytes(b"bob\n")
    s = distcp.copy(str(src), str(dst), dataset_glob="tables/*", events="-", progress=False)
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["eventType"] for e in out] == ["START", "COMPLETE", "COMPLETE"]
    assert out[1]["run"]["facets"]["pydistcp_copy"]["files"] == 1
    assert s.job_id not in (dst / ".pydistcp" / "events" / "events.jsonl").read_text()

    with pytest.raises(distcp.ConfigurationError, match="--events: ftp://h/x: give a path"):
        distcp.copy(str(src), str(dst), events="ftp://h/x?token=1", progress=False)
