"""Contract of every commit step kind, without Spark, on real disk and the moto server.

For each kind a commit log can hold (found from the step classes, so a new kind
fails ``test_every_step_kind_has_a_scenario`` by name until it is added here):
verify() is False before and True after execute(); a second execute() changes
nothing; to_dict/from_dict (through JSON, as the log stores it) gives the same
step. Then whole sequences: a crash after any number of steps, followed by the
engine's replay from the commit log, ends in exactly the state of a run that was
never interrupted (Gobblin's exactly-once CommitSequence, RELIABILITY.md I1-I3).
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distcp.checksum import digest_of_bytes
from distcp.commit.log import CommitStepStore
from distcp.commit.move_steps import DeleteSources
from distcp.commit.steps import CommitContext, CommitSequence, CommitStep, PublishFiles
from distcp.errors import PublishError
from distcp.events.naming import dataset_name
from distcp.state.store import StateStore
from distcp.storage import filesystems as fsutil
from distcp.summary import Summary
from tests.fixtures.commit_scenarios import (
    DATED,
    DIR_MTIME_NS,
    DIR_MTIME_S,
    FILES,
    JOINED,
    LISTED,
    OBJECTS,
    OWNER,
    SEQ_ID,
    URN,
    LocalLayout,
    S3Layout,
    all_kinds,
    listed_files,
    local_inputs,
    local_sequence,
    local_steps,
    replay_into,
    s3_sequence,
    s3_steps,
    snapshot_local,
    snapshot_s3,
)
from tests.fixtures.s3_server import S3Server, moto_server  # noqa: F401 - fixtures

LOCAL_KINDS = ("delete", "mkdirs", "check-digest", "publish", "publish-listed", "attributes",
               "owners", "remove-staging", "manifest-segment", "manifest-listed",
               "compact-manifest", "watermark",
               "stream-watermarks", "record-run", "event", "delete-source",
               "delete-empty-source-dirs")
S3_KINDS = ("delete", "s3-complete", "remove-staging", "manifest-segment", "compact-manifest",
            "watermark", "stream-watermarks", "record-run", "event")
CASES = [("local", k) for k in LOCAL_KINDS] + [("s3", k) for k in S3_KINDS]
#: Kinds whose contract needs more than a disk or a bucket, and where it is tested.
ELSEWHERE = {"catalog-partitions": "tests/e2e/test_catalog.py (a Spark catalog)",
             "iceberg-register": "tests/unit/test_iceberg_catalog.py (a SQL catalog on SQLite)"}


@pytest.fixture(scope="module")
def s3(moto_server: S3Server) -> S3Server:  # noqa: F811 - the fixture
    """The moto server, reset once for this module: each test works under a prefix of its
    own (a reset per test costs a second here, a third of this suite's time)."""
    moto_server.reset()
    return moto_server


def _prefix() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def test_every_step_kind_has_a_scenario() -> None:
    covered = set(LOCAL_KINDS) | set(S3_KINDS) | set(ELSEWHERE)
    missing = sorted(all_kinds() - covered)
    assert not missing, f"commit step kinds without a contract scenario: {missing}"
    assert not covered - all_kinds(), "scenarios for kinds that no longer exist"


@dataclass
class Bench:
    """One step ready to test: the steps before it in its sequence already ran."""

    step: CommitStep
    ctx: Callable[[], CommitContext]
    snapshot: Callable[[], Any]
    check: Callable[[], None]


@pytest.fixture
def bench(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Bench]:
    backend, kind = request.param
    if backend == "local":
        lay = LocalLayout(tmp_path)
        lay.dst.mkdir()
        local_inputs(lay)
        steps = local_steps(lay)
        ctx, snap = lay.ctx, (lambda: snapshot_local(tmp_path, DATED))
        check = LOCAL_CHECKS[kind]
        args: Any = lay
    else:
        server: S3Server = request.getfixturevalue("s3")
        slay = S3Layout(server, _prefix())
        steps = s3_steps(slay)
        ctx, snap = slay.ctx, (lambda: snapshot_s3(server, slay.prefix))
        check = S3_CHECKS.get(kind) or LOCAL_CHECKS[kind]
        args = slay
    for name, step in steps.items():
        if name == kind:
            yield Bench(step, ctx, snap, lambda: check(args))
            return
        step.execute(ctx())


@pytest.mark.parametrize("bench", CASES, indirect=True, ids=[f"{b}-{k}" for b, k in CASES])
def test_verify_is_false_before_and_true_after_execute(bench: Bench) -> None:
    if bench.step.kind != "check-digest":  # a check has nothing to do before it runs
        assert not bench.step.verify(bench.ctx()), "verify() claims an effect not yet made"
    bench.step.execute(bench.ctx())
    bench.check()
    assert bench.step.verify(bench.ctx())  # judged from the target, not from memory


@pytest.mark.parametrize("bench", CASES, indirect=True, ids=[f"{b}-{k}" for b, k in CASES])
def test_execute_twice_changes_nothing(bench: Bench) -> None:
    ctx = bench.ctx()
    bench.step.execute(ctx)
    once = bench.snapshot()
    bench.step.execute(ctx)  # again in the same run (dataset states cached)
    assert bench.snapshot() == once
    bench.step.execute(bench.ctx())  # again in a new process (states read again)
    assert bench.snapshot() == once
    bench.check()


@pytest.mark.parametrize("bench", CASES, indirect=True, ids=[f"{b}-{k}" for b, k in CASES])
def test_to_dict_from_dict_round_trips_through_json(bench: Bench) -> None:
    data = json.loads(json.dumps(bench.step.to_dict()))
    assert data["kind"] == bench.step.kind
    back = CommitStep.from_dict(data)
    assert type(back) is type(bench.step)
    assert back == bench.step
    assert back.to_dict() == bench.step.to_dict()


# ---- what each kind must have done, read back from disk or the server -------------

def _check_delete(lay: LocalLayout) -> None:
    assert not os.path.lexists(lay.dst / "old")
    assert not os.path.lexists(lay.dst / "link-to-outside")
    assert (lay.root / "outside" / "keep.txt").read_bytes().startswith(b"a link's target")


def _check_mkdirs(lay: LocalLayout) -> None:
    for d in ("d1", "d1/sub", "d2", "empty"):
        assert (lay.dst / d).is_dir(), d


def _check_digest(lay: LocalLayout) -> None:
    assert (lay.staging / f"f{len(FILES)}").read_bytes() == JOINED[1]  # checked, not moved


def _check_publish(lay: LocalLayout) -> None:
    for name, data in {**FILES, JOINED[0]: JOINED[1]}.items():
        assert (lay.dst / name).read_bytes() == data, name
    assert sorted(os.listdir(lay.staging)) == []


def _check_publish_listed(lay: LocalLayout) -> None:
    for name, data in LISTED.items():
        assert (lay.dst / name).read_bytes() == data, name
    assert not (lay.dst / "lost").exists()  # the failed file: nothing to publish
    assert os.listdir(lay.state / "staging" / "job2") == ["results"]


def _check_manifest_listed(lay: LocalLayout) -> None:
    assert _published_manifest(lay)  # the listed files, not the failed one


def _check_attributes(lay: LocalLayout) -> None:
    want = {"d1": (0o750, DIR_MTIME_NS), "d1/sub": (0o700, int(DIR_MTIME_S * 10**9)),
            "empty": (0o755, DIR_MTIME_NS)}
    for rel, (mode, mtime_ns) in want.items():
        st = os.stat(lay.dst / rel)
        assert stat.S_IMODE(st.st_mode) == mode, rel
        assert abs(st.st_mtime_ns - mtime_ns) < 1000, rel


def _check_owners(lay: LocalLayout) -> None:
    st, empty = os.stat(lay.dst / "d1"), os.stat(lay.dst / "empty")
    assert (st.st_uid, st.st_gid) == (int(OWNER[0]), int(OWNER[1]))
    assert (empty.st_uid, empty.st_gid) == (os.getuid(), int(OWNER[1]))  # owner left


def _check_delete_source(lay: LocalLayout) -> None:
    assert [p.name for p in lay.src.rglob("*") if p.is_file()] == ["not-moved.txt"]
    assert (lay.src / "d1" / "sub").is_dir()  # folders are left
    for name, data in FILES.items():
        assert (lay.dst / name).read_bytes() == data


def _check_empty_source_dirs(lay: LocalLayout) -> None:
    assert sorted(p.relative_to(lay.src).as_posix() for p in lay.src.rglob("*")) == \
        ["keep", "keep/not-moved.txt"]


def _check_remove_staging(lay: LocalLayout) -> None:
    assert not (lay.state / "splits" / "guid-joined").exists()
    assert (lay.state / "splits").is_dir()  # only the named entry goes


def _state(lay: LocalLayout | S3Layout) -> Any:
    return StateStore(str(lay.state), lay.ctx().dst_options).load(URN)


def _published_manifest(lay: LocalLayout | S3Layout, listed: bool = True
                        ) -> dict[str, list[Any]]:
    """What the manifest must say once the sequence's entries are in: the legacy
    document's entries migrated (less the one deleted) and the published files."""
    state = _state(lay)
    if isinstance(lay, LocalLayout):
        names = {**FILES, JOINED[0]: JOINED[1]}
        url, mtime0, guid = (lambda n: str(lay.dst / n)), 1_000.0, "guid"
        old = {str(lay.dst / "kept.txt"): [5, 301.0, "xxh3:1", "g-kept"]}
    else:
        names, url, mtime0, guid, old = dict(OBJECTS), lay.url, 2_000.0, "g", {}
    want = {url(n): [len(d), mtime0 + i, digest_of_bytes(d), f"{guid}{i}"]
            for i, (n, d) in enumerate(names.items())}
    if listed and isinstance(lay, LocalLayout):  # and what the listed steps published
        want.update({f.destination: [len(d), f.origin.mtime, digest_of_bytes(d), f.guid]
                     for f, d in listed_files(lay)})
    assert state.manifest == {**old, **want}
    return state.manifest


def _check_manifest(lay: LocalLayout | S3Layout) -> None:
    _published_manifest(lay, listed=False)  # the listed segment comes next
    state = _state(lay)
    assert [s.seq for s in state.segments] == [0, 1]  # the migrated one, then this one
    assert state.applied.count(f"{SEQ_ID}:mf") == 1
    assert state.watermark == 500.0  # the legacy document's, until the watermark step


def _check_compact(lay: LocalLayout | S3Layout) -> None:
    _published_manifest(lay)
    state = _state(lay)
    # all merged (local: the listed segment too), the tombstone dropped
    assert [s.seq for s in state.segments] == [2 if isinstance(lay, LocalLayout) else 1]
    fs, path = fsutil.filesystem(StateStore(str(lay.state), {}).folder_of(URN),
                                lay.ctx().dst_options)
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)] == \
        [state.segments[0].name]


