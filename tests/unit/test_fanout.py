"""Per-file commit steps cut into pieces for the executors (distcp.commit.fanout).

Pure parts with real files on local disk: how a step is cut, when it is worth it,
and the executor's side run in this process (the Spark job is in
tests/e2e/test_publish_tasks.py).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from distcp.commit.fanout import (
    LOCAL_FAN_OUT_FROM,
    Piece,
    entries_of,
    pieces,
    run_piece,
    worth_fanning,
)
from distcp.commit.move_steps import DeleteSources
from distcp.commit.steps import CommitContext, CommitStep, MakeDirectories, PublishFiles
from distcp.commit.upload_steps import CheckDigests, CompleteUploads
from distcp.storage import Capabilities
from distcp.storage.local.storage import LocalStorage
from distcp.storage.s3.storage import ObjectStorage


def _moves(n: int) -> tuple[tuple[str, str, int], ...]:
    return tuple((f"file:///s/{i}", f"file:///d/{i}", i) for i in range(n))


@pytest.mark.parametrize(("count", "tasks", "min_piece", "sizes"), [
    (0, 4, 256, [0]),
    (10, 4, 256, [10]),            # small: one piece
    (1024, 4, 256, [256] * 4),
    (1001, 4, 256, [334, 334, 333]),  # at least min_piece each
    (600, 8, 256, [300, 300]),
    (7, 3, 1, [3, 2, 2]),
])
def test_pieces_keep_every_entry_once_in_order(count: int, tasks: int, min_piece: int,
                                               sizes: list[int]) -> None:
    step = PublishFiles(_moves(count))
    got = pieces(step, tasks, min_piece)
    assert [len(p.moves) for p in got] == sizes  # type: ignore[attr-defined]
    assert tuple(m for p in got for m in p.moves) == step.moves  # type: ignore[attr-defined]
    assert all(type(p) is PublishFiles for p in got)


def test_only_steps_of_independent_per_file_entries_can_be_cut() -> None:
    assert entries_of(PublishFiles(_moves(3))) == 3
    assert entries_of(CompleteUploads((("u", "s3://b/k", 1, ()),))) == 1
    assert entries_of(CheckDigests((("a", "b", 1, "x"), ("c", "d", 2, "y")))) == 2
    assert entries_of(DeleteSources((("file:///s/a", 1, 2.0, (("file:///d/a", 1),)),))) == 1
    # Directories are made parents first, in one order: done as a whole by the driver.
    assert entries_of(MakeDirectories(("file:///d/a", "file:///d/a/b"))) == 0


@pytest.mark.parametrize(("mode", "entries", "caps", "open_", "cluster", "want"), [
    ("driver", 10**6, ObjectStorage.capabilities, True, True, False),
    ("spark", 1, LocalStorage.capabilities, False, False, True),
    ("spark", 0, LocalStorage.capabilities, True, True, False),      # nothing to cut
    ("auto", 1999, ObjectStorage.capabilities, True, True, False),
    ("auto", 2000, ObjectStorage.capabilities, True, True, True),
    ("auto", 2000, ObjectStorage.capabilities, False, True, False),  # never starts Spark
    ("auto", 10**6, ObjectStorage.capabilities, True, False, False),  # the driver's cores
    ("auto", 199_999, LocalStorage.capabilities, True, True, False),  # renames take µs
    ("auto", 200_000, LocalStorage.capabilities, True, True, True),
    # a local master: only a local filesystem's renames, by the million
    ("auto", LOCAL_FAN_OUT_FROM - 1, LocalStorage.capabilities, True, False, False),
    ("auto", LOCAL_FAN_OUT_FROM, LocalStorage.capabilities, True, False, True),
    ("auto", LOCAL_FAN_OUT_FROM, LocalStorage.capabilities, False, False, False),
])
def test_auto_fans_out_large_steps_only_on_a_session_already_running(
        mode: str, entries: int, caps: Capabilities, open_: bool, cluster: bool,
        want: bool) -> None:
    assert worth_fanning(mode, entries, caps, open_, cluster) is want


def _staged(tmp_path: Path, n: int) -> PublishFiles:
    (tmp_path / "stage").mkdir()
    (tmp_path / "out").mkdir()
    moves = []
    for i in range(n):
        data = f"file {i}\n".encode()
        (tmp_path / "stage" / f"{i}.tmp").write_bytes(data)
        moves.append((f"file://{tmp_path}/stage/{i}.tmp", f"file://{tmp_path}/out/{i}.txt",
                      len(data)))
    return PublishFiles(tuple(moves))


def test_a_piece_travels_pickled_and_publishes_its_files_once(tmp_path: Path) -> None:
    step = _staged(tmp_path, 6)
    first, second = pieces(step, 2, 1)
    piece = pickle.loads(pickle.dumps(Piece(first, {}, {}, {})))
    assert [o.entries for o in run_piece(piece)] == [3]
    assert sorted(os.listdir(tmp_path / "out")) == ["0.txt", "1.txt", "2.txt"]
    assert [(o.entries, o.error) for o in run_piece(piece)] == [(3, "")]  # verified: done
    assert not step.verify(CommitContext())
    list(run_piece(Piece(second)))
    assert step.verify(CommitContext())
    assert (tmp_path / "out" / "4.txt").read_bytes() == b"file 4\n"
    assert os.listdir(tmp_path / "stage") == []


def test_a_piece_that_cannot_publish_reports_its_error_and_publishes_the_rest_later(
        tmp_path: Path) -> None:
    step = _staged(tmp_path, 3)
    (tmp_path / "stage" / "1.tmp").unlink()  # lost: neither staged nor published
    (outcome,) = run_piece(Piece(step))
    assert outcome.entries == 3
    assert outcome.error.startswith("publish failed: ")
    assert "1.tmp" in outcome.error


def test_the_environment_of_the_client_is_applied_for_the_piece_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Probe(CommitStep):
        kind = ""
        seen: list[str | None] = []

        def verify(self, ctx: CommitContext) -> bool:
            Probe.seen.append(os.environ.get("AWS_PROFILE"))
            return True

        def execute(self, ctx: CommitContext) -> None:
            raise AssertionError("verified: not executed")

    monkeypatch.setenv("AWS_PROFILE", "worker")
    list(run_piece(Piece(Probe(), env={"AWS_PROFILE": "client"})))
    assert Probe.seen == ["client"] and os.environ["AWS_PROFILE"] == "worker"
