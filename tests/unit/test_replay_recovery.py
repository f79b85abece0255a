"""What a run finishes for the runs before it, on real disk, without Spark: replaying
the commit log, reading the tasks' journals, sweeping dead jobs' staging into the
recovery area, and the recovery area itself (keep, take, expire)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from distcp.checksum import digest_of_bytes
from distcp.commit.kept_steps import PublishKept
from distcp.commit.log import CommitStepStore
from distcp.commit.recovery import RecoveryArea
from distcp.commit.replay import read_journal, sweep_dead_jobs
from distcp.commit.state_steps import AdvanceWatermark
from distcp.commit.steps import CommitContext, CommitSequence, MakeDirectories, PublishFiles
from distcp.model import CopyableFile, FileStatus, TaskResult
from distcp.state.bounds import Bounds
from distcp.summary import Summary
from tests.fixtures.commit_scenarios import LISTED, URN, LocalLayout, listed_inputs, replay_into


def _result(root: Path, name: str, data: bytes, job: str = "jobA",
            staged: bool = True) -> tuple[CopyableFile, TaskResult]:
    src = root / "src" / name
    f = CopyableFile(FileStatus(str(src), len(data), 50.0), str(root / "dst" / name), "urn:a",
                     "all")
    staging = root / "state" / "staging" / job / f"u0-t1-{name}"
    if staged:
        staging.parent.mkdir(parents=True, exist_ok=True)
        staging.write_bytes(data)
    return f, TaskResult(guid=f.guid, unit_id=0, attempt="t1", origin=str(src),
                         destination=f.destination, dataset_urn="urn:a", file_set="all",
                         status="ok", staging=str(staging), bytes_read=len(data),
                         bytes_written=len(data), checksum=digest_of_bytes(data))


def _journal(root: Path, job: str, segment: str, entries: list[tuple[CopyableFile, TaskResult]]
             ) -> Path:
    path = root / "state" / "progress" / job / segment
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"planned": f.destination, "results": [asdict(r)]}
                                for f, r in entries]))
    return path


# ---- replay_pending -----------------------------------------------------------------

def _ctx(root: Path) -> CommitContext:
    """A run's context: its records may act in ``root/dst`` and ``root/state``."""
    return CommitContext({}, str(root / "state"),
                         bounds=Bounds(str(root / "dst"), str(root / "state")))


def _pending_publish(root: Path, sid: str = "jobA-1") -> CommitSequence:
    staged = root / "state" / "staging" / "jobA" / "x"
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(b"12345")
    seq = CommitSequence("urn:a", "all", (
        MakeDirectories((str(root / "dst" / "d"),)),
        PublishFiles(((str(staged), str(root / "dst" / "d" / "x"), 5),)),
        AdvanceWatermark(sid, "urn:a", 9.0, ((str(root / "dst" / "d" / "x"), 5, 9.0, "", "g"),)),
    ), sid)
    CommitStepStore(str(root / "state"), {}).persist(seq, "jobA")
    return seq


def test_replay_finishes_a_persisted_sequence_and_removes_it(tmp_path: Path) -> None:
    _pending_publish(tmp_path)
    summary = Summary()
    store = CommitStepStore(str(tmp_path / "state"), {})
    ctx = _ctx(tmp_path)
    assert replay_into(store, ctx, 3, summary) == set()
    assert (tmp_path / "dst" / "d" / "x").read_bytes() == b"12345"
    assert (summary.sequences_replayed, summary.files_recovered, summary.bytes_recovered) == (1, 1, 5)
    assert store.pending() == []
    # a second replay finds nothing to do
    assert replay_into(store, ctx, 3, Summary()) == set()


def test_a_replay_that_fails_blocks_its_dataset_and_counts_the_try(tmp_path: Path) -> None:
    _pending_publish(tmp_path)
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "d").write_bytes(b"a file where the folder must go")
    store = CommitStepStore(str(tmp_path / "state"), {})
    summary = Summary()
    assert replay_into(store, _ctx(tmp_path), 3,
                          summary) == {"urn:a"}
    [failure] = summary.failures
    assert failure.path == "urn:a"
    assert failure.error.startswith("replay of commit jobA-1 failed: cannot publish urn:a")
    [pending] = store.pending()
    assert pending.replays == 1
    assert (tmp_path / "state" / "staging" / "jobA" / "x").read_bytes() == b"12345"