def _check_watermark(lay: LocalLayout | S3Layout) -> None:
    state = _state(lay)
    _published_manifest(lay)
    assert state.watermark == (1_002.0 if isinstance(lay, LocalLayout) else 2_002.0)
    assert state.applied.count(f"{SEQ_ID}:wm") == 1


def _check_stream_watermarks(lay: LocalLayout | S3Layout) -> None:
    state = _state(lay)
    assert (state.low_watermark, state.expected_high_watermark,
            state.actual_high_watermark) == (3_600.0, 10_800.0, 7_200.0)
    assert state.watermark == (1_002.0 if isinstance(lay, LocalLayout) else 2_002.0)
    assert state.applied.count(f"{SEQ_ID}:swm") == 1


def _check_record_run(lay: LocalLayout | S3Layout) -> None:
    state = _state(lay)
    assert [r["job_id"] for r in state.runs] == ["job0", "job1"]
    assert state.applied.count(f"{SEQ_ID}:run") == 1


def _check_event(lay: LocalLayout | S3Layout) -> None:
    url = f"{lay.state}/events/{SEQ_ID}.json"
    fs, path = fsutil.filesystem(url, lay.ctx().dst_options)
    body = json.loads(fs.cat_file(path))  # the OpenLineage COMPLETE of the file set
    assert body["eventType"] == "COMPLETE"
    facet = body["run"]["facets"]["pydistcp_copy"]
    assert facet["idempotency_key"] == SEQ_ID
    assert (body["inputs"][0]["namespace"], body["inputs"][0]["name"]) == dataset_name(URN)
    assert facet["files"] == (len(FILES) + 1 if isinstance(lay, LocalLayout) else len(OBJECTS))
    assert not fs.exists(f"{path.rsplit('/', 1)[0]}/outbox/{SEQ_ID}.json")  # delivered


