"""Planning rules, tested with literal listings (no filesystem, no Spark)."""

from __future__ import annotations

import pytest

from distcp.configuration import COMPARE_MODES
from distcp.errors import DuplicateDestinationError, PlanningError
from distcp.model import CopyableDirectory, CopyableFile, FileStatus
from distcp.planning import packing
from distcp.planning.packing import pack, per_core, unit_count
from distcp.planning.plan import check_duplicates, decide, plan_dataset, skips_same


def cf(name: str, size: int = 10, mtime: float = 100.0, preserve: str = "pt",
       converters: tuple[str, ...] = (), dest: str | None = None) -> CopyableFile:
    return CopyableFile(FileStatus(f"/src/{name}", size, mtime), dest or f"/dst/{name}", "u",
                        "all", preserve=preserve, converters=converters)


def st(size: int = 10, mtime: float = 100.0, is_dir: bool = False) -> FileStatus:
    return FileStatus("/dst/x", size, mtime, is_dir=is_dir)


@pytest.mark.parametrize("existing, overwrite, expected", [
    (None, False, ("new", True)),
    (st(), False, ("same size and mtime", False)),
    (st(), True, ("--overwrite", True)),
    (st(size=11), False, ("size differs", True)),
    (st(mtime=99.0), False, ("mtime differs", True)),
    (st(mtime=100.0004), False, ("same size and mtime", False)),
])
def test_decide_by_size_and_mtime(existing, overwrite, expected) -> None:  # type: ignore[no-untyped-def]
    assert decide(cf("a"), existing, overwrite) == expected


@pytest.mark.parametrize("compare", COMPARE_MODES)
@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("preserve", ["pt", "p", ""])
@pytest.mark.parametrize("mtimes_kept", [True, False])
def test_skips_same_is_what_decide_says_of_a_file_identical_to_its_target(
        compare: str, overwrite: bool, preserve: str, mtimes_kept: bool) -> None:
    """A planner skips a plain file whose size and mtime equal its target's on its stat
    alone (``joined.plan_rows``) exactly when ``decide`` would skip it."""
    for size, mtime in ((0, 0.0), (10, 100.0), (7, 1_700_000_000.123456)):
        f = cf("a", size, mtime, preserve)
        skipped = not decide(f, st(size, mtime), overwrite, compare, mtimes_kept)[1]
        assert skips_same(overwrite, compare) is skipped


def test_without_preserved_mtime_a_newer_destination_of_same_size_is_kept() -> None:
    assert decide(cf("a", preserve="p"), st(mtime=200.0), False)[1] is False
    assert decide(cf("a", preserve="p"), st(mtime=50.0), False)[1] is True


def test_checksums_decide_when_both_known() -> None:
    from dataclasses import replace

    f = cf("a")
    f = replace(f, origin=replace(f.origin, checksum="c1"))
    assert decide(f, replace(st(mtime=5.0), checksum="c1"), False) == ("same checksum", False)
    assert decide(f, replace(st(), checksum="c2"), False) == ("checksum differs", True)


def test_converted_file_is_skipped_only_when_its_mtime_matches() -> None:
    f = cf("a.gz", converters=("gunzip",), dest="/dst/a")
    assert decide(f, st(size=999), False)[1] is False
    assert decide(f, st(size=999, mtime=1.0), False)[1] is True


def test_delete_lists_only_extras_deepest_first() -> None:
    target = {"/dst/a": st(), "/dst/old": st(), "/dst/gone": st(is_dir=True),
              "/dst/gone/f": st(), "/dst/keep": st(is_dir=True)}
    d = CopyableDirectory(FileStatus("/src/keep", 0, 0, is_dir=True), "/dst/keep", "u", "all")
    plan = plan_dataset("u", "/dst", [cf("a")], [d], target, delete=True)
    assert plan.delete == ("/dst/gone/f", "/dst/gone", "/dst/old")
    assert [a.file.destination for a in plan.skip] == ["/dst/a"]
    assert plan_dataset("u", "/dst", [cf("a")], [d], target).delete == ()


def test_file_onto_directory_is_refused() -> None:
    with pytest.raises(PlanningError, match="cannot replace directory /dst/a"):
        plan_dataset("u", "/dst", [cf("a")], [], {"/dst/a": st(is_dir=True)})


def test_two_sources_to_one_destination_are_refused_with_both_names() -> None:
    p1 = plan_dataset("u1", "/dst", [cf("a")], [], {})
    p2 = plan_dataset("u2", "/dst", [cf("b", dest="/dst/a")], [], {})
    with pytest.raises(DuplicateDestinationError, match="/src/a and /src/b"):
        check_duplicates([p1, p2])


def test_packing_balances_bytes_plus_per_file_cost() -> None:
    files = [cf(f"big{i}", size=100) for i in range(4)] + [cf(f"s{i}", size=1) for i in range(400)]
    units = pack(files, 4, file_cost=1)
    loads = [sum(f.origin.size + 1 for f in u.files) for u in units]
    assert len(units) == 4 and max(loads) - min(loads) <= 101
    assert sorted(f.origin.url for u in units for f in u.files) == sorted(f.origin.url for f in files)


