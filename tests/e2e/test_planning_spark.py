"""Planning as a Spark join gives exactly the driver's plan (issue 11, point 2).

The same literal trees planned both ways on the real local Spark session (and the real
moto S3 server): the driver's planner over its walk, and ``JoinPlanner`` joining both
listings on Spark with every decision kept. Same files to copy with the same reasons,
same skips, deletions, directories and entries not copied; the same refusal of a file
where a directory is. A CLI run proves the driver collects the directories, not the
files, of an up-to-date tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.configuration import CopyConfiguration
from distcp.copying import copyrows
from distcp.errors import PlanningError
from distcp.planning import treeplans
from distcp.planning.listing import Planned, plan_all
from distcp.planning.plan import skips_same
from distcp.planning.treeplans import DriverPairs
from distcp.spark.listing import Lister
from distcp.spark.planning import JoinPlanner
from distcp.state.store import StateStore, urn_key
from tests.conftest import cli_env
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

OLD, NEW = 1_600_000_000, 1_700_000_000


def _file(path: Path, data: str, mtime: int = OLD) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)
    os.utime(path, (mtime, mtime))


def trees(base: Path) -> tuple[Path, Path]:
    """A source and a destination that differ in every way a decision can see."""
    src, dst = base / "src", base / "dst"
    for rel, data in {"new.txt": "n", "same.txt": "same", "size.txt": "longer",
                      "older.txt": "o", "sub/deep/x.txt": "x", "é/名前.txt": "u",
                      "newer.txt": "w"}.items():
        _file(src / rel, data, NEW if rel == "older.txt" else OLD)
    (src / "empty").mkdir()
    (src / "lsame").symlink_to("same.txt")
    (src / "ldiff").symlink_to("new.txt")
    (src / "dang").symlink_to("nowhere")
    for rel, data in {"same.txt": "same", "size.txt": "short", "older.txt": "o",
                      "sub/deep/x.txt": "x", "newer.txt": "w", "extra.txt": "e",
                      "gone/deeper/y.txt": "y"}.items():
        _file(dst / rel, data, NEW if rel == "newer.txt" else OLD)
    (dst / "lsame").symlink_to("same.txt")
    (dst / "ldiff").symlink_to("size.txt")
    return src, dst


def both(spark: Any, cfg: CopyConfiguration, target: int = 3) -> tuple[Planned, Planned]:
    """The driver's plan and the joined plan (every decision kept) of one run."""
    lister = Lister("spark", lambda: spark, target=target, page=2)
    driver = plan_all(cfg, lambda _m: None)
    joined = plan_all(cfg, lambda _m: None, lister=lister,
                      joined=JoinPlanner(lister, keep_skips=True))
    return driver, joined


def assert_same(driver: Planned, joined: Planned) -> None:
    for d, j in zip(driver.plan.datasets, joined.plan.datasets, strict=True):
        assert j.copy == d.copy
        assert j.skip == d.skip
        assert j.delete == d.delete
        assert j.directories == d.directories
        assert j.files_skipped == d.files_skipped
    assert sorted(map(repr, joined.skipped)) == sorted(map(repr, driver.skipped))
    assert joined.skipped == driver.skipped
    assert joined.rows_collected > 0 and driver.rows_collected == 0


@pytest.mark.parametrize("settings", [
    {}, {"overwrite": True}, {"delete": True}, {"compare": "size-only"},
    {"compare": "checksum"}, {"compare": "ignore-existing"}, {"preserve": ""},
    {"links": "copy", "delete": True}, {"links": "skip"}, {"links": "follow"}])
def test_joined_plan_is_the_driver_plan(spark: Any, tmp_path: Path,
                                        settings: dict[str, Any]) -> None:
    src, dst = trees(tmp_path)
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst), **settings)
    driver, joined = both(spark, cfg)
    assert_same(driver, joined)
    plan = driver.plan.datasets[0]
    assert {a.file.destination.rsplit("/", 1)[-1] for a in plan.copy} >= {"new.txt", "名前.txt"}
    if settings.get("delete"):
        gone = [u.rsplit("/dst/", 1)[1] for u in plan.delete]
        assert gone[:2] == ["gone/deeper/y.txt", "gone/deeper"]
        assert {"extra.txt", "gone"} <= set(gone)


