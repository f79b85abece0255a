"""A dataset's manifest as Parquet segments (issue 11, point 3), on real disk; no Spark
except where Spark reading the folder is the point.

What the engine relies on: publishing file set N writes N's entries only (never those
of 1..N-1); merges keep the manifest and rewrite each entry a bounded number of times;
a crash anywhere inside a state step, then the replay, ends exactly as a run that was
never interrupted; a state document of the first format is read and migrated, never
lost; ``pydistcp status`` counts the same files.
"""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distcp.commit.log import CommitStepStore
from distcp.commit.status import render_status, status_report
from distcp.state import manifest as mf
from distcp.state import sizes
from distcp.state.layout import StateLayout
from distcp.state.store import MIGRATED, StateStore, urn_key
from distcp.summary import Summary
from tests.fixtures.commit_scenarios import (
    DATED,
    URN,
    LocalLayout,
    local_inputs,
    replay_into,
    snapshot_local,
)
from tests.unit.test_publish import World

ROOT = Path(__file__).resolve().parents[2]


# ---- publishing N file sets ---------------------------------------------------------

def _files(state: Path) -> dict[str, tuple[int, int]]:
    """Every file under the state root: (inode, mtime_ns); a write_atomic makes a new
    inode, so a changed pair means the file was written."""
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns) for p in state.rglob("*")
            if p.is_file()}


def _rows(path: str) -> int:
    return int(mf.from_parquet(Path(path).read_bytes()).num_rows)


def test_publishing_file_set_n_rewrites_no_entry_of_the_sets_before(tmp_path: Path) -> None:
    world = World(tmp_path)
    sets, per_set = 60, 5
    written: list[tuple[int, int, int]] = []  # per publish: own rows, merged rows, doc bytes
    for n in range(sets):
        for i in range(per_set):
            world.add(f"p{n:03d}/f{i}.txt", f"{n}-{i}".encode(), f"p{n:03d}")
        before = _files(Path(world.state))
        world.publish((world.plan(),), results=world.results[-per_set:])
        after = _files(Path(world.state))
        changed = [p for p, v in after.items() if before.get(p) != v]
        own = sum(_rows(p) for p in changed if Path(p).name.startswith("s"))
        merged = sum(_rows(p) for p in changed if Path(p).name.startswith("m"))
        doc = [p for p in changed if "/datasets/" in p]
        written.append((own, merged, sum(os.path.getsize(p) for p in doc)))
    # Its own entries, nothing more (a publish that merged may have merged its own
    # segment away at once: then its rows are counted with the merge).
    assert [w[0] for w in written if not w[1]] == [per_set] * sum(1 for w in written if not w[1])
    assert all(w[0] <= per_set for w in written)
    assert sum(1 for w in written if w[1]) <= sets // (mf.COMPACT_AFTER // 2)
    # Merges rewrite each entry a few times in all (tiered), not once per publish:
    # rewriting the whole manifest at each publish would be sets/2 times per entry.
    assert sum(w[1] for w in written) <= 3 * sets * per_set
    state = StateStore(world.state, {}).load("urn:a")
    assert len(state.manifest) == sets * per_set
    assert len(state.segments) <= mf.COMPACT_AFTER
    doc = Path(StateStore(world.state, {}).url_of("urn:a")).read_text()
    assert "f0.txt" not in doc  # no entry in the document: it grows with runs, not files


def test_the_manifest_is_the_newest_row_of_each_destination_through_any_merges(
        tmp_path: Path) -> None:
    """Random publishes, re-publishes and deletes against a dict doing what the
    manifest must: read back in this process and by a new one, after every publish."""
    rng = random.Random(11)
    store = StateStore(str(tmp_path), {})
    model: dict[str, list[Any]] = {}
    for n in range(80):
        state = store.load("urn:r")
        names = [f"/d/{rng.randrange(40)}" for _ in range(rng.randrange(0, 6))]
        entries = [(d, n, float(n), f"xxh3:{n}", f"g{n}") for d in names]
        removed = [f"/d/{rng.randrange(40)}" for _ in range(rng.randrange(0, 3))]
        store.append_segment(state, f"seq{n}", entries, removed)
        store.save(state)
        for d in removed:
            model.pop(d, None)
        model.update({e[0]: [e[1], e[2], e[3], e[4]] for e in entries})
        store.compact(state, threshold=3)
        assert state.manifest == model, n
        assert StateStore(str(tmp_path), {}).load("urn:r").manifest == model, n
    assert StateStore(str(tmp_path), {}).count(store.load("urn:r")) == len(model)


