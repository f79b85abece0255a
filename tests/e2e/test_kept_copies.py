"""A thin coordinator: a plain copy planned on Spark keeps its files on the executors.

With ``--listing spark`` the files to copy stay in the planning tasks' copy-rows files,
copy tasks read them by chunk and keep their results in files of their own, and the
publish reads those (``distcp.spark.keptcopy``). The proof is what reaches the
driver: a few rows per task and directory, no per-file result; and that every outcome
(bytes, modes, mtimes, manifest, failures, crashes and reruns) is the collected path's.
Real local Spark, shared by the tests; a killed driver is a real process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.callbacks import Callback
from distcp.commit.log import CommitStepStore
from distcp.planning import treeplans
from distcp.run import branch, choice
from distcp.spark import listing, publish
from distcp.state.store import StateStore
from tests.conftest import run_cli, tree
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def _source(root: Path, dirs: int, per_dir: int) -> None:
    for d in range(dirs):
        folder = root / f"d{d:03}"
        folder.mkdir(parents=True)
        for n in range(per_dir):
            (folder / f"f{n:03}").write_bytes(b"%d/%d\n" % (d, n))
    (root / "empty").mkdir()


def _manifest_count(dst: Path) -> int:
    store = StateStore(str(dst / ".pydistcp"), {})
    [state] = store.all()
    return store.count(state)


def _pending(dst: Path) -> list[Any]:
    return CommitStepStore(str(dst / ".pydistcp"), {}).pending()


@pytest.mark.parametrize("listing", ["spark", "driver"])
def test_twenty_thousand_files_reach_the_driver_as_a_few_rows(
        spark: Any, tmp_path: Path, listing: str) -> None:
    """Planned on Spark, or by the driver's walk (the default for a tree this size),
    which then holds a chunk of files to copy at a time and sends them to the copy
    tasks in files."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 200, 100)
    s = distcp.copy(str(src), str(dst), listing=listing, progress=False)
    assert s.ok, s.failures
    assert (s.files_copied, s.directories_created) == (20_000, 202)
    assert s.results_collected == 0  # no per-file result came back
    # a row per directory, a few per task; none from the driver's own walk
    assert s.plan_rows_collected <= (202 + 64 if listing == "spark" else 0)
    assert tree(dst) == tree(src)  # bytes, modes and mtimes
    assert _manifest_count(dst) == 20_000
    assert _pending(dst) == [] and not list((dst / ".pydistcp" / "staging").iterdir())

    again = distcp.copy(str(src), str(dst), listing=listing, progress=False)
    assert (again.files_copied, again.files_skipped, again.ok) == (0, 20_000, True)


class _RemoveOnStart(Callback):
    """Deletes a source file when the copy phase starts: listed, then gone."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def set_size(self, files: int, nbytes: int) -> None:
        self.path.unlink(missing_ok=True)


@pytest.mark.parametrize("listing", ["spark", "driver", "driver-kept"])
def test_a_file_gone_before_its_copy_fails_alone_and_the_rest_is_published(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listing: str) -> None:
    """Both paths give the same outcome: the file is named, the others are published,
    and the set's deletions wait for a run where it is complete. ``driver-kept``: the
    driver's walk with more files to copy than it holds keeps them on the executors."""
    if listing == "driver-kept":
        monkeypatch.setattr(treeplans, "HELD", 4)
        listing = "driver"
    kept = listing == "spark" or treeplans.HELD < 15
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 3, 5)
    (dst / "extra").mkdir(parents=True)
    (dst / "extra" / "x").write_bytes(b"not in the source\n")
    gone = src / "d001" / "f002"
    s = distcp.copy(str(src), str(dst), listing=listing, delete=True, progress=False,
                    callback=_RemoveOnStart(gone))
    assert (s.files_copied, s.files_failed, s.files_deleted) == (14, 1, 0)
    assert (s.results_collected == 0) == kept
    [failure] = s.failures
    assert (failure.path, failure.error) == (str(gone), f"source vanished since listing: {gone}")
    want = {k: v for k, v in tree(src).items() if k != "d001"}  # its mtime: the removal's
    assert {k: v for k, v in tree(dst).items() if k != "d001" and "extra" not in k} == want
    assert (dst / "extra" / "x").exists()
    assert _manifest_count(dst) == 14

    again = distcp.copy(str(src), str(dst), listing=listing, delete=True, progress=False)
    assert again.ok and (again.files_copied, again.files_deleted) == (0, 2)
    assert tree(dst) == tree(src)