def _check_complete(lay: S3Layout) -> None:
    got = lay.server.objects("dst", lay.prefix + "/p/")
    assert got == {f"{lay.prefix}/{k}": v for k, v in OBJECTS.items()}
    assert [u for u in lay.server.pending_uploads() if u["Key"].startswith(lay.prefix)] == []


LOCAL_CHECKS: dict[str, Callable[[Any], None]] = {
    "delete": _check_delete, "mkdirs": _check_mkdirs, "check-digest": _check_digest,
    "publish": _check_publish, "publish-listed": _check_publish_listed,
    "attributes": _check_attributes, "owners": _check_owners,
    "manifest-listed": _check_manifest_listed, "delete-source": _check_delete_source,
    "delete-empty-source-dirs": _check_empty_source_dirs,
    "remove-staging": _check_remove_staging, "manifest-segment": _check_manifest,
    "compact-manifest": _check_compact, "watermark": _check_watermark,
    "stream-watermarks": _check_stream_watermarks, "record-run": _check_record_run, "event": _check_event,
}
def _check_s3_delete(lay: S3Layout) -> None:
    assert f"{lay.prefix}/p/old.txt" not in lay.server.objects("dst", lay.prefix + "/")


def _check_s3_remove_staging(lay: S3Layout) -> None:
    assert lay.server.objects("dst", f"{lay.prefix}/.pydistcp/splits/") == {}


