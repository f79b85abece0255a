"""A sequence this run has just written to the commit log skips the verify of a step
named after it (``CommitStep.new_until_run``: the event record), a read that is a round
trip on an object store; a replay of the same sequence still verifies it, so its event
is not sent twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distcp.commit.state_steps import EmitEvent
from distcp.commit.steps import CommitContext, CommitSequence, CommitStep
from distcp.events.sinks import EventSink
from distcp.storage.local.storage import LocalStorage

URN = "urn:fresh"
SID = "20261201T000000-abcdef-0123456789-fedcba"


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the local storage read, by its ``what``."""
    seen: list[str] = []
    real = LocalStorage.read_bytes

    def counted(self: LocalStorage, url: str, what: str) -> bytes:
        seen.append(what)
        return real(self, url, what)

    monkeypatch.setattr(LocalStorage, "read_bytes", counted)
    return seen


def _sequence(root: Path) -> CommitSequence:
    return CommitSequence(URN, "set", (EmitEvent(SID, URN, "set", str(root / "d"), 2, 9),),
                          SID)


def test_a_fresh_sequence_writes_its_event_record_without_reading_it_first(
        tmp_path: Path, reads: list[str]) -> None:
    ctx = CommitContext(state_root=str(tmp_path / ".pydistcp"))
    _sequence(tmp_path).run(ctx, fresh=True)
    record = Path(EventSink(None, ctx.state_root, {}).record_url(SID))
    assert json.loads(record.read_text())["eventType"] == "COMPLETE"
    assert "event record" not in reads


def test_a_replayed_sequence_reads_the_record_and_does_not_write_it_again(
        tmp_path: Path, reads: list[str]) -> None:
    ctx = CommitContext(state_root=str(tmp_path / ".pydistcp"))
    _sequence(tmp_path).run(ctx, fresh=True)
    record = Path(EventSink(None, ctx.state_root, {}).record_url(SID))
    record.write_text('{"eventType": "COMPLETE", "kept": true}')
    _sequence(tmp_path).run(ctx)  # the replay: not fresh
    assert reads.count("event record") == 1
    assert json.loads(record.read_text()) == {"eventType": "COMPLETE", "kept": True}


def test_only_the_event_record_is_new_until_its_sequence_runs() -> None:
    """Every other step's verify reads what may be there before (a replayed set's
    published files, a merged manifest): they keep it."""
    import distcp.commit.log  # noqa: F401 - imports every module that defines steps

    assert {kind for kind, cls in CommitStep._kinds.items() if cls.new_until_run} == {
        "event"}