def test_a_replay_whose_staged_copy_is_gone_sets_it_aside_at_once_and_copies_again(
        tmp_path: Path) -> None:
    seq = _pending_publish(tmp_path)
    os.unlink(tmp_path / "state" / "staging" / "jobA" / "x")  # a temp cleaner took it
    store = CommitStepStore(str(tmp_path / "state"), {})
    summary = Summary()
    assert replay_into(store, _ctx(tmp_path), 3, summary) == set()  # copied again now
    assert summary.failures == [] and summary.sequences_set_aside == 1
    assert summary.notes == [
        (f"commit jobA-1 of urn:a cannot finish: its staged copy of {tmp_path}/dst/d/x is "
        f"gone; set aside in {tmp_path}/state/commits/aside/jobA-1.json; the dataset is "
        "copied again")]
    assert store.pending() == []
    [aside] = store.pending(aside=True)
    assert aside.sequence == seq


def test_a_sequence_that_failed_max_replays_is_set_aside(tmp_path: Path) -> None:
    seq = _pending_publish(tmp_path)
    store = CommitStepStore(str(tmp_path / "state"), {})
    store.persist(seq, "jobA", replays=2)
    summary = Summary()
    blocked = replay_into(store, _ctx(tmp_path), 2, summary)
    assert blocked == {"urn:a"}
    assert store.pending() == []
    [aside] = store.pending(aside=True)
    assert aside.sequence == seq and aside.replays == 2
    assert summary.sequences_set_aside == 1
    [failure] = summary.failures
    assert failure.error == (f"commit jobA-1 failed 2 replays; set aside in "
                             f"{tmp_path}/state/commits/aside/jobA-1.json; dataset not copied")
    assert not (tmp_path / "dst" / "d" / "x").exists()  # nothing run


# ---- journals and the sweep of dead jobs --------------------------------------------

def test_read_journal_skips_segments_cut_short_and_counters(tmp_path: Path) -> None:
    a = _result(tmp_path, "a", b"aaa")
    b = _result(tmp_path, "b", b"bb")
    _journal(tmp_path, "jobA", "u0-t1.j0.json", [a])
    _journal(tmp_path, "jobA", "u1-t1.j0.json", [b])
    cut = tmp_path / "state" / "progress" / "jobA" / "u2-t1.j0.json"
    cut.write_text('[{"planned": "x", "resul')  # the kill came mid-write
    (tmp_path / "state" / "progress" / "jobA" / "u0-t1.json").write_text('{"files": 1}')
    got = read_journal(str(tmp_path / "state"), {}, "jobA")
    assert sorted(got) == sorted([a[1].guid, b[1].guid])
    for f, r in (a, b):
        planned, [back] = got[r.guid]
        assert planned == f.destination
        assert (back.staging, back.bytes_written, back.checksum, back.destination) == (
            r.staging, r.bytes_written, r.checksum, r.destination)
    assert read_journal(str(tmp_path / "state"), {}, "no-such-job") == {}


def test_the_journal_progress_writes_reads_back_whole(tmp_path: Path) -> None:
    """The form tasks write now (field names once per segment), a file's record in the
    batched segment and one of many outputs streamed alone: every field comes back."""
    from distcp.copying.outputs import Outputs
    from distcp.copying.progress import Progress
    from distcp.copying.taskspec import TaskSpec

    a, b = _result(tmp_path, "a", b"aaa"), _result(tmp_path, "b", b"bb")
    b2 = (b[0], replace(b[1], destination=str(tmp_path / "dst" / "b2"), parts=((1, "x"),),
                        requests=(("get", 2),)))
    spec = TaskSpec("jobA", str(tmp_path / "state" / "staging" / "jobA"),
                    str(tmp_path / "state" / "progress" / "jobA"))
    (tmp_path / "state" / "progress" / "jobA").mkdir(parents=True)  # the driver makes it
    moded = _result(tmp_path, "m", b"m")
    moded = (moded[0], replace(moded[1], mode=0o640))  # a field past a copy's own set
    progress = Progress(spec, 0, "t1")
    progress.advance(a[0], Outputs.one(a[1]))
    progress.advance(moded[0], Outputs.of([moded[1]]))
    many = Outputs(str(tmp_path), in_memory=1)  # spilled: its own segment, streamed
    for r in (b[1], b2[1]):
        many.append(r)
    progress.advance(b[0], many)
    progress.flush()
    folder = tmp_path / "state" / "progress" / "jobA"
    segments = sorted(p.name for p in folder.iterdir())
    assert segments == ["u0-t1.j0.json", "u0-t1.j1.json", "u0-t1.json"]
    got = read_journal(str(tmp_path / "state"), {}, "jobA")
    assert got[a[1].guid] == (a[0].destination, [a[1]])
    assert got[moded[1].guid] == (moded[0].destination, [moded[1]])
    planned, back = got[b[1].guid]
    assert planned == b[0].destination and back == [b[1], b2[1]]
    # a plain copy's row stops after the fields it sets; one with more is whole
    batched = json.loads((folder / "u0-t1.j1.json").read_text())
    fields = batched["fields"]
    rows = {row[fields.index("guid")]: row for _, [row] in batched["records"]}
    assert len(rows[a[1].guid]) == fields.index("checksum") + 1
    assert len(rows[moded[1].guid]) == len(fields)
    # a row shorter than a result's own fields is refused, not read with holes
    rows[a[1].guid][fields.index("checksum"):] = []
    (folder / "u0-t1.j1.json").write_text(json.dumps(batched))
    with pytest.raises(ValueError, match="a journal row of 11 values"):
        read_journal(str(tmp_path / "state"), {}, "jobA")