S3_CHECKS: dict[str, Callable[[Any], None]] = {
    "s3-complete": _check_complete, "delete": _check_s3_delete,
    "remove-staging": _check_s3_remove_staging}


# ---- failures are reported, not half-done ----------------------------------------

def test_delete_source_keeps_a_source_whose_copy_is_not_at_the_destination(
        tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "dst").mkdir()
    src, dst = tmp_path / "src" / "f", tmp_path / "dst" / "f"
    src.write_bytes(b"12345")
    mtime = src.stat().st_mtime
    step = DeleteSources(((str(src), 5, mtime, ((str(dst), 5),)),))
    ctx = CommitContext({}, str(tmp_path / "state"))
    with pytest.raises(PublishError, match=r"^move: .*/src/f not deleted: its copy .*/dst/f "
                                           r"is missing$"):
        step.execute(ctx)
    dst.write_bytes(b"123")
    with pytest.raises(PublishError, match=r"is 3 bytes, not 5$"):
        step.execute(ctx)
    assert src.read_bytes() == b"12345" and not step.verify(ctx)
    src.write_bytes(b"123456")  # another version since the listing: not ours to delete
    assert step.verify(ctx)
    step.execute(ctx)
    assert src.read_bytes() == b"123456"


def test_check_digest_refuses_a_joined_file_that_differs_and_names_it(tmp_path: Path) -> None:
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    step = local_steps(lay)["check-digest"]
    (lay.staging / f"f{len(FILES)}").write_bytes(b"X" + JOINED[1][1:])  # one byte differs
    assert not step.verify(lay.ctx())
    with pytest.raises(PublishError, match=f"{lay.dst / JOINED[0]}.*copied again"):
        step.execute(lay.ctx())


def test_publish_of_a_staged_file_that_vanished_fails_the_sequence(tmp_path: Path) -> None:
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    (lay.staging / "f1").unlink()  # neither staged nor published: lost
    seq = local_sequence(lay)
    with pytest.raises(PublishError, match="cannot publish dataset://contract \\(files\\): "
                                           "publish failed"):
        seq.run(lay.ctx())
    assert not (lay.dst / "d1" / "sub" / "b.bin").exists()
    state = StateStore(str(lay.state), {}).load(URN)
    assert (state.watermark, state.segments) == (500.0, [])  # neither moved ahead


# ---- crash between any two steps, then replay from the commit log -----------------

def _crash_then_replay(seq: CommitSequence, ctx: Callable[[], CommitContext], state: str,
                       options: dict[str, Any], done: int) -> Summary:
    """Persist, run ``done`` steps as ``CommitSequence.run`` would, die, replay."""
    store = CommitStepStore(state, options)
    store.persist(seq, "job1")
    first = ctx()
    for step in seq.steps[:done]:
        if not step.verify(first):
            step.execute(first)
    summary = Summary()
    blocked = replay_into(CommitStepStore(state, options), ctx(), 3, summary)
    assert blocked == set()
    assert (summary.sequences_replayed, summary.failures) == (1, [])
    assert CommitStepStore(state, options).pending() == []
    return summary


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("uninterrupted")
    lay = LocalLayout(root)
    lay.dst.mkdir()
    local_inputs(lay)
    store = CommitStepStore(str(lay.state), {})
    seq = local_sequence(lay)
    store.persist(seq, "job1")
    seq.run(lay.ctx())
    store.remove(seq.id)
    return snapshot_local(root, DATED)


