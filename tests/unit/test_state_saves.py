"""One file set's state steps write its dataset's document once (``CommitSequence.run``):
the manifest segment, the watermark and the run record, each marked, in one save, made
before any step of another kind runs and kept when a step fails."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distcp.commit.state_steps import (
    AdvanceWatermark,
    AppendManifest,
    CompactManifest,
    RecordRun,
)
from distcp.commit.steps import CommitContext, CommitSequence, CommitStep
from distcp.errors import PublishError
from distcp.state import store as state_store
from distcp.state.store import StateStore

URN = "urn:saves"
SID = "job-1-set"
#: What ``ReadsDocument`` found on disk when its turn came.
SEEN: list[list[str]] = []


@dataclass(frozen=True)
class ReadsDocument(CommitStep):
    """A step of another kind (like the event): reads the document as another process
    would, from disk."""

    root: str  # no ``kind``: a test's step stays out of the kinds a log can hold

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return iter(())  # reads only

    def verify(self, ctx: CommitContext) -> bool:
        return False

    def execute(self, ctx: CommitContext) -> None:
        SEEN.append(list(StateStore(self.root, {}).load(URN).applied))


@pytest.fixture()
def writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of the state documents written (the store's own ``write_atomic``)."""
    written: list[str] = []
    real = state_store.write_atomic

    def counted(url: str, data: bytes, options: dict[str, Any]) -> None:
        written.append(url)
        real(url, data, options)

    monkeypatch.setattr(state_store, "write_atomic", counted)
    return written


def _state_steps() -> tuple[CommitStep, ...]:
    return (AppendManifest(SID, URN, (("/d/a", 3, 7.0, "xxh3:00", "g"),)),
            CompactManifest(URN),
            AdvanceWatermark(SID, URN, 7.0),
            RecordRun(SID, URN, "job-1", "set", "ok", 1, 3, 1.0))


def test_a_file_sets_state_steps_write_the_document_once_before_the_next_kind(
        tmp_path: Path, writes: list[str]) -> None:
    SEEN.clear()
    root = str(tmp_path)
    CommitSequence(URN, "set", (*_state_steps(), ReadsDocument(root)), SID).run(
        CommitContext(state_root=root))
    store = StateStore(root, {})
    assert writes == [store.url_of(URN)]
    assert SEEN == [[f"{SID}:mf", f"{SID}:wm", f"{SID}:run"]]
    state = store.load(URN)
    assert (state.watermark, [r["status"] for r in state.runs]) == (7.0, ["ok"])
    assert state.manifest == {"/d/a": [3, 7.0, "xxh3:00", "g"]}


def test_a_failing_state_step_keeps_what_the_steps_before_it_changed(
        tmp_path: Path, writes: list[str]) -> None:
    root = str(tmp_path)
    store = StateStore(root, {})
    Path(store.folder_of(URN)).parent.mkdir(parents=True)
    Path(store.folder_of(URN)).write_bytes(b"a file where the manifest folder must be")
    watermark, run, append = _state_steps()[2], _state_steps()[3], _state_steps()[0]
    sequence = CommitSequence(URN, "set", (watermark, run, append), SID)
    with pytest.raises(PublishError, match=r"\(set\): manifest-segment failed"):
        sequence.run(CommitContext(state_root=root))
    assert writes == [store.url_of(URN)]
    assert StateStore(root, {}).load(URN).applied == [f"{SID}:wm", f"{SID}:run"]


def test_a_state_step_executed_alone_saves_its_own_change(
        tmp_path: Path, writes: list[str]) -> None:
    root = str(tmp_path)
    AdvanceWatermark(SID, URN, 4.0).execute(CommitContext(state_root=root))
    assert StateStore(root, {}).load(URN).watermark == 4.0



@dataclass(frozen=True)
class TakesTheDocumentsPlace(CommitStep):
    """A state step (its change saved with the others) after which a folder stands
    where the dataset's document is written: only the save can fail."""

    document: str  # no ``kind``, as above
    changes_state = True

    def targets(self, options: dict[str, Any]) -> Iterator[tuple[str, str]]:
        return iter(())

    def verify(self, ctx: CommitContext) -> bool:
        return False

    def execute(self, ctx: CommitContext) -> None:
        Path(self.document).mkdir(parents=True)


def test_a_document_that_cannot_be_saved_fails_the_set_with_the_words_that_say_so(
        tmp_path: Path, writes: list[str]) -> None:
    """The steps changed the cached document; its one save is what fails: the set's
    error names the dataset, the set and the dataset state, and nothing of the steps'
    changes is on disk for a replay to skip."""
    root = str(tmp_path)
    document = StateStore(root, {}).url_of(URN)
    sequence = CommitSequence(URN, "set", (*_state_steps()[2:], TakesTheDocumentsPlace(
        document)), SID)
    with pytest.raises(PublishError, match=r"^cannot publish .*saves \(set\): "
                                           r"dataset state failed: .*Is a directory"):
        sequence.run(CommitContext(state_root=root))
    assert writes == [document]
    assert Path(document).is_dir() and not list(Path(document).iterdir())
