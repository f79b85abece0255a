"""The end of a run: its job's folders go unless a commit it logged is still pending.
Its commit log's own store knows whether every commit it logged was finished
(``CommitStepStore.left_by``), so a run that published everything lists the log only at
its start (on an object store, a round trip fewer); one whose publish failed lists it,
keeps its staged copies, and the next run publishes them without copying again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.commit.log import CommitStepStore
from distcp.commit.steps import CommitContext, PublishFiles
from tests.conftest import tree

pytestmark = pytest.mark.e2e


def _source(root: Path) -> Path:
    for name in ("ok/a.txt", "blocked/b.txt", "blocked/c.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode() * 3)
    return root


@pytest.fixture()
def listings(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each listing of the commit log (pending: False, set aside: True)."""
    seen: list[bool] = []
    real = CommitStepStore.pending

    def counted(self: CommitStepStore, aside: bool = False) -> Any:
        seen.append(aside)
        return real(self, aside)

    monkeypatch.setattr(CommitStepStore, "pending", counted)
    return seen


def test_a_run_that_published_everything_lists_its_commit_log_only_at_its_start(
        tmp_path: Path, listings: list[bool]) -> None:
    src, dst = _source(tmp_path / "src"), tmp_path / "dst"
    summary = distcp.copy(str(src), str(dst))
    assert summary.ok and summary.files_copied == 3
    assert sorted(listings) == [False, True]  # recovery's, at the start
    assert tree(dst) == tree(src)
    assert not list((dst / ".pydistcp" / "staging").iterdir())


def test_a_run_whose_publish_failed_keeps_its_staged_copies_for_the_next(
        tmp_path: Path, listings: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = _source(tmp_path / "src"), tmp_path / "dst"
    real = PublishFiles.execute

    def refused(self: PublishFiles, ctx: CommitContext) -> None:
        raise OSError(28, "No space left on device")  # as a full disk would refuse

    monkeypatch.setattr(PublishFiles, "execute", refused)
    failed = distcp.copy(str(src), str(dst))
    assert not failed.ok and "the next run retries it" in failed.failures[0].error
    assert sorted(listings) == [False, False, True, True]  # at the end too: a commit left
    [job] = [p.name for p in (dst / ".pydistcp" / "staging").iterdir()]
    assert len([p for p in (dst / ".pydistcp" / "staging" / job).rglob("*")
                if p.is_file()]) == 3  # the staged copies
    [pending] = CommitStepStore(str(dst / ".pydistcp"), {}).pending()
    assert pending.job_id == job and not (dst / "ok" / "a.txt").exists()
    monkeypatch.setattr(PublishFiles, "execute", real)
    again = distcp.copy(str(src), str(dst))
    assert again.ok and again.files_copied == 0  # the replay published the staged copies
    assert tree(dst) == tree(src)
    assert not list((dst / ".pydistcp" / "staging").iterdir())