@pytest.mark.parametrize("done", range(len(LOCAL_KINDS) + 1))
def test_local_replay_after_crash_between_steps_equals_uninterrupted_run(
        tmp_path: Path, done: int, local_reference: Any) -> None:
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    seq = local_sequence(lay)
    assert [s.kind for s in seq.steps] == list(LOCAL_KINDS)
    summary = _crash_then_replay(seq, lay.ctx, str(lay.state), {}, done)
    assert snapshot_local(tmp_path, DATED) == local_reference
    assert summary.files_recovered == len(FILES) + 1 + len(LISTED)  # renamed and listed


def test_local_replay_after_crash_in_the_middle_of_publish(tmp_path: Path,
                                                            local_reference: Any) -> None:
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    seq = local_sequence(lay)
    publish = seq.steps[LOCAL_KINDS.index("publish")]
    CommitStepStore(str(lay.state), {}).persist(seq, "job1")
    for step in seq.steps[:LOCAL_KINDS.index("publish")]:
        step.execute(lay.ctx())
    assert isinstance(publish, PublishFiles)
    first = publish.moves[0]
    os.replace(first[0], first[1])  # the first rename happened, then the kill
    assert not publish.verify(lay.ctx())
    replay_into(CommitStepStore(str(lay.state), {}), lay.ctx(), 3, Summary())
    assert snapshot_local(tmp_path, DATED) == local_reference


@pytest.mark.parametrize("done", range(len(S3_KINDS) + 1))
def test_s3_replay_after_crash_between_steps_equals_uninterrupted_run(
        s3: S3Server, done: int) -> None:
    ref = S3Layout(s3, _prefix())
    seq = s3_sequence(ref)
    seq.run(ref.ctx())
    expected = snapshot_s3(s3, ref.prefix)
    assert expected["<pending uploads>"] == []

    lay = S3Layout(s3, _prefix())
    seq = s3_sequence(lay)
    assert [s.kind for s in seq.steps] == list(S3_KINDS)
    _crash_then_replay(seq, lay.ctx, lay.state, s3.options, done)
    got = snapshot_s3(s3, lay.prefix)
    assert {k: v for k, v in got.items() if not k.startswith(".pydistcp/commits")} == expected


def test_replays_cover_every_step_kind() -> None:
    missing = sorted(all_kinds() - set(LOCAL_KINDS) - set(S3_KINDS) - set(ELSEWHERE))
    assert not missing, f"no crash/replay scenario runs these kinds: {missing}"


@pytest.mark.parametrize("done,replayed", [(0, 3), (3, 6), (4, 5), (6, 7), (7, 8), (6, 11),
                                           (9, 10), (11, 11)])
def test_local_replay_that_crashes_too_is_finished_by_the_next_one(
        tmp_path: Path, done: int, replayed: int, local_reference: Any) -> None:
    """A crash during the replay itself (RELIABILITY.md layer B, second pass)."""
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    seq = local_sequence(lay)
    store = CommitStepStore(str(lay.state), {})
    store.persist(seq, "job1")
    for step in seq.steps[:done]:
        step.execute(lay.ctx())
    [pending] = store.pending()
    store.persist(pending.sequence, "job1", replays=pending.replays + 1)  # as replay does
    ctx = lay.ctx()
    for step in pending.sequence.steps[:replayed]:  # ... then dies again
        if not step.verify(ctx):
            step.execute(ctx)
    [again] = CommitStepStore(str(lay.state), {}).pending()
    assert again.replays == 1
    summary = Summary()
    assert replay_into(CommitStepStore(str(lay.state), {}), lay.ctx(), 3, summary) == set()
    assert summary.sequences_replayed == 1
    assert snapshot_local(tmp_path, DATED) == local_reference


def test_the_commit_log_can_read_back_every_step_kind_in_a_fresh_process() -> None:
    """A replay runs in a new process that imported only what the engine imports: every
    step kind defined anywhere in distcp must be known to the commit log there."""
    import importlib
    import pkgutil
    import subprocess
    import sys

    import distcp

    for mod in pkgutil.walk_packages(distcp.__path__, "distcp."):
        if not mod.name.startswith(("distcp.spark", "distcp.__main__")):
            importlib.import_module(mod.name)
    code = ("import distcp.commit.log\nfrom distcp.commit.steps import CommitStep\n"
            "todo, kinds = [CommitStep], set()\nwhile todo:\n    c = todo.pop()\n"
            "    kinds.add(c.kind)\n    todo.extend(c.__subclasses__())\n"
            "print(' '.join(sorted(k for k in kinds if k)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2],
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert "publish" in out.stdout.split()
    missing = sorted(all_kinds() - set(out.stdout.split()))
    assert not missing, f"step kinds a replay cannot read (not imported by commit_log): {missing}"
