"""Events to the default log are made when delivered (``distcp.events``), and making
them imports no OpenLineage client."""

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


def test_a_run_makes_its_events_without_importing_the_openlineage_client(
        tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from distcp.events.run import RunEvents\n"
        "from distcp.events.sinks import EventSink\n"
        "state = Path(sys.argv[1]) / '.pydistcp'\n"
        "(state / 'commits').mkdir(parents=True)\n"
        "with RunEvents(EventSink(None, str(state)), 'job-1', '/dst', ['/src']) as ev:\n"
        "    pass\n"
        "assert not [m for m in sys.modules if m.startswith('openlineage')]\n"
        "print((state / 'events' / 'events.jsonl').read_text().count('START'))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=False,
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "1", out.stderr