def test_sweep_keeps_journaled_intact_copies_of_dead_jobs_and_deletes_the_rest(
        tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    good = _result(tmp_path, "good", b"verified")
    short = _result(tmp_path, "short", b"was longer")
    Path(short[1].staging).write_bytes(b"was")  # changed after the journal vouched for it
    _result(tmp_path, "unjournaled", b"?")
    _journal(tmp_path, "jobA", "u0-t1.j0.json", [good, short])
    live = _result(tmp_path, "live", b"running", job="jobNow")
    kept_job = _result(tmp_path, "kept", b"kept", job="jobKeep")
    area = RecoveryArea(state, {})
    assert sweep_dead_jobs(state, {}, "jobNow", area, {"jobKeep"}) == 1
    assert area.guids() == {good[1].guid}
    [kept] = area.take(good[0]) or []
    assert Path(kept.staging).read_bytes() == b"verified"
    assert not (tmp_path / "state" / "staging" / "jobA").exists()
    assert not (tmp_path / "state" / "progress" / "jobA").exists()
    assert Path(live[1].staging).read_bytes() == b"running"  # the current job's own
    assert Path(kept_job[1].staging).read_bytes() == b"kept"  # a job still publishing


def test_sweep_does_not_keep_a_copy_twice(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    good = _result(tmp_path, "good", b"verified")
    area = RecoveryArea(state, {})
    area.keep(good[1].guid, good[0].destination, [good[1]])
    again = _result(tmp_path, "good", b"verified")  # another dead job staged it too
    _journal(tmp_path, "jobA", "u0-t1.j0.json", [again])
    assert sweep_dead_jobs(state, {}, "jobNow", area, set()) == 0
    assert area.guids() == {good[1].guid}


# ---- the recovery area --------------------------------------------------------------

def test_take_gives_back_what_keep_stored_for_the_same_destination(tmp_path: Path) -> None:
    f, r = _result(tmp_path, "a", b"abc")
    area = RecoveryArea(str(tmp_path / "state"), {})
    area.keep(f.guid, f.destination, [r])
    assert not Path(r.staging).exists()  # moved, not copied
    [back] = area.take(f) or []
    assert (back.attempt, back.bytes_written, back.checksum) == ("recovered", 3, r.checksum)
    assert back.staging == str(tmp_path / "state" / "recovery" / f.guid / "0")
    assert Path(back.staging).read_bytes() == b"abc"


def test_take_refuses_a_copy_meant_elsewhere_or_damaged(tmp_path: Path) -> None:
    f, r = _result(tmp_path, "a", b"abc")
    area = RecoveryArea(str(tmp_path / "state"), {})
    area.keep(f.guid, f.destination, [r])
    elsewhere = CopyableFile(f.origin, f.destination + ".renamed", f.dataset_urn, f.file_set)
    assert area.take(elsewhere) is None
    kept = tmp_path / "state" / "recovery" / f.guid / "0"
    kept.write_bytes(b"ab")
    assert area.take(f) is None
    (tmp_path / "state" / "recovery" / f.guid / "meta.json").write_text("{not json")
    assert area.take(f) is None


def test_expire_removes_old_and_half_written_entries(tmp_path: Path) -> None:
    area = RecoveryArea(str(tmp_path / "state"), {})
    old = _result(tmp_path, "old", b"o")
    new = _result(tmp_path, "new", b"n")
    area.keep(old[1].guid, old[0].destination, [old[1]])
    area.keep(new[1].guid, new[0].destination, [new[1]])
    meta = tmp_path / "state" / "recovery" / old[1].guid / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "kept": 1000.0}))
    (tmp_path / "state" / "recovery" / "half-written").mkdir()
    now = json.loads((tmp_path / "state" / "recovery" / new[1].guid / "meta.json")
                     .read_text())["kept"] + 10
    assert area.expire(3600, now=now, dry_run=True) == 2
    assert len(area.guids()) == 3 and area.kept() == area.guids()  # nothing removed
    assert area.expire(3600, now=now) == 2
    assert area.guids() == {new[1].guid} == area.kept()
    assert [e["guid"] for e in area.entries()] == [new[1].guid]