def test_a_reader_whose_segments_were_merged_away_reads_the_document_again(
        tmp_path: Path) -> None:
    """``status`` beside a continuous copy: the reader read the document, then the copy
    merged and removed the segments it named (seen: status failed on a missing segment
    file). The reader finds the merged one; a segment gone while the document still
    names it, or with the document, is an error, as it is."""
    writer = StateStore(str(tmp_path), {})
    for n in range(6):
        state = writer.load("urn:m")
        writer.append_segment(state, f"seq{n}", [(f"/d/{n}", n, float(n), f"x{n}", f"g{n}")],
                              [])
        writer.save(state)
    reader = StateStore(str(tmp_path), {})
    seen = reader.load("urn:m")
    assert len(seen.segments) == 6
    assert writer.compact(writer.load("urn:m"), threshold=1)  # merged, the six removed
    assert len(os.listdir(writer.folder_of("urn:m"))) == 1
    assert reader.count(seen) == 6
    assert sorted(seen.manifest) == [f"/d/{n}" for n in range(6)]
    Path(writer.folder_of("urn:m"), writer.load("urn:m").segments[0].name).unlink()
    fresh = StateStore(str(tmp_path), {})
    with pytest.raises(FileNotFoundError):
        fresh.count(fresh.load("urn:m"))
    # The state folder removed under a reader: an error, never an empty manifest.
    gone = fresh.load("urn:m")
    Path(fresh.url_of("urn:m")).unlink()
    with pytest.raises(FileNotFoundError):
        fresh.count(gone)


@pytest.mark.parametrize("sizes,merged", [
    ([1] * 5, 0),                  # not past the threshold
    ([1] * 6, 6),                  # equal sizes: all of them
    ([40, 1, 1, 1, 1, 1], 5),      # the big old one stays
    ([40, 9, 4, 2, 1, 1], 5),      # similar sizes from the newest up
    ([40, 30, 1, 1, 1, 1], 4),
])
def test_merges_take_the_newest_segments_of_similar_size(sizes: list[int], merged: int) -> None:
    segments = [mf.Segment(f"s{i}", rows, i) for i, rows in enumerate(sizes)]
    assert mf.to_merge(segments, threshold=5) == merged


# ---- a crash inside a state step ---------------------------------------------------

CHILD = """
import sys
from pathlib import Path
from distcp.commit.log import CommitStepStore
from tests.fixtures.commit_scenarios import LocalLayout, local_sequence
lay = LocalLayout(Path(sys.argv[1]))
seq = local_sequence(lay)
store = CommitStepStore(str(lay.state), {})
store.persist(seq, "job1")
seq.run(lay.ctx())
store.remove(seq.id)
"""


