"""A sequence this run has just written to the commit log skips the verify of a step
whose effect cannot be there before its first run (``CommitStep.new_until_run``: the
event record named after it, the publish of what this run's copy tasks staged), a read
that is a round trip on an object store; a replay of the same sequence still verifies
it, so its event is not sent twice."""

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


def test_only_the_event_record_and_this_runs_staged_copies_are_new_until_run() -> None:
    """Every other step's verify reads what may be there before (a replayed set's
    published files, a merged manifest): they keep it."""
    import distcp.commit.log  # noqa: F401 - imports every module that defines steps

    assert {kind for kind, cls in CommitStep._kinds.items() if cls.new_until_run} == {
        "event", "publish-listed"}


def test_a_fresh_sequence_publishes_its_own_staged_copies_without_verifying_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PublishKept`` renames what this run's copy tasks just staged: a first run reads
    no results file to learn that nothing is published yet; a replay verifies."""
    from distcp.commit.kept_steps import PublishKept

    verified: list[bool] = []
    real = PublishKept.verify

    def counted(self: PublishKept, ctx: CommitContext) -> bool:
        verified.append(True)
        return real(self, ctx)

    monkeypatch.setattr(PublishKept, "verify", counted)
    sequence = CommitSequence(URN, "set", (PublishKept(()),), SID)
    ctx = CommitContext(state_root=str(tmp_path / ".pydistcp"))
    sequence.run(ctx, fresh=True)
    assert verified == []
    sequence.run(ctx)  # the replay
    assert verified == [True]
