"""Events to the default log are made when delivered, and the OpenLineage client is
imported ahead in a thread: the run pays neither before its copy (``distcp.events``)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from distcp.events.run import RunEvents
from distcp.events.sinks import EventSink
from tests.fixtures.events_server import validate


def _lines(state: Path) -> list[Any]:
    return [json.loads(line) for line in
            (state / "events" / "events.jsonl").read_text().splitlines()]


def _sink(tmp_path: Path) -> tuple[Path, EventSink]:
    """The default sink (JSON lines in the state) of a run whose state is not made yet."""
    state = tmp_path / ".pydistcp"
    state.mkdir()
    return state, EventSink(None, str(state))


def test_a_held_event_is_made_when_the_state_exists_and_keeps_its_order(
        tmp_path: Path) -> None:
    """Not made at all while the state is not (a run that never makes it makes none)."""
    state, sink = _sink(tmp_path)
    made: list[str] = []

    def start() -> dict[str, str]:
        made.append("start")
        return {"n": "start"}

    assert sink.send("job-start", start)
    assert made == [] and not (state / "events").exists()  # no state yet: held, not made
    (state / "commits").mkdir()
    assert sink.send("set-1", {"n": "set"})
    assert made == ["start"]
    assert _lines(state) == [{"n": "start"}, {"n": "set"}]


def test_start_carries_the_time_the_run_began_not_the_time_it_was_made(
        tmp_path: Path) -> None:
    state, sink = _sink(tmp_path)
    with RunEvents(sink, "job-1", str(tmp_path / "dst"), [str(tmp_path / "src")]):
        time.sleep(0.01)
        before_made = dt.datetime.now(dt.UTC).isoformat()
        (state / "commits").mkdir()
        sink.send("set-1", {"n": "set"})
    start = _lines(state)[0]
    validate(start)
    assert start["eventType"] == "START" and start["eventTime"] < before_made


def test_import_ahead_imports_the_client_in_a_thread_once() -> None:
    code = (
        "import sys, threading\n"
        "from distcp.events import run\n"
        "assert 'distcp.events.model' not in sys.modules\n"
        "run.import_ahead(); run.import_ahead()\n"
        "workers = [t for t in threading.enumerate() if t.name == 'pydistcp-events-import']\n"
        "assert len(workers) == 1, workers\n"
        "workers[0].join(60)\n"
        "assert 'openlineage.client.event_v2' in sys.modules\n"
        "run.import_ahead()\n"
        "assert not [t for t in threading.enumerate() if t.name == 'pydistcp-events-import']\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                         text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