@pytest.mark.parametrize("settings", [
    {}, {"overwrite": True}, {"delete": True}, {"compare": "size-only"},
    {"compare": "checksum"}, {"compare": "ignore-existing"}, {"preserve": ""},
    {"links": "copy"}])
def test_skips_counted_on_the_walks_stats_are_the_driver_plans(
        spark: Any, tmp_path: Path, settings: dict[str, Any]) -> None:
    """Skips not kept: a paired walk skips a file identical to its target on the stats
    alone (``plan.skips_same``); the plan is still the driver's, file for file."""
    src, dst = trees(tmp_path)
    for n in range(30):  # identical files below the cut, where the walks pair them
        for root in (src, dst):
            _file(root / "sub" / f"n{n}.txt", "z" * n)
    _file(dst / "sub" / "n3.txt", "zzz", NEW)  # same size, mtime differs
    _file(dst / "sub" / "n4.txt", "zzzzz")  # size differs
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst), **settings)
    lister = Lister("spark", lambda: spark, target=3, page=2)
    driver = plan_all(cfg, lambda _m: None)
    joined = plan_all(cfg, lambda _m: None, lister=lister, joined=JoinPlanner(lister))
    d, j = driver.plan.datasets[0], joined.plan.datasets[0]
    assert j.copy == d.copy and j.delete == d.delete and j.directories == d.directories
    assert j.files_skipped == d.files_skipped and j.skip == ()
    copied = {a.file.destination.rsplit("/", 1)[-1] for a in d.copy}
    if settings.get("overwrite") or settings.get("compare") == "checksum":
        assert {f"n{n}.txt" for n in range(30)} <= copied
    elif settings.get("compare") not in ("size-only", "ignore-existing"):
        assert "n4.txt" in copied and "n5.txt" not in copied and d.files_skipped >= 28
        # a newer target of the same size: a preserved mtime differs, else it is kept
        assert ("n3.txt" in copied) is ("preserve" not in settings)


@pytest.mark.parametrize("keep_skips", [True, False])
@pytest.mark.parametrize("settings", [
    {}, {"overwrite": True}, {"delete": True}, {"compare": "size-only"},
    {"compare": "checksum"}, {"compare": "ignore-existing"}, {"preserve": ""},
    {"links": "copy", "delete": True}, {"links": "skip"}, {"links": "follow"}])
def test_the_drivers_paired_walks_plan_as_its_walk(
        tmp_path: Path, settings: dict[str, Any], keep_skips: bool) -> None:
    """``--listing driver``: two local trees walked side by side in this process
    (``DriverPairs``, no Spark) give the plan of the walk of each tree, file for file."""
    src, dst = trees(tmp_path)
    for n in range(12):  # a wider top: the walks start below it
        _file(src / f"d{n}" / "f.txt", "f" * n)
        _file(dst / f"d{n}" / "f.txt", "f" * n, OLD if n % 3 else NEW)
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst), **settings)
    walked = plan_all(cfg, lambda _m: None)
    paired = plan_all(cfg, lambda _m: None, joined=DriverPairs(keep_skips))
    d, p = walked.plan.datasets[0], paired.plan.datasets[0]
    assert p.copy == d.copy and p.delete == d.delete and p.directories == d.directories
    assert p.files_skipped == d.files_skipped
    assert (d.files_skipped > 0) is skips_same(cfg.overwrite, cfg.compare)
    assert p.skip == (d.skip if keep_skips else ())
    assert paired.skipped == walked.skipped
    assert paired.rows_collected == walked.rows_collected == 0


@pytest.mark.parametrize("keep_skips", [True, False])
@pytest.mark.parametrize("settings", [
    {}, {"overwrite": True}, {"compare": "size-only"}, {"compare": "checksum"},
    {"compare": "ignore-existing"}, {"preserve": ""}, {"links": "copy"}])