def test_a_small_folders_files_go_to_one_unit_and_units_stay_balanced() -> None:
    """Its staging folder then publishes the folder by one rename (storage.folders)."""
    files = [cf(f"d{d:02d}/f{n}", size=1 + (d * 7 + n) % 13, dest=f"/dst/d{d:02d}/f{n}")
             for d in range(40) for n in range(25)]
    units = pack(files, 4, file_cost=2)
    where = {f.destination.rsplit("/", 1)[0]: u.unit_id for u in units for f in u.files}
    for u in units:
        assert {f.destination.rsplit("/", 1)[0] for f in u.files} == \
            {d for d, i in where.items() if i == u.unit_id}  # no folder in two units
    loads = [sum(f.origin.size + 2 for f in u.files) for u in units]
    folder = max(sum(f.origin.size + 2 for f in files if f.destination.startswith(d + "/"))
                 for d in where)
    assert len(units) == 4 and max(loads) - min(loads) <= folder
    assert sorted(f.origin.url for u in units for f in u.files) == \
        sorted(f.origin.url for f in files)


def test_a_folder_too_big_for_one_unit_is_spread_file_by_file() -> None:
    big = [cf(f"big/f{n}", size=100, dest=f"/dst/big/f{n}") for n in range(40)]
    small = [cf(f"s{d}/f", size=1, dest=f"/dst/s{d}/f") for d in range(8)]
    units = pack(big + small, 4, file_cost=0)
    assert all(any(f.destination.startswith("/dst/big/") for f in u.files) for u in units)
    loads = [sum(f.origin.size for f in u.files) for u in units]
    assert max(loads) - min(loads) <= 100


def test_task_count_follows_cores_not_files() -> None:
    assert unit_count(20000, cores=2) == 4
    assert unit_count(3, cores=8) == 3
    # a unit is one pickled row: at most 10,000 files each, whatever the cores or --tasks
    assert unit_count(1_000_000, cores=2) == 100
    assert unit_count(1_000_001, cores=2, per_core=1) == 101
    assert pack([], 4, 1) == []


def test_a_short_job_takes_one_task_a_core_and_a_long_one_two() -> None:
    """A second wave of tasks costs more than the balance it buys on a short job."""
    gib = 1 << 30
    assert per_core(None, 2 * gib, cores=2) == 1  # 8 x 256 MiB: 1 GiB a core
    assert per_core(None, packing.TWO_A_CORE * 2, cores=2) == 1
    assert per_core(None, packing.TWO_A_CORE * 2 + 1, cores=2) == 2
    assert per_core(None, 20_000 * (32 << 10) + 20_000 * (256 << 10), cores=2) == 2
    assert per_core(None, 4 * gib, cores=8) == 1 and per_core(None, 4 * gib, cores=0) == 2
    assert per_core(3, 100 * gib, cores=2) == 1  # --tasks N: exactly N


def test_a_destination_keeping_whole_seconds_matches_a_sub_second_source() -> None:
    """FTP (MFMT) and HTTP dates hold whole seconds: a rerun must not copy again."""
    f = cf("a", mtime=1_800_000_000.75)
    assert decide(f, st(mtime=1_800_000_000.0), False) == ("same size and mtime", False)
    assert decide(f, st(mtime=1_800_000_001.0), False) == ("mtime differs", True)
    assert decide(f, st(mtime=1_800_000_000.5), False) == ("mtime differs", True)  # both precise


def test_compare_modes_follow_rclone() -> None:
    from dataclasses import replace

    f = replace(cf("a"), origin=replace(cf("a").origin, checksum="c1"))
    assert decide(cf("a"), st(size=99, mtime=1.0), False, "ignore-existing") == (
        "destination exists (--ignore-existing)", False)
    assert decide(cf("a"), None, False, "ignore-existing") == ("new", True)
    assert decide(cf("a"), st(mtime=1.0), False, "size-only") == ("same size (--size-only)", False)
    assert decide(cf("a"), st(size=11), False, "size-only") == ("size differs", True)
    assert decide(f, replace(st(mtime=1.0), checksum="c1"), False, "checksum") == (
        "same size and checksum (--checksum)", False)
    assert decide(f, replace(st(), checksum="c2"), False, "checksum") == ("checksum differs", True)
    assert decide(f, st(), False, "checksum") == (
        "same size, contents to compare (--checksum)", True)
    assert decide(f, replace(st(size=11), checksum="c1"), False, "checksum")[1] is True


def test_max_delete_refuses_above_the_limit_only() -> None:
    from distcp.planning.plan import check_max_delete

    target = {"/dst/old1": st(), "/dst/old2": st()}
    plans = [plan_dataset("u", "/dst", [], [], target, delete=True)]
    check_max_delete(plans, 2)
    check_max_delete(plans, None)
    with pytest.raises(PlanningError, match="would delete 2 entries"):
        check_max_delete(plans, 1)


