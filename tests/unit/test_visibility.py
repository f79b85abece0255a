"""Which files appear as soon as they are copied (pure: no storage, no Spark)."""

from __future__ import annotations

from distcp.model import CopyableFile, FileStatus, Split, WorkUnit
from distcp.planning.visibility import mark, per_file


def f(name: str, file_set: str = "files", urn: str = "u", converters: tuple[str, ...] = ()
      ) -> CopyableFile:
    return CopyableFile(FileStatus(f"/src/{name}", 10, 1.0), f"s3://b/{name}", urn, file_set,
                        converters=converters)


def test_file_set_visibility_publishes_only_sets_of_one_unconverted_file_per_file() -> None:
    a, b = f("a"), f("b")
    alone = f("c", file_set="single")
    other_urn = f("d", file_set="files", urn="v")  # same set name, another dataset: alone
    archive = f("e.tar", file_set="e.tar", converters=("untar",))  # expands: lands with its set
    got = per_file([a, b, alone, other_urn, archive], "file-set")
    assert got == {alone.guid, other_urn.guid}


def test_file_visibility_publishes_every_file_per_file() -> None:
    files = [f("a"), f("b"), f("e.tar", file_set="e.tar", converters=("untar",))]
    assert per_file(files, "file") == {x.guid for x in files}


def test_mark_names_the_files_of_each_unit_but_never_a_range() -> None:
    a, b, c = f("a"), f("b"), f("c")
    units = [WorkUnit(0, (a, b)), WorkUnit(1, (c,)), WorkUnit(2, (a,), Split(0, 2, 0, 5))]
    marked = mark(units, frozenset({a.guid, c.guid}))
    assert [u.publish_now for u in marked] == [(a.guid,), (c.guid,), ()]