def test_incremental_paired_with_the_manifest_plans_as_the_manifest_listing(
        tmp_path: Path, settings: dict[str, Any], keep_skips: bool) -> None:
    """``--incremental``: the source walked alone, each entry paired with the manifest's
    row (``DriverPairs`` with the state), gives the plan of the driver's planner over
    the manifest listing, file for file; the destination is listed by neither, so a
    change made there behind pydistcp's back is seen by neither."""
    src, dst = trees(tmp_path)
    for n in range(12):  # a wider top: the walks start below it
        _file(src / f"d{n}" / "f.txt", "f" * n)
    shutil.rmtree(dst)
    first = distcp.copy(str(src), str(dst), links=settings.get("links", "skip"),
                        progress=False)
    assert first.ok and first.files_copied >= 19
    _file(src / "size.txt", "longer still")  # each way a source can change
    _file(src / "older.txt", "o", NEW + 1)
    _file(src / "d3" / "f.txt", "fff", NEW)
    _file(src / "brand" / "new.txt", "new")
    _file(dst / "same.txt", "changed behind its back")  # unseen without a listing
    (dst / "d5" / "f.txt").unlink()
    (dst / "sub" / "deep" / "x.txt").chmod(0o600)  # a mode alone: no decision sees it
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst), incremental=True,
                            **settings)
    store = StateStore(str(dst / ".pydistcp"), {})
    listed = plan_all(cfg, lambda _m: None, state=store)
    paired = plan_all(cfg, lambda _m: None, state=store,
                      joined=DriverPairs(keep_skips, state=store))
    d, p = listed.plan.datasets[0], paired.plan.datasets[0]
    assert paired.strategies[0][1].why.startswith("--incremental")
    assert p.copy == d.copy and p.directories == d.directories and p.delete == d.delete == ()
    assert p.files_skipped == d.files_skipped
    assert p.skip == (d.skip if keep_skips else ())
    assert paired.skipped == listed.skipped
    assert paired.destination_listings == listed.destination_listings == 0
    copied = {Path(a.file.destination).relative_to(dst).as_posix() for a in p.copy}
    if settings.get("overwrite") or settings.get("compare") == "checksum":
        return  # every file, or every file of the same size (its contents to compare)
    assert "same.txt" not in copied and "d5/f.txt" not in copied  # the manifest's word
    assert "brand/new.txt" in copied
    if settings.get("compare") != "ignore-existing":
        assert "size.txt" in copied


@pytest.mark.parametrize("held", [0, 3, 100])
def test_the_drivers_paired_walks_write_past_held_files_to_copy_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: int) -> None:
    """Past ``HELD`` files to copy the driver keeps none: they are in a copy-rows file,
    a chunk at a time, and read back they are the files it would have held, in order."""
    src, dst = trees(tmp_path)
    for n in range(12):
        _file(src / f"d{n}" / "f.txt", "f" * n)
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst))
    walked = plan_all(cfg, lambda _m: None).plan.datasets[0]
    monkeypatch.setattr(treeplans, "HELD", held)
    monkeypatch.setattr(copyrows, "CHUNK", 5)
    folder = tmp_path / "plan"
    paired = plan_all(cfg, lambda _m: None, joined=DriverPairs(copies_to=str(folder)))
    p = paired.plan.datasets[0]
    assert (p.delete, p.directories, p.files_skipped) == (
        walked.delete, walked.directories, walked.files_skipped)
    wanted = [a.file for a in walked.copy]
    if len(wanted) <= held:  # few enough: held as the collected path holds them
        assert (p.copy, p.kept) == (walked.copy, ())
        assert not folder.exists()
        return
    [rows] = p.kept
    assert p.copy == () and rows.url == f"{folder}/{urn_key(p.urn)[:16]}/driver.parquet"
    assert [n for n, _ in rows.chunks] == [5] * (len(wanted) // 5) + (
        [len(wanted) % 5] if len(wanted) % 5 else [])
    assert (p.files_kept, p.bytes_to_copy) == (
        len(wanted), sum(f.origin.size for f in wanted))
    read = [f for chunk in copyrows.chunks_of(p.kept)
            for f in copyrows.read_chunk(chunk, {})]
    assert sorted(read, key=lambda f: f.destination) == sorted(
        wanted, key=lambda f: f.destination)