def _kept_listing(listing: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``driver-kept``: ``--listing driver`` with ``HELD`` lowered, so a small
    copy takes the thin path from the driver's own plan."""
    if listing == "driver-kept":
        monkeypatch.setattr(treeplans, "HELD", 4)
        return "driver"
    return listing


@pytest.mark.parametrize("listing", ["spark", "driver-kept"])
def test_a_copy_task_killed_fails_the_files_and_the_rerun_copies_them(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listing: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 4, 10)
    listing = _kept_listing(listing, monkeypatch)
    with monkeypatch.context() as m:  # the copy tasks' worker dies after 3 staged files
        m.setattr(branch, "task_environment", lambda: {"DISTCP_CRASH_AT": "after_stage:3"})
        s = distcp.copy(str(src), str(dst), listing=listing, progress=False)
    assert (s.files_copied, s.files_failed, s.results_collected) == (0, 40, 0)
    assert "Spark job failed" in s.failures[0].error
    assert not [p for p in dst.rglob("f*") if ".pydistcp" not in p.parts]  # none published
    again = distcp.copy(str(src), str(dst), listing=listing, progress=False)
    assert again.ok and again.files_copied == 40
    assert tree(dst) == tree(src)


@pytest.mark.parametrize("listing", ["spark", "driver-kept"])
def test_a_publishing_task_killed_mid_rename_is_finished_by_the_rerun(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listing: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 4, 10)
    listing = _kept_listing(listing, monkeypatch)
    with monkeypatch.context() as m:  # one piece per results file; its worker dies
        m.setattr(publish, "task_environment", lambda: {"DISTCP_CRASH_AT": "mid_publish:3"})
        s = distcp.copy(str(src), str(dst), listing=listing, publishing="spark",
                        progress=False)
    assert not s.ok and "the tasks carrying out publish-listed of 40 file(s) failed" in \
        s.failures[0].error
    assert len(_pending(dst)) == 1  # a sequence naming the results files, kept with them
    again = distcp.copy(str(src), str(dst), listing=listing, publishing="spark",
                        progress=False)
    assert again.ok, again.failures
    assert (again.sequences_replayed, again.files_recovered, again.files_copied) == (1, 40, 0)
    assert tree(dst) == tree(src)
    assert _manifest_count(dst) == 40 and _pending(dst) == []


@pytest.mark.parametrize(("listing", "dirs"), [("spark", 3), ("driver", 11)])
def test_a_driver_killed_mid_publish_is_finished_by_the_rerun(
        tmp_path: Path, listing: str, dirs: int) -> None:
    """``driver``: 1,100 files, past ``HELD``, so the driver's planned copy is kept too
    (``--copying spark``: a cold run would copy that many here, collected)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    per_dir = 20 if listing == "spark" else 100
    _source(src, dirs, per_dir)
    files = dirs * per_dir
    args = ("copy", str(src), str(dst), "--listing", listing, "--no-progress",
            "--master", "local[2]", "--copying", "spark",
            "--summary-json", str(tmp_path / "s.json"))
    killed = run_cli(*args, env={"DISTCP_CRASH_AT": "mid_publish:25"})
    assert killed.returncode == 137, killed.stderr
    published = [p for p in dst.rglob("f*") if ".pydistcp" not in p.parts]
    assert 25 <= len(published) < files and len(_pending(dst)) == 1
    [pending] = _pending(dst)  # the sequence names results files: no entry per file
    assert "publish-listed" in Path(pending.url).read_text()
    rerun = run_cli(*args)
    assert rerun.returncode == 0, rerun.stderr
    assert "copied 0 files" in rerun.stdout
    assert json.loads((tmp_path / "s.json").read_text())["files_recovered"] == files
    assert tree(dst) == tree(src)
    assert _manifest_count(dst) == files and _pending(dst) == []
    assert not os.listdir(dst / ".pydistcp" / "staging")


@pytest.mark.parametrize("listing", ["spark", "driver"])
def test_links_copied_as_links_land_the_same_on_both_paths(spark: Any, tmp_path: Path,
                                                          listing: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 2, 3)
    os.symlink("f001", src / "d000" / "to-f001")  # relative: stays relative
    s = distcp.copy(str(src), str(dst), listing=listing, links="copy", progress=False)
    assert s.ok, s.failures
    assert (s.files_copied, s.links_copied) == (7, 1)
    assert (s.results_collected == 0) == (listing == "spark")
    assert os.readlink(dst / "d000" / "to-f001") == "f001"
    assert tree(dst) == tree(src)


def _objects(server: S3Server) -> dict[str, bytes]:
    return {k.removeprefix("t/"): v for k, v in server.objects("dst", "t/").items()
            if not k.startswith("t/.pydistcp/")}


def _files(src: Path) -> dict[str, bytes]:
    return {p.relative_to(src).as_posix(): p.read_bytes() for p in src.rglob("*")
            if p.is_file()}


def _s3_pending(server: S3Server) -> list[Any]:
    return CommitStepStore("s3://dst/t/.pydistcp", server.options).pending()


def test_staged_uploads_on_s3_are_completed_from_the_results_files(
        spark: Any, tmp_path: Path, s3: S3Server) -> None:  # noqa: F811
    """An object store destination takes the thin path too: each task's results file
    carries its uploads' parts, and the publish completes them (an empty file: one PUT)."""
    src = tmp_path / "src"
    _source(src, 3, 10)
    (src / "d000" / "empty").write_bytes(b"")
    s = distcp.copy(str(src), "s3://dst/t", dst_options=s3.options, listing="spark",
                    progress=False)
    assert s.ok, s.failures
    assert (s.files_copied, s.results_collected) == (31, 0)
    assert _objects(s3) == _files(src)
    assert s3.pending_uploads() == [] and _s3_pending(s3) == []
    store = StateStore("s3://dst/t/.pydistcp", s3.options)
    [state] = store.all()
    assert store.count(state) == 31
    again = distcp.copy(str(src), "s3://dst/t", dst_options=s3.options, listing="spark",
                        progress=False)
    assert (again.files_copied, again.files_skipped, again.ok) == (0, 31, True)


def test_a_publishing_task_killed_mid_complete_on_s3_is_finished_by_the_rerun(
        spark: Any, tmp_path: Path, s3: S3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The uploads a pending listed sequence will complete are named only in its results
    files: the run's orphan sweep must leave them for the rerun to complete. Four tasks
    (one results file, a piece of the publish, each): a piece of six files is killed
    at its second while later ones are still to be completed."""
    src = tmp_path / "src"
    _source(src, 3, 8)
    with monkeypatch.context() as m:
        m.setattr(publish, "task_environment", lambda: {"DISTCP_CRASH_AT": "mid_publish:2"})
        s = distcp.copy(str(src), "s3://dst/t", dst_options=s3.options, listing="spark",
                        publishing="spark", progress=False, tasks=4)
    assert not s.ok and "publish-listed of 24 file(s) failed" in s.failures[0].error
    seen, files = _objects(s3), _files(src)
    assert 2 <= len(seen) < len(files) and all(files[k] == v for k, v in seen.items())
    assert len(s3.pending_uploads()) == len(files) - len(seen)  # none swept as orphans
    assert len(_s3_pending(s3)) == 1
    again = distcp.copy(str(src), "s3://dst/t", dst_options=s3.options, listing="spark",
                        publishing="spark", progress=False)
    assert again.ok, again.failures
    assert (again.sequences_replayed, again.files_recovered, again.files_copied) == (1, 24, 0)
    assert _objects(s3) == files
    assert s3.pending_uploads() == [] and _s3_pending(s3) == []


@pytest.mark.parametrize("verbose", [False, True])
def test_the_drivers_walk_keeps_a_big_copy_on_the_executors(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verbose: bool) -> None:
    """The default listing (``auto``: the driver's paired walk for a tree this small)
    past ``HELD`` files to copy: planned by the driver, copied and published from files, nothing per file collected; unless every
    decision is shown (``-v``), which needs each file on the driver."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 6, 10)
    monkeypatch.setattr(treeplans, "HELD", 59)
    s = distcp.copy(str(src), str(dst), progress=False,
                    log_level="info" if verbose else None)
    assert s.ok, s.failures
    assert (s.files_copied, s.directories_created, s.plan_rows_collected) == (60, 8, 0)
    assert s.results_collected == (60 if verbose else 0)
    assert tree(dst) == tree(src)
    assert _manifest_count(dst) == 60
    assert _pending(dst) == [] and not list((dst / ".pydistcp" / "staging").iterdir())
    (src / "d002" / "f004").write_bytes(b"changed, and longer\n")
    again = distcp.copy(str(src), str(dst), progress=False)
    assert (again.files_copied, again.files_skipped, again.results_collected) == (1, 59, 1)
    assert tree(dst) == tree(src)


@pytest.mark.parametrize(("held", "collected"), [(25, 0), (35, 0), (100, 60)])
def test_the_drivers_walk_shares_its_subtrees_with_a_forked_child(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: int,
        collected: int) -> None:
    """In the command (forks allowed) the driver's paired walk deals the subtrees into
    two groups and a forked child walks one (``treeplans.WALKERS``). Each half keeps
    its files in a copy-rows file of its own past ``HELD`` (25); halves that each stay
    under it but not together (35) are kept as one walk would keep them; a small copy
    (100) is held whole and collected. Either way the plan is one walk's plan, and a
    rerun skips what is there."""
    from distcp.planning import beside

    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 6, 10)
    monkeypatch.setattr(beside, "_enabled", True)
    monkeypatch.setattr(treeplans, "HELD", held)
    seen_kept = tmp_path / "kept"  # planned in a forked child (``beside``): a file
    real = treeplans.assembled

    def seen(ds: Any, cfg: Any, rule: Any, root_dir: Any, values: list[Any],
             *rest: Any) -> Any:
        with seen_kept.open("a") as out:
            out.writelines(f"{Path(v.url).name}\n" for kind, _, v in values if kind == "kept")
        return real(ds, cfg, rule, root_dir, values, *rest)

    monkeypatch.setattr(treeplans, "assembled", seen)
    s = distcp.copy(str(src), str(dst), progress=False, listing="driver")
    assert s.ok, s.failures
    assert (s.files_copied, s.results_collected) == (60, collected)
    names = sorted(seen_kept.read_text().split())
    assert names == {25: ["driver-beside.parquet", "driver.parquet"],
                     35: ["driver.parquet"], 100: []}[held]
    assert tree(dst) == tree(src) and _manifest_count(dst) == 60
    (src / "d003" / "f007").write_bytes(b"changed, and longer\n")
    again = distcp.copy(str(src), str(dst), progress=False, listing="driver")
    assert (again.files_copied, again.files_skipped) == (1, 59)
    assert tree(dst) == tree(src)


def _s3_source(src: Path, s3: S3Server) -> Path:  # noqa: F811
    """24 files in 3 directories, locally at ``src`` and as keys under s3://src/in/."""
    _source(src, 3, 8)
    client = s3.client()
    for path, data in _files(src).items():
        client.put_object(Bucket="src", Key=f"in/{path}", Body=data)
    return src


@pytest.mark.parametrize("held", [5, 40])
def test_a_walked_s3_source_past_held_files_is_copied_from_files(
        spark: Any, tmp_path: Path, s3: S3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, held: int) -> None:
    """A dataset the driver's own walk planned (an S3 source: no paired walks) with more
    than ``HELD`` files to copy is written to a copy-rows file after planning: copied and
    published from files, nothing per file collected, the same objects as bytes."""
    src = _s3_source(tmp_path / "src", s3)
    monkeypatch.setattr(treeplans, "HELD", held)
    dst = tmp_path / "dst"
    s = distcp.copy("s3://src/in", str(dst), src_options=s3.options, progress=False)
    assert s.ok, s.failures
    assert (s.files_copied, s.results_collected) == (24, 0 if held < 24 else 24)
    assert {k: v for k, v in _files(dst).items() if not k.startswith(".pydistcp/")} == _files(src)
    assert _manifest_count(dst) == 24
    assert _pending(dst) == [] and not list((dst / ".pydistcp" / "staging").iterdir())
    again = distcp.copy("s3://src/in", str(dst), src_options=s3.options, progress=False)
    assert (again.files_copied, again.files_skipped) == (0, 24)


@pytest.mark.parametrize("keys_from", [23, 24])
def test_auto_plans_an_s3_source_of_more_than_keys_from_keys_on_spark(
        spark: Any, tmp_path: Path, s3: S3Server,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, keys_from: int) -> None:
    """The default listing (``auto``): an S3 prefix of more than KEYS_FROM keys is listed
    and planned on Spark, its files kept on the executors (nothing per file collected);
    one of KEYS_FROM keys or fewer is walked by the driver, whose plan of so few files
    is collected."""
    src = _s3_source(tmp_path / "src", s3)
    monkeypatch.setattr(listing, "KEYS_FROM", keys_from)
    dst = tmp_path / "dst"
    s = distcp.copy("s3://src/in", str(dst), src_options=s3.options, progress=False)
    assert s.ok, s.failures
    on_spark = keys_from < 24
    assert (s.files_copied, s.results_collected) == (24, 0 if on_spark else 24)
    assert (s.plan_rows_collected > 0) is on_spark
    assert {k: v for k, v in _files(dst).items() if not k.startswith(".pydistcp/")} == _files(src)
    again = distcp.copy("s3://src/in", str(dst), src_options=s3.options, progress=False)
    assert (again.files_copied, again.files_skipped) == (0, 24)


@pytest.mark.parametrize(("big", "cheap"), [(True, True), (True, False), (False, True)])
def test_auto_plans_a_big_local_tree_on_spark_and_a_small_one_on_the_driver(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big: bool, cheap: bool
        ) -> None:
    """``--listing auto``, the default: a local tree of more than LOCAL_FROM entries is
    planned on Spark when its session opens cheaply and takes the thin path (nothing per
    file on the driver); a smaller one, or any tree when Spark would start a JVM of its
    own, the driver's paired walks."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 4, 20)  # 85 entries: 80 files, 5 directories
    monkeypatch.setattr(listing, "LOCAL_FROM", 84 if big else 85)
    monkeypatch.setattr(choice, "opens_cheaply", lambda *args: cheap)
    paired: list[str] = []
    real = treeplans.DriverPairs.__call__

    def counted(self: treeplans.DriverPairs, ds: Any, cfg: Any) -> Any:
        paired.append(ds.urn)
        return real(self, ds, cfg)

    monkeypatch.setattr(treeplans.DriverPairs, "__call__", counted)
    s = distcp.copy(str(src), str(dst), progress=False)
    assert s.ok and s.files_copied == 80
    on_spark = big and cheap
    assert s.results_collected == (0 if on_spark else 80)
    assert len(paired) == (0 if on_spark else 1)
    assert tree(dst) == tree(src)
