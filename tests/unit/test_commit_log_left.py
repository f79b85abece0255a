"""``CommitStepStore.left_by``: what the commit log may still hold of a job, known
without a listing from what this store wrote, removed and set aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from distcp.commit.log import CommitStepStore
from distcp.commit.steps import CommitSequence


def _sequence(n: int) -> CommitSequence:
    return CommitSequence("urn:left", f"set{n}", (), f"job1-0123456789-{n:06d}")


def test_a_job_is_left_until_every_entry_it_wrote_is_removed(tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    assert not store.left_by("job1")
    store.persist(_sequence(1), "job1")
    store.persist(_sequence(2), "job1")
    store.remove(_sequence(1).id)
    assert store.left_by("job1") and not store.left_by("job0")
    store.remove(_sequence(2).id)
    assert not store.left_by("job1")
    assert store.pending() == []  # what a listing says too


def test_an_entry_whose_write_failed_counts_as_left(tmp_path: Path) -> None:
    (tmp_path / "commits").write_bytes(b"a file where the log's folder goes")
    store = CommitStepStore(str(tmp_path), {})
    with pytest.raises(OSError):
        store.persist(_sequence(1), "job1")
    assert store.left_by("job1")


def test_an_entry_set_aside_leaves_its_job_and_an_unread_one_every_job(
        tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    store.persist(_sequence(1), "job0")
    [pending] = CommitStepStore(str(tmp_path), {}).pending()
    store.set_aside(pending)
    assert store.left_by("job0") and not store.left_by("job1")
    store.persist(_sequence(2), "job0")
    [pending] = CommitStepStore(str(tmp_path), {}).pending()
    store.set_aside_unread(pending)
    assert store.left_by("job1")