def test_the_drivers_paired_walks_refuse_a_file_where_a_directory_is(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _file(src / "a" / "b" / "x", "x")
    _file(dst / "a" / "b", "a file")
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst))
    with pytest.raises(PlanningError) as walked:
        plan_all(cfg, lambda _m: None)
    with pytest.raises(PlanningError) as paired:
        plan_all(cfg, lambda _m: None, joined=DriverPairs())
    assert str(paired.value) == str(walked.value)


def test_an_empty_destination_plans_every_file_both_ways(spark: Any, tmp_path: Path) -> None:
    src, _ = trees(tmp_path)
    cfg = CopyConfiguration(sources=(str(src),), destination=str(tmp_path / "none"),
                            links="copy")
    driver, joined = both(spark, cfg, target=1)
    assert_same(driver, joined)
    assert len(joined.plan.datasets[0].copy) >= 7


@pytest.mark.parametrize(("src_rel", "dst_kind", "message"), [
    ("sub", "file", "cannot replace file {dst}/sub with directory {src}/sub"),
    ("same.txt", "dir", "cannot replace directory {dst}/same.txt with file {src}/same.txt"),
])
def test_a_file_where_a_directory_is_refused_both_ways(spark: Any, tmp_path: Path,
                                                       src_rel: str, dst_kind: str,
                                                       message: str) -> None:
    src, dst = trees(tmp_path)
    there = dst / src_rel
    shutil.rmtree(there) if there.is_dir() else there.unlink()
    if dst_kind == "file":
        there.write_text("a file")
    else:
        (there / "inside").mkdir(parents=True)
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst))
    errors = []
    for joined in (False, True):
        lister = Lister("spark", lambda: spark, target=3)
        with pytest.raises(PlanningError) as caught:
            plan_all(cfg, lambda _m: None, lister=lister if joined else None,
                     joined=JoinPlanner(lister) if joined else None)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] == message.format(src=src, dst=dst)


def test_an_s3_source_plans_the_same_on_spark(spark: Any, s3: S3Server,  # noqa: F811
                                              tmp_path: Path) -> None:
    client = s3.client()
    for n in range(30):
        client.put_object(Bucket="src", Key=f"p/d{n % 4}/f{n:02d}", Body=b"x" * n)
    dst = tmp_path / "dst"
    for n in range(0, 30, 3):  # a third there already, same size; one of the wrong size
        _file(dst / f"d{n % 4}" / f"f{n:02d}", "x" * (n + (n == 9)), NEW)
    _file(dst / "stale", "s")
    cfg = CopyConfiguration(sources=("s3://src/p",), destination=str(dst), delete=True,
                            compare="size-only", src_options=s3.options)
    driver, joined = both(spark, cfg)
    assert_same(driver, joined)
    plan = joined.plan.datasets[0]
    assert (len(plan.copy), plan.files_skipped) == (21, 9)
    assert plan.delete == (str(dst / "stale"),)


def test_skips_are_counted_not_collected(spark: Any, tmp_path: Path) -> None:
    src, dst = trees(tmp_path)
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst))
    lister = Lister("spark", lambda: spark, target=3)
    counted = plan_all(cfg, lambda _m: None, lister=lister, joined=JoinPlanner(lister))
    plan = counted.plan.datasets[0]
    driver = plan_all(cfg, lambda _m: None).plan.datasets[0]
    assert plan.skip == () and plan.files_skipped == driver.files_skipped > 0
    assert plan.copy == driver.copy


def contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def _copy(src: Path, dst: Path, *args: str) -> dict[str, Any]:
    out = dst.parent / "summary.json"
    r = subprocess.run([sys.executable, "-m", "distcp", "copy", str(src), str(dst),
                        "--no-progress", "--listing", "spark", "--summary-json", str(out),
                        *args], check=False, capture_output=True, text=True, env=cli_env(),
                       timeout=600, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    summary: dict[str, Any] = json.loads(out.read_text())
    return summary


def test_an_up_to_date_tree_costs_the_driver_its_directories_not_its_files(
        tmp_path: Path) -> None:
    """20,000 files in 200 directories already at the destination: the plan on Spark
    sends the driver one row per directory and per task, none per file; a rerun after
    changes (one file rewritten, one added, one removed, --delete) mirrors the source."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    for d in range(200):
        folder = src / f"d{d:03d}"
        folder.mkdir(parents=True)
        for n in range(100):
            (folder / f"f{n:02d}").write_bytes(b"%d" % n)
    shutil.copytree(src, dst, copy_function=shutil.copy2)
    quiet = _copy(src, dst)
    assert (quiet["files_copied"], quiet["files_skipped"]) == (0, 20_000)
    assert 201 <= quiet["plan_rows_collected"] <= 201 + 64
    (src / "d007" / "f03").write_bytes(b"changed")
    (src / "d199" / "new").write_bytes(b"new")
    (src / "d100" / "f50").unlink()
    changed = _copy(src, dst, "--delete")
    assert (changed["files_copied"], changed["files_deleted"]) == (2, 1)
    assert changed["files_skipped"] == 19_998
    assert changed["plan_rows_collected"] <= 201 + 64 + 3
    assert contents(dst) == contents(src)
    assert (dst / "d007" / "f03").read_bytes() == b"changed"
    assert not (dst / "d100" / "f50").exists()




@pytest.mark.parametrize("given", [None, "7"])
def test_the_join_shuffles_into_two_partitions_per_core_then_puts_the_setting_back(
        spark: Any, s3: S3Server, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, given: str | None) -> None:
    """An S3 side is planned by the join: Spark's default of 200 shuffle partitions cost
    more than the join itself; a value the user gave (``--conf``) is left as it is."""
    from distcp.spark import planning
    from distcp.spark.session import default_parallelism

    key = planning.SHUFFLE_PARTITIONS
    before = spark.conf.get(key)
    seen: list[str] = []
    joined = planning._joined

    def recording(*args: Any) -> Any:
        seen.append(spark.conf.get(key))
        return joined(*args)

    monkeypatch.setattr(planning, "_joined", recording)
    client = s3.client()
    for n in range(6):
        client.put_object(Bucket="src", Key=f"j/d{n % 2}/f{n}", Body=b"x" * n)
    _file(tmp_path / "dst" / "d0" / "f0", "")
    cfg = CopyConfiguration(sources=("s3://src/j",), destination=str(tmp_path / "dst"),
                            compare="size-only", src_options=s3.options,
                            spark_conf=() if given is None else ((key, given),))
    assert_same(*both(spark, cfg))
    assert seen == [str(2 * default_parallelism(spark)) if given is None else before]
    assert spark.conf.get(key) == before


@pytest.mark.parametrize("target", [1, 2, 8])
@pytest.mark.parametrize("settings", [{"delete": True}, {"links": "copy", "delete": True}])
def test_two_local_trees_are_planned_by_walking_both_side_by_side(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: int,
        settings: dict[str, Any]) -> None:
    """Local trees: no join (``distcp.planning.paired``); whatever the cut between the
    driver's top and the tasks' subtrees, the plan is the driver's."""
    from distcp.spark import planning

    def no_join(*_args: Any) -> Any:
        raise AssertionError("two local trees were joined")

    monkeypatch.setattr(planning, "_joined", no_join)
    src, dst = trees(tmp_path)
    _file(dst / "gone" / "x" / "z.txt", "z")  # a subtree only the target has, deeper
    _file(src / "sub" / "deep" / "more" / "m.txt", "m")
    cfg = CopyConfiguration(sources=(str(src),), destination=str(dst), **settings)
    driver, joined = both(spark, cfg, target=target)
    assert_same(driver, joined)
    gone = {u.rsplit("/dst/", 1)[1] for u in joined.plan.datasets[0].delete}
    assert {"gone/x/z.txt", "gone/x", "gone/deeper/y.txt", "extra.txt"} <= gone