def test_what_the_expiry_left_is_kept_without_listing_again(tmp_path: Path) -> None:
    """The plan and the copy ask ``kept()`` after the run's start expired the area: the
    folder is not listed again (an entry made behind the run's back, which the lock
    forbids, is not seen); before any expiry, ``kept()`` lists it."""
    area = RecoveryArea(str(tmp_path / "state"), {})
    f, r = _result(tmp_path, "a", b"abc")
    area.keep(f.guid, f.destination, [r])
    assert area.kept() == {f.guid}
    area.expire(3600)
    (tmp_path / "state" / "recovery" / "made-behind-its-back").mkdir()
    assert area.kept() == {f.guid}
    assert area.guids() == {f.guid, "made-behind-its-back"}


@pytest.mark.parametrize("empty", [True, False])
def test_keep_of_a_result_with_no_staged_file(tmp_path: Path, empty: bool) -> None:
    """A directory entry of an archive has no staged bytes: kept as metadata only."""
    f, r = _result(tmp_path, "d", b"", staged=False)
    r = TaskResult(**{**asdict(r), "staging": "", "destination": f.destination + "/"})
    area = RecoveryArea(str(tmp_path / "state"), {})
    area.keep(f.guid, f.destination, [r] if empty else [r, _result(tmp_path, "d", b"x")[1]])
    back = area.take(f)
    assert back is not None and back[0].staging == ""
    assert len(back) == (1 if empty else 2)


@pytest.mark.parametrize("lost", ["results file", "staged copy"])
def test_a_kept_copy_commit_whose_staging_is_gone_is_set_aside_at_once(
        tmp_path: Path, lost: str) -> None:
    """The thin path's record lists its copies in a results file under staging: the
    file gone, or one staged copy it lists gone, no replay can finish it."""
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir(parents=True)
    listed_inputs(lay)
    seq = CommitSequence(URN, "files", (PublishKept(((lay.listed_results, len(LISTED)),)),),
                         "job2-1")
    store = CommitStepStore(str(lay.state), {})
    store.persist(seq, "job2")
    if lost == "results file":
        os.unlink(lay.listed_results)
    else:
        os.unlink(lay.state / "staging" / "job2" / "l1")
    summary = Summary()
    assert replay_into(store, lay.ctx(), 3, summary) == set()
    assert summary.failures == [] and summary.sequences_set_aside == 1
    [note] = summary.notes
    assert "cannot finish" in note and "the dataset is copied again" in note
    assert store.pending() == [] and len(store.pending(aside=True)) == 1


def test_a_failed_replay_looks_at_no_more_than_its_bound_of_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loss beyond LOST_CHECK_MAX files is not looked for (a commit of a million files
    that failed for another cause must not cost a million requests): the replay counts
    as failed, and --max-replays sets it aside later."""
    from distcp.commit import replay

    staging = tmp_path / "state" / "staging" / "jobA"
    staging.mkdir(parents=True)
    moves = []
    for n in range(3):
        (staging / f"s{n}").write_bytes(b"abc")
        moves.append((str(staging / f"s{n}"), str(tmp_path / "dst" / f"f{n}"), 3))
    seq = CommitSequence("urn:a", "all", (MakeDirectories((str(tmp_path / "dst"),)),
                                          PublishFiles(tuple(moves))), "jobA-2")
    store = CommitStepStore(str(tmp_path / "state"), {})
    store.persist(seq, "jobA")
    os.unlink(staging / "s2")  # the third file's copy is gone
    monkeypatch.setattr(replay, "LOST_CHECK_MAX", 2)
    summary = Summary()
    assert replay_into(store, _ctx(tmp_path), 3, summary) == {"urn:a"}
    assert summary.sequences_set_aside == 0 and len(summary.failures) == 1
    monkeypatch.setattr(replay, "LOST_CHECK_MAX", 3)
    summary = Summary()
    assert replay_into(store, _ctx(tmp_path), 3, summary) == set()
    assert summary.sequences_set_aside == 1 and summary.failures == []