def _run_child(root: Path, crash_at: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISTCP_CRASH_AT": crash_at}
    return subprocess.run([sys.executable, "-c", CHILD, str(root)], env=env, cwd=ROOT,
                          capture_output=True, timeout=120, check=False).returncode


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("uninterrupted")
    lay = LocalLayout(root)
    lay.dst.mkdir()
    local_inputs(lay)
    assert _run_child(root, "") == 0
    return snapshot_local(root, DATED)


#: The scenario's segment writes: its own, then the legacy document's (migrated by the
#: same save), then the merge of both; then the switch and the two removals.
CRASHES = ["segment_written:1", "segment_written:2", "segment_written:3",
           "compaction_written:1", "compaction_switched:1", "compaction_removed:1",
           "compaction_removed:2"]


@pytest.mark.parametrize("crash_at", CRASHES)
def test_a_crash_inside_a_manifest_write_then_replay_equals_an_uninterrupted_run(
        tmp_path: Path, crash_at: str, reference: Any) -> None:
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    assert _run_child(tmp_path, crash_at) == 137, "the crash point was not reached"
    summary = Summary()
    assert replay_into(CommitStepStore(str(lay.state), {}), lay.ctx(), 3, summary) == set()
    assert (summary.sequences_replayed, summary.failures) == (1, [])
    assert snapshot_local(tmp_path, DATED) == reference


def test_a_merge_cut_short_loses_nothing_and_the_next_merge_clears_its_files(
        tmp_path: Path) -> None:
    """Killed after writing the merged file, before the document named it: the document
    still lists the old segments (the manifest is whole); the next merge writes the
    same file again and removes everything no longer listed."""
    lay = LocalLayout(tmp_path)
    lay.dst.mkdir()
    local_inputs(lay)
    store = StateStore(str(lay.state), {})
    assert _run_child(tmp_path, "compaction_written:1") == 137
    state = store.load(URN)
    folder = Path(store.folder_of(URN))
    assert len(state.segments) == 3 and len(os.listdir(folder)) == 4  # and the listed one
    whole = dict(state.manifest)
    assert store.compact(state, threshold=1)
    assert sorted(os.listdir(folder)) == [state.segments[0].name]
    assert StateStore(str(lay.state), {}).load(URN).manifest == whole


# ---- the first format ---------------------------------------------------------------

#: A dataset state document exactly as the version before segments wrote it.
OLD_DOCUMENT = """{"applied": ["job0-1a2b3c4d5e-9f8e7d:wm", "job0-1a2b3c4d5e-9f8e7d:run"],
"manifest": {"/data/dst/a.txt": [3, 1700000000.0, "xxh3:0f0e0d0c0b0a0908", "0c1d2e"],
"/data/dst/sub/b.bin": [2048, 1700000100.5, "xxh3:1111111111111111", "9a8b7c"],
"/data/dst/x.tar": [-1, 1700000200.0, "", "77aa88"]},
"runs": [{"bytes": 2051, "ended": 1700000300.0, "file_set": "all", "files": 3,
"job_id": "job0", "started": 1700000290.0, "status": "ok"}],
"urn": "/data/src", "version": 1, "watermark": 1700000200.0}"""


def _old_state(tmp_path: Path) -> StateStore:
    store = StateStore(str(tmp_path), {})
    Path(store.url_of("/data/src")).parent.mkdir(parents=True)
    Path(store.url_of("/data/src")).write_text(OLD_DOCUMENT)
    return store


def test_a_first_format_document_is_read_as_it_is(tmp_path: Path) -> None:
    _old_state(tmp_path)
    state = StateStore(str(tmp_path), {}).load("/data/src")
    assert state.manifest == json.loads(OLD_DOCUMENT)["manifest"]
    assert (state.watermark, state.segments, [r["job_id"] for r in state.runs]) == \
        (1_700_000_200.0, [], ["job0"])
    report = status_report(str(tmp_path), {})
    assert [(d["dataset"], d["files"]) for d in report["datasets"]] == [("/data/src", 3)]
    assert "/data/src: watermark " in render_status(report)
    assert not (tmp_path / "manifests").exists()  # reading changes nothing


def test_a_first_format_document_is_migrated_by_its_first_write(tmp_path: Path) -> None:
    store = _old_state(tmp_path)
    state = store.load("/data/src")
    store.append_segment(state, "job1-x", [("/data/dst/c.txt", 1, 1_700_000_400.0, "xxh3:c",
                                            "g-c")], ["/data/dst/a.txt"])
    state.applied.append("job1-x:mf")
    store.save(state)
    doc = json.loads(Path(store.url_of("/data/src")).read_text())
    assert (doc["version"], "manifest" in doc) == (3, False)
    assert [s["name"] for s in doc["segments"]] == [MIGRATED, "s0000000001-job1-x.parquet"]
    assert (doc["watermark"], doc["runs"][0]["job_id"]) == (1_700_000_200.0, "job0")
    assert doc["applied"][:2] == json.loads(OLD_DOCUMENT)["applied"]
    old = json.loads(OLD_DOCUMENT)["manifest"]
    migrated = mf.from_parquet((Path(store.folder_of("/data/src")) / MIGRATED).read_bytes())
    assert {r["destination"]: [r["size"], r["mtime"], r["digest"], r["guid"]]
            for r in migrated.to_pylist()} == old
    want = {k: v for k, v in old.items() if k != "/data/dst/a.txt"}
    want["/data/dst/c.txt"] = [1, 1_700_000_400.0, "xxh3:c", "g-c"]
    assert StateStore(str(tmp_path), {}).load("/data/src").manifest == want


def test_a_crash_in_the_migration_keeps_the_first_format_document(tmp_path: Path) -> None:
    """Killed after the migrated segment, before the document: the old document is the
    truth still, and the next write migrates it again (the same file, rewritten)."""
    _old_state(tmp_path)
    child = ("import sys\nfrom distcp.state.store import StateStore\n"
             "store = StateStore(sys.argv[1], {})\nstate = store.load('/data/src')\n"
             "state.watermark = 1.0\nstore.save(state)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DISTCP_CRASH_AT": "segment_written:1"}
    done = subprocess.run([sys.executable, "-c", child, str(tmp_path)], env=env, cwd=ROOT,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 137
    store = StateStore(str(tmp_path), {})
    assert Path(store.url_of("/data/src")).read_text() == OLD_DOCUMENT
    state = store.load("/data/src")
    store.save(state)
    again = StateStore(str(tmp_path), {}).load("/data/src")
    assert again.manifest == json.loads(OLD_DOCUMENT)["manifest"]
    assert [s.name for s in again.segments] == [MIGRATED]
    assert os.listdir(store.folder_of("/data/src")) == [MIGRATED]


def test_the_manifest_folder_is_named_after_the_dataset(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), {})
    assert store.folder_of("urn:a") == f"{tmp_path}/manifests/{urn_key('urn:a')}"


# ---- Spark reads the folder --------------------------------------------------------

def _spark_manifest(spark: Any, folder: str) -> dict[str, list[Any]]:
    from distcp.spark.manifest import manifest_frame

    return {r["destination"]: [r["size"], r["mtime"], r["digest"], r["guid"]]
            for r in manifest_frame(spark, folder).collect()}


def test_spark_reads_the_manifest_folder_as_it_is_at_any_instant(
        spark: Any, tmp_path: Path) -> None:
    rng = random.Random(3)
    store = StateStore(str(tmp_path / "state"), {})
    folder = store.folder_of("urn:s")
    assert _spark_manifest(spark, str(tmp_path)) == {}  # nothing published: empty
    for n in range(30):
        state = store.load("urn:s")
        entries = [(f"/d/{rng.randrange(25)}", n, float(n), f"x{n}", f"g{n}")
                   for _ in range(rng.randrange(1, 5))]
        store.append_segment(state, f"q{n}", entries, [f"/d/{rng.randrange(25)}"])
        store.save(state)
        store.compact(state, threshold=4)
    state = store.load("urn:s")
    assert len(state.segments) > 1
    assert _spark_manifest(spark, folder) == state.manifest
    # A crashed write's temporary file and a merge's files not yet removed change nothing.
    Path(folder, "s0000000099-x.parquet.tmp-1234").write_bytes(b"PAR1 cut short")
    store.compact(state, threshold=0)  # merge everything ...
    assert _spark_manifest(spark, folder) == state.manifest
    # ... and once merged into one file, a plain read of the folder is the manifest.
    plain = spark.read.parquet(folder).collect()
    assert not any(r["deleted"] for r in plain)
    assert {r["destination"]: [r["size"], r["mtime"], r["digest"], r["guid"]]
            for r in plain} == state.manifest
    assert len(plain) == len(state.manifest)


def test_sizes_under_a_root_resolve_as_the_manifest_does(tmp_path: Path) -> None:
    """``--incremental``'s rows (path below the root -> size, source mtime): a later row
    replaces an earlier one, a tombstone removes it, merged or not; what lies outside
    the root is left out; and they equal the manifest's own resolution."""
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:s")
    publishes = [[("/d/a", 1, 1.0), ("/d/b", 2, 2.0), ("/other/x", 9, 9.0)],
                 [("/d/a", 10, 10.5), ("/d/sub/c", 3, 3.0)], [], [("/d/b", 20, 20.0)]]
    removed = [[], [], ["/d/b"], []]
    for n, (rows, gone) in enumerate(zip(publishes, removed)):
        store.append_segment(state, f"seq{n}", [(d, s, m, "x", "g") for d, s, m in rows], gone)
        store.save(state)
    want = {"a": (10, 10.5), "b": (20, 20.0), "sub/c": (3, 3.0)}
    assert store.sizes_of(store.load("urn:s"), "/d") == want
    store.save(state)
    store.append_segment(state, "seq9", [], ["/d/sub/c"])
    store.save(state)
    del want["sub/c"]
    assert store.sizes_of(store.load("urn:s"), "/d/") == want
    manifest = store.load("urn:s").manifest
    assert want == {d[3:]: (v[0], v[1]) for d, v in manifest.items() if d.startswith("/d/")}
    # a document listing them out of order: sorted (a store of its own: ``load`` keeps
    # the state read above, whose manifest is resolved already)
    shuffled = StateStore(str(tmp_path), {}).load("urn:s")
    shuffled.segments.reverse()
    assert store.sizes_of(shuffled, "/d") == want
    assert store.compact(store.load("urn:s"), threshold=1)  # merged: the same rows
    assert store.sizes_of(store.load("urn:s"), "/d") == want


@pytest.mark.parametrize("odd", ["", "caf\u00e9", "bad\udce9"])
def test_sizes_without_tombstones_resolve_as_the_manifest_does(tmp_path: Path, odd: str) -> None:
    """The rows of a folder without tombstones (read in Arrow, not row by row) equal
    the manifest's resolution: the last row of a path wins, other roots are left out, a
    name with undecodable bytes comes back as the engine names it, in order or not."""
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:s")
    root = f"/d{odd}"
    publishes = [[(f"{root}/a", 1, 1.0), (f"{root}/b{odd}", 2, 2.0), ("/other/x", 9, 9.0),
                  (f"{root}x/y", 8, 8.0)],
                 [(f"{root}/a", 10, 10.5), (f"{root}/sub/c", 3, 3.0)]]
    for n, rows in enumerate(publishes):
        store.append_segment(state, f"seq{n}", [(d, s, m, "x", "g") for d, s, m in rows], [])
        store.save(state)
    want = {"a": (10, 10.5), f"b{odd}": (2, 2.0), "sub/c": (3, 3.0)}
    fresh = StateStore(str(tmp_path), {})
    assert fresh.sizes_of(fresh.load("urn:s"), root) == want
    manifest = StateStore(str(tmp_path), {}).load("urn:s").manifest
    cut = len(root) + 1
    assert want == {d[cut:]: (v[0], v[1]) for d, v in manifest.items()
                    if d.startswith(root + "/")}
    shuffled = StateStore(str(tmp_path), {}).load("urn:s")
    shuffled.segments.reverse()
    assert store.sizes_of(shuffled, root) == want


def test_sizes_are_kept_until_the_segments_change(tmp_path: Path) -> None:
    """``--incremental``'s rows are read from the segments once and kept: read again
    they come from ``sizes/<key>.bin`` (the segments themselves are not read); a
    publish (new segments) makes the kept file stale, and a damaged one, or one made
    for another root, is ignored and rewritten."""
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:s")
    store.append_segment(state, "seq0", [("/d/a", 1, 1.5, "x", "g"), ("/d/b\udce9", 2, 2.5,
                                                                        "x", "g")], [])
    store.save(state)
    want = {"a": (1, 1.5), "b\udce9": (2, 2.5)}
    assert store.sizes_of(store.load("urn:s"), "/d") == want
    kept = Path(StateLayout(str(tmp_path)).sizes(urn_key("urn:s")))
    assert kept.is_file()
    segments = list((tmp_path / "manifests").rglob("*.parquet"))
    saved = {p: p.read_bytes() for p in segments}
    for p in segments:
        p.write_bytes(b"not parquet")  # a read of the segments would fail now
    assert StateStore(str(tmp_path), {}).sizes_of(store.load("urn:s"), "/d") == want
    for p, data in saved.items():
        p.write_bytes(data)
    store.append_segment(state, "seq1", [("/d/c", 3, 3.5, "x", "g")], ["/d/a"])
    store.save(state)
    want = {"b\udce9": (2, 2.5), "c": (3, 3.5)}
    assert StateStore(str(tmp_path), {}).sizes_of(store.load("urn:s"), "/d") == want
    assert StateStore(str(tmp_path), {}).sizes_of(store.load("urn:s"), "/") == {
        f"d/{k}": v for k, v in want.items()}  # another root: read again, kept for it
    kept.write_bytes(kept.read_bytes()[:-3])  # cut short
    assert StateStore(str(tmp_path), {}).sizes_of(store.load("urn:s"), "/d") == want
    assert sizes.unpack(kept.read_bytes(), [s.name for s in state.segments], "/d/") == want


def test_sizes_that_cannot_be_kept_are_read_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The kept sizes are only a cache: a state folder where they cannot be written (a
    file where their folder goes) or read (a folder where their file goes) still plans,
    from the segments, and says so in one line naming the file (an unreadable one is not
    written again)."""
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:s")
    store.append_segment(state, "seq0", [("/d/a", 1, 1.5, "x", "g")], [])
    store.save(state)
    layout = StateLayout(str(tmp_path))
    Path(layout.sizes()).write_bytes(b"in the way")  # the folder cannot be made
    with caplog.at_level(logging.WARNING, "pydistcp.state"):
        assert StateStore(str(tmp_path), {}).sizes_of(store.load("urn:s"), "/d") == {
            "a": (1, 1.5)}
    [line] = [r.getMessage() for r in caplog.records]
    assert "cannot keep the manifest sizes in" in line and "\n" not in line
    assert Path(layout.sizes()).read_bytes() == b"in the way"
    Path(layout.sizes()).unlink()
    Path(layout.sizes(urn_key("urn:s"))).mkdir(parents=True)  # the file cannot be read
    caplog.clear()
    with caplog.at_level(logging.WARNING, "pydistcp.state"):
        assert StateStore(str(tmp_path), {}).sizes_of(store.load("urn:s"), "/d") == {
            "a": (1, 1.5)}
    [line] = [r.getMessage() for r in caplog.records]
    assert "cannot read the kept manifest sizes" in line and urn_key("urn:s") in line
    assert Path(layout.sizes(urn_key("urn:s"))).is_dir()
