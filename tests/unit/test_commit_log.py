"""The commit log (write-ahead log of commit sequences) and the state documents, on real
disk, the moto S3 server and fsspec's memory filesystem; no Spark.

What the engine relies on: a persisted sequence comes back equal; re-persisting (a
replay counting its tries) replaces the one document; removal and set-aside are
idempotent; a damaged document stops the run with an error naming the file, having
changed nothing; a write is all-or-nothing and leaves no temporary file behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from distcp.commit.log import SLICE, CommitStepStore, json_pieces
from distcp.commit.state_steps import AdvanceWatermark
from distcp.commit.steps import CommitSequence, CommitStep, MakeDirectories, PublishFiles
from distcp.errors import StateError
from distcp.state.store import (
    MAX_APPLIED,
    MAX_RUNS,
    DatasetState,
    StateStore,
    read_json,
    write_atomic,
)
from distcp.storage.atomic import write_atomic_pieces
from distcp.storage.writes import WriteOptions, carrying
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures


def _sequence(sid: str, urn: str = "urn:a") -> CommitSequence:
    return CommitSequence(urn, "set-1", (
        MakeDirectories(("/d/x", "/d/y")),
        PublishFiles((("/s/0", "/d/x/a", 3), ("/s/1", "/d/y/b", 0))),
        AdvanceWatermark(sid, urn, 12.5, (("/d/x/a", 3, 12.5, "xxh3:00", "g"),)),
    ), sid)


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# ---- commit log -------------------------------------------------------------------

def test_persisted_sequence_comes_back_equal(tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    seq = _sequence("job7-aaaa-bbbb")
    store.persist(seq, "job7")
    [pending] = store.pending()
    assert pending.sequence == seq
    assert (pending.job_id, pending.replays) == ("job7", 0)
    assert pending.url == str(tmp_path / "commits" / "job7-aaaa-bbbb.json")
    assert _files(tmp_path) == ["commits/job7-aaaa-bbbb.json"]  # one document, no temp


def test_an_entry_keeps_the_write_options_of_the_run_that_planned_it(tmp_path: Path) -> None:
    """The planning run's options go into the entry; a replay by a run with others (or
    none: ``recover``) persists it again unchanged; requester pays is not recorded."""
    planned = WriteOptions(storage_class="COLD", kms_key_id="k1", metadata=(("a", "1"),),
                           tags=(("t", "x"),), requester_pays=True)
    CommitStepStore(str(tmp_path), carrying({}, planned)).persist(_sequence("j-a-b"), "j")
    [pending] = CommitStepStore(str(tmp_path), {}).pending()
    want = WriteOptions(storage_class="COLD", kms_key_id="k1", metadata=(("a", "1"),),
                        tags=(("t", "x"),))
    assert pending.sequence.writes == want
    other = CommitStepStore(str(tmp_path), carrying({}, WriteOptions(storage_class="HOT")))
    other.persist(pending.sequence, "j", replays=1)
    [again] = other.pending()
    assert again.sequence.writes == want and again.replays == 1
    entry = json.loads((tmp_path / "commits" / "j-a-b.json").read_text())
    assert entry["writes"] == {"storage_class": "COLD", "kms_key_id": "k1",
                               "metadata": [["a", "1"]], "tags": [["t", "x"]]}


def test_a_file_set_longer_than_a_slice_is_written_in_pieces_and_read_back_equal(
        tmp_path: Path) -> None:
    n = 2 * SLICE + 5  # three slices of the long lists, the last one short
    seq = CommitSequence("urn:a", "set-1", (
        PublishFiles(tuple((f"/s/{i}", f"/d/{i}", i) for i in range(n))),
        AdvanceWatermark("sid", "urn:a", 1.5, tuple(
            (f"/d/{i}", i, 1.5, "xxh3:00", f"g{i}") for i in range(n))),
    ), "job7-long")
    store = CommitStepStore(str(tmp_path), {})
    store.persist(seq, "job7")
    text = (tmp_path / "commits" / "job7-long.json").read_text()
    body = {"version": 1, "job_id": "job7", "replays": 0, **seq.to_dict()}
    assert text == json.dumps(body, separators=(",", ":"))  # the one-shot encoding
    [pending] = store.pending()
    assert pending.sequence == seq


@pytest.mark.parametrize("value", [
    [], {}, [1] * SLICE, [1] * (SLICE + 1), {"a": [[i, "x"] for i in range(SLICE * 2)], "b": {}},
    ("t", 1.5, None, True), {"k": ("é", "\n")}])
def test_json_pieces_join_to_what_json_dumps_writes(value: Any) -> None:
    assert "".join(json_pieces(value)) == json.dumps(value, separators=(",", ":"))


def test_a_document_whose_pieces_fail_leaves_the_old_one_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    write_atomic(str(target), b"old", {})

    def pieces() -> Iterator[bytes]:
        yield b"new, half"
        raise RuntimeError("the maker failed")

    with pytest.raises(RuntimeError):
        write_atomic_pieces(str(target), pieces(), {})
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["doc.json"]


def test_pending_lists_oldest_job_first(tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    for sid in ("job3-x", "job1-x", "job2-x"):
        store.persist(_sequence(sid), sid.split("-")[0])
    assert [p.sequence.id for p in store.pending()] == ["job1-x", "job2-x", "job3-x"]


def test_re_persisting_replaces_the_document_and_counts_replays(tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    seq = _sequence("job1-x")
    store.persist(seq, "job1")
    store.persist(seq, "job1", replays=1)
    store.persist(seq, "job1", replays=2)
    [pending] = store.pending()
    assert (pending.sequence, pending.replays) == (seq, 2)
    assert _files(tmp_path) == ["commits/job1-x.json"]


def test_remove_is_idempotent(tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    store.persist(_sequence("job1-x"), "job1")
    store.remove("job1-x")
    store.remove("job1-x")  # a replay of a removal after a crash
    assert store.pending() == []
    assert CommitStepStore(str(tmp_path / "never-written"), {}).pending() == []


def test_set_aside_moves_the_sequence_out_of_the_replay_path(tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    store.persist(_sequence("job1-x"), "job1", replays=3)
    [pending] = store.pending()
    store.set_aside(pending)
    assert store.pending() == []
    [aside] = store.pending(aside=True)
    assert (aside.sequence, aside.replays, aside.job_id) == (pending.sequence, 3, "job1")
    assert aside.url == str(tmp_path / "commits" / "aside" / "job1-x.json")


def test_a_temporary_file_left_by_a_killed_write_is_not_a_pending_sequence(
        tmp_path: Path) -> None:
    store = CommitStepStore(str(tmp_path), {})
    store.persist(_sequence("job1-x"), "job1")
    (tmp_path / "commits" / "job2-x.json.tmp-1a2b3c4d").write_bytes(b'{"version": 1, "jo')
    assert [p.sequence.id for p in store.pending()] == ["job1-x"]


@pytest.mark.parametrize("damage,cause", [
    (lambda raw: raw[: len(raw) // 2], "Expecting|Unterminated|delimiter"),  # cut short
    (lambda raw: b"\xff\xfe" + raw, "codec|decode|Expecting"),  # not UTF-8 any more
    (lambda raw: b"", "Expecting value"),  # empty: a write that never got its bytes
])
def test_a_damaged_log_entry_is_an_error_naming_the_file(
        tmp_path: Path, damage: Callable[[bytes], bytes], cause: str) -> None:
    store = CommitStepStore(str(tmp_path), {})
    store.persist(_sequence("job1-x"), "job1")
    path = tmp_path / "commits" / "job1-x.json"
    path.write_bytes(damage(path.read_bytes()))
    before = path.read_bytes()
    with pytest.raises(StateError, match=f"corrupt commit log entry {path}: .*({cause})") as e:
        store.pending()
    assert "no data was changed" in str(e.value)
    assert e.value.attrs.get("path") == str(path)
    assert path.read_bytes() == before  # left as found, for a human to inspect


@pytest.mark.parametrize("edit,cause", [
    (lambda d: d.pop("job_id"), "'job_id'"),
    (lambda d: d.pop("steps"), "'steps'"),
    (lambda d: d["steps"][0].update(kind="frobnicate"), "unknown commit step kind 'frobnicate'"),
    (lambda d: d["steps"][1].update(unexpected=1), "unexpected"),
    (lambda d: d.update(replays="many"), "many"),
])
def test_a_log_entry_that_parses_but_is_not_a_sequence_names_the_file(
        tmp_path: Path, edit: Callable[[dict[str, Any]], object], cause: str) -> None:
    store = CommitStepStore(str(tmp_path), {})
    store.persist(_sequence("job1-x"), "job1")
    path = tmp_path / "commits" / "job1-x.json"
    data = json.loads(path.read_bytes())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match=f"corrupt commit log entry {path}: .*{cause}"):
        store.pending()


def test_unknown_step_kind_is_refused_by_name() -> None:
    with pytest.raises(StateError, match="unknown commit step kind 'nope'"):
        CommitStep.from_dict({"kind": "nope", "urls": []})
    with pytest.raises(StateError, match="unknown commit step kind None"):
        CommitStep.from_dict({"urls": []})


def test_commit_log_on_the_s3_server(s3: S3Server) -> None:  # noqa: F811 - the fixture
    root = "s3://dst/state"
    store = CommitStepStore(root, s3.options)
    seq = _sequence("job1-x")
    store.persist(seq, "job1")
    store.persist(seq, "job1", replays=1)
    assert list(s3.objects("dst")) == ["state/commits/job1-x.json"]
    [pending] = CommitStepStore(root, s3.options).pending()
    assert (pending.sequence, pending.replays) == (seq, 1)
    assert pending.url == "s3://dst/state/commits/job1-x.json"
    store.set_aside(pending)
    assert list(s3.objects("dst")) == ["state/commits/aside/job1-x.json"]
    store.remove("job1-x")
    assert store.pending() == []


# ---- write_atomic / read_json -------------------------------------------------------

def test_write_atomic_local_replaces_whole_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "doc.json"  # parents made
    write_atomic(str(target), b'{"v": 1}', {})
    write_atomic(str(target), b'{"v": 2, "longer": true}', {})
    write_atomic(str(target), b"{}", {}, durable=False)
    assert target.read_bytes() == b"{}"
    assert os.listdir(target.parent) == ["doc.json"]


def test_write_atomic_through_a_filesystem_without_rename_semantics() -> None:
    fs = fsspec.filesystem("memory")
    url = "memory://pydistcp-test-state/doc.json"
    try:
        write_atomic(url, b"one", {})
        write_atomic(url, b"two", {})
        assert fs.cat_file("/pydistcp-test-state/doc.json") == b"two"
        assert fs.ls("/pydistcp-test-state", detail=False) == ["/pydistcp-test-state/doc.json"]
    finally:
        fs.rm("/pydistcp-test-state", recursive=True)


def test_write_atomic_and_read_json_on_the_s3_server(s3: S3Server) -> None:  # noqa: F811
    write_atomic("s3://dst/st/doc.json", b'{"x": [1, 2]}', s3.options)
    assert s3.objects("dst") == {"st/doc.json": b'{"x": [1, 2]}'}
    assert read_json("s3://dst/st/doc.json", s3.options, "thing") == {"x": [1, 2]}
    assert read_json("s3://dst/st/none.json", s3.options, "thing") is None


def test_read_json_of_a_missing_document_is_none(tmp_path: Path) -> None:
    assert read_json(str(tmp_path / "none.json"), {}, "dataset state") is None


def test_read_json_of_a_damaged_document_names_it_and_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_bytes(b'{"urn": "x", "manif')
    with pytest.raises(StateError, match=f"^corrupt dataset state {path}: .*no data was "
                                         "changed. Inspect it, then move it out"):
        read_json(str(path), {}, "dataset state")


# ---- dataset state ------------------------------------------------------------------

def test_state_round_trips_through_a_new_store(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:a")
    assert (state.watermark, state.manifest, state.runs, state.applied) == (None, {}, [], [])
    state.watermark = 5.5
    store.append_segment(state, "s1", [("/d/a", 3, 5.5, "xxh3:00", "g")], ())
    state.applied.append("s1:wm")
    store.save(state)
    again = StateStore(str(tmp_path), {}).load("urn:a")
    assert again == state
    assert (again.watermark, again.applied, again.next_seq) == (5.5, ["s1:wm"], 2)
    assert again.manifest == {"/d/a": [3, 5.5, "xxh3:00", "g"]}
    assert [s.urn for s in StateStore(str(tmp_path), {}).all()] == ["urn:a"]


def test_state_keeps_the_newest_runs_and_markers_only() -> None:
    state = DatasetState("u", runs=[{"n": i} for i in range(MAX_RUNS + 7)],
                         applied=[f"s{i}" for i in range(MAX_APPLIED + 3)])
    data = json.loads(state.to_json())
    assert data["runs"][0] == {"n": 7} and len(data["runs"]) == MAX_RUNS
    assert data["applied"][-1] == f"s{MAX_APPLIED + 2}" and len(data["applied"]) == MAX_APPLIED
    assert "manifest" not in data  # the manifest is in its segments, never in the document


def test_a_state_document_of_another_dataset_is_refused(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), {})
    Path(store.url_of("urn:a")).parent.mkdir(parents=True)
    Path(store.url_of("urn:a")).write_text(json.dumps({"urn": "urn:b"}))
    with pytest.raises(StateError, match=f"{store.url_of('urn:a')} does not describe urn:a"):
        StateStore(str(tmp_path), {}).load("urn:a")


def test_a_failed_save_forgets_the_cached_state(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:a")
    state.watermark = 1.0
    store.save(state)
    (tmp_path / "datasets").rename(tmp_path / "moved")
    (tmp_path / "datasets").write_bytes(b"a file where the directory must be")
    changed = store.load("urn:a")
    changed.watermark = 2.0
    with pytest.raises(OSError):
        store.save(changed)
    (tmp_path / "datasets").unlink()
    (tmp_path / "moved").rename(tmp_path / "datasets")
    assert store.load("urn:a").watermark == 1.0  # what is on disk, not the unsaved change