def test_tasks_n_means_n_units_when_there_are_enough_files() -> None:
    files = [cf(f"f{i}") for i in range(10)]
    assert len(pack(files, unit_count(len(files), 3, per_core=1), 0)) == 3
    assert len(pack(files[:2], unit_count(2, 3, per_core=1), 0)) == 2


def link(target: str | None, size: int = 1, mtime: float = 100.0) -> FileStatus:
    return FileStatus("/x", size, mtime, link_target=target)


@pytest.mark.parametrize("origin, existing, compare, expected", [
    (link("a"), None, "default", ("new symbolic link to a", True)),
    (link("a"), link("a", mtime=5.0), "default", ("same symbolic link to a", False)),
    (link("a"), link("b"), "size-only", ("symbolic link target differs (b -> a)", True)),
    (link("a"), link("b"), "checksum", ("symbolic link target differs (b -> a)", True)),
    (link("a"), link(None), "default",
     ("symbolic link to a, destination is not a link", True)),
    (link(None), link("a"), "default", ("destination is a symbolic link", True)),
    (link("a"), link("b"), "ignore-existing", ("destination exists (--ignore-existing)", False)),
])
def test_a_link_is_compared_by_its_target_text(origin, existing, compare, expected) -> None:  # type: ignore[no-untyped-def]
    f = CopyableFile(origin, "/dst/l", "u", "all")
    assert decide(f, existing, False, compare) == expected
    assert decide(f, existing, True, compare) == (
        expected if existing is None else ("--overwrite", True))


def with_checksum(status: FileStatus, checksum: str) -> FileStatus:
    from dataclasses import replace

    return replace(status, checksum=checksum)


@pytest.mark.parametrize("f, existing, expected", [
    (cf("a.gz", converters=("gunzip",)), st(size=999),
     ("converted copy with the same mtime exists", False)),
    (cf("a.gz", converters=("gunzip",)), st(mtime=1.0), ("converted copy is older or differs", True)),
    (cf("a.gz", preserve="p", converters=("gunzip",)), st(),
     ("converted copy is older or differs", True)),
    (CopyableFile(with_checksum(FileStatus("/src/a", 10, 100.0), "c1"), "/dst/a", "u", "all"),
     with_checksum(st(size=11), "c1"), ("checksum differs", True)),
    (CopyableFile(with_checksum(FileStatus("/src/a", 10, 100.0), "c1"), "/dst/a", "u", "all"),
     st(size=11), ("size differs", True)),
    (cf("a", preserve="p"), st(mtime=100.0), ("same size, destination not older", False)),
    (cf("a", preserve="p"), st(mtime=50.0), ("source is newer", True)),
])
def test_every_default_comparison_names_its_reason(f, existing, expected) -> None:  # type: ignore[no-untyped-def]
    assert decide(f, existing, False) == expected


@pytest.mark.parametrize("f, existing, expected", [
    # An object store's mtime is the upload time: a copy not older than its source is
    # up to date (a preserved mtime could never match it), a newer source is copied.
    (cf("a"), st(mtime=5_000.0), ("same size, destination not older", False)),
    (cf("a"), st(mtime=50.0), ("source is newer", True)),
    # FTP's MFMT keeps whole seconds: the copy's 100 is not older than its source's 100.7
    (cf("a", mtime=100.7), st(mtime=100.0), ("same size, destination not older", False)),
    (cf("a"), st(size=11, mtime=5_000.0), ("size differs", True)),
    (cf("a.gz", converters=("gunzip",)), st(size=999, mtime=5_000.0),
     ("converted copy not older than its source exists", False)),
    (cf("a.gz", converters=("gunzip",)), st(mtime=50.0), ("converted copy is older or differs", True)),
    (cf("a.gz", preserve="p", converters=("gunzip",)), st(mtime=5_000.0),
     ("converted copy is older or differs", True)),
])
def test_a_destination_that_keeps_no_mtimes_is_compared_by_age(f, existing, expected) -> None:  # type: ignore[no-untyped-def]
    assert decide(f, existing, False, mtimes_kept=False) == expected
    assert decide(f, existing, False, "size-only", mtimes_kept=False)[1] is (  # unchanged
        existing.size != f.origin.size)


def test_two_archives_expanding_into_one_folder_are_refused_unless_they_share_parents() -> None:
    p1 = plan_dataset("u1", "/dst", [cf("x.tar.gz", dest="/dst/x/")], [], {})
    p2 = plan_dataset("u2", "/dst", [cf("x.tgz", dest="/dst/x/")], [], {})
    with pytest.raises(DuplicateDestinationError,
                       match="two archives expand into the one folder /dst/x/: /src/x.tar.gz "
                             "and /src/x.tgz; rename one at the source"):
        check_duplicates([p1, p2])
    check_duplicates([p1, p2], shared_folders=True)  # --expand-into-parent
