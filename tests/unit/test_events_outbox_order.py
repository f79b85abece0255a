"""Undelivered events are re-sent in the order they were made (``distcp.events.sinks``):
the outbox names say when each was parked, since keys sort in no useful order (a run's
``<job>-complete`` sorts before its ``<job>-start``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from distcp.events.sinks import EventSink
from tests.fixtures.events_server import EventServer, event_server  # noqa: F401

MADE = ["job-7-start", "zz-file-set-b", "aa-file-set-a", "job-7-complete"]


def _closed_port_url() -> str:
    """An endpoint nobody listens on: delivery fails at once (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/v1/lineage"


def test_parked_events_reach_the_endpoint_in_the_order_they_were_made(
        tmp_path: Path, event_server: EventServer) -> None:  # noqa: F811
    state = tmp_path / ".pydistcp"
    state.mkdir()
    down = EventSink(_closed_port_url(), str(state), timeout=0.5)
    for key in MADE:
        assert down.send(key, {"eventType": key, "run": {"facets": {}}}) is False
    assert down.undelivered == len(MADE)

    up = EventSink(event_server.url, str(state))
    assert up.flush() == len(MADE)
    assert event_server.keys() == MADE
    assert [r.event["eventType"] for r in event_server.received] == MADE
    assert list((state / "events" / "outbox").iterdir()) == []


def test_events_parked_by_an_older_version_go_first_and_are_not_lost(
        tmp_path: Path, event_server: EventServer) -> None:  # noqa: F811
    state = tmp_path / ".pydistcp"
    outbox = state / "events" / "outbox"
    outbox.mkdir(parents=True)
    (outbox / "old-key.json").write_text(json.dumps(
        {"key": "old-key", "event": {"eventType": "OLD", "run": {"facets": {}}}}))
    down = EventSink(_closed_port_url(), str(state), timeout=0.5)
    down.send("new-key", {"eventType": "NEW", "run": {"facets": {}}})

    assert EventSink(event_server.url, str(state)).flush() == 2
    assert event_server.keys() == ["old-key", "new-key"]
