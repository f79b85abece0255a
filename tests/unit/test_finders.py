"""Where sources land: the single-root mapping rules and the glob finder."""

from __future__ import annotations

from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError, PlanningError
from distcp.planning.listing import find_datasets, plan_all


def targets(sources: list[Path], dst: Path | str, **opts: object) -> list[str]:
    cfg = CopyConfiguration.build([str(s) for s in sources], str(dst), **opts)
    return [d.destination_root for d in find_datasets(cfg)]


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("f")
    (root / "top.txt").write_text("t")
    return root


def test_directory_source_is_mirrored_whether_or_not_dst_exists(src: Path, tmp_path: Path) -> None:
    assert targets([src], tmp_path / "new") == [str(tmp_path / "new")]
    (tmp_path / "existing").mkdir()
    assert targets([src], tmp_path / "existing") == [str(tmp_path / "existing")]


def test_file_source_goes_into_an_existing_directory(src: Path, tmp_path: Path) -> None:
    assert targets([src / "top.txt"], tmp_path / "f.copy") == [str(tmp_path / "f.copy")]
    (tmp_path / "d").mkdir()
    assert targets([src / "top.txt"], tmp_path / "d") == [str(tmp_path / "d" / "top.txt")]
    assert targets([src / "top.txt"], f"{tmp_path}/e/") == [str(tmp_path / "e" / "top.txt")]


def test_several_sources_each_go_to_their_basename(src: Path, tmp_path: Path) -> None:
    got = targets([src / "sub", src / "top.txt"], tmp_path / "out")
    assert got == [str(tmp_path / "out" / "sub"), str(tmp_path / "out" / "top.txt")]


def test_destination_inside_source_is_refused(src: Path) -> None:
    with pytest.raises(PlanningError, match="is inside source"):
        targets([src], src / "sub" / "copy")


def test_destination_inside_source_is_refused_however_each_is_spelled(src: Path) -> None:
    """A ``file://`` URL and a plain path reach the same disk (fsspec's filesystem for
    one, ``LocalPaths`` for the other): still inside."""
    with pytest.raises(PlanningError, match="is inside source"):
        targets([f"file://{src}"], src / "sub" / "copy")
    with pytest.raises(PlanningError, match="is inside source"):
        targets([src], f"file://{src}/sub/copy")


def test_missing_source_is_named(tmp_path: Path) -> None:
    with pytest.raises(PlanningError, match=f"source not found: {tmp_path / 'nope'}"):
        targets([tmp_path / "nope"], tmp_path / "out")


def test_delete_of_a_file_source_is_refused(src: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--delete mirrors directories"):
        targets([src / "top.txt"], tmp_path / "out", delete=True)


def test_same_basename_from_two_sources_is_refused(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d / "x").mkdir(parents=True)
        (tmp_path / d / "x" / "f").write_text(d)
    cfg = CopyConfiguration.build([str(tmp_path / "a/x"), str(tmp_path / "b/x")], str(tmp_path / "o"))
    with pytest.raises(PlanningError, match="two sources map to"):
        plan_all(cfg, lambda m: None)


def test_glob_finder_makes_one_dataset_per_matching_directory(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    for db, table in [("db1", "t1"), ("db1", "t2"), ("db2", "t1")]:
        (wh / db / "tables" / table).mkdir(parents=True)
        (wh / db / "tables" / table / "part-0").write_text(f"{db}.{table}")
    (wh / "db2" / "tables" / "not-a-dir").write_text("x")
    cfg = CopyConfiguration.build([str(wh)], str(tmp_path / "out"), dataset_glob="*/tables/*")
    datasets = find_datasets(cfg)
    assert [d.urn for d in datasets] == [str(wh / "db1/tables/t1"), str(wh / "db1/tables/t2"),
                                         str(wh / "db2/tables/t1")]
    assert datasets[2].destination_root == str(tmp_path / "out/db2/tables/t1")


def test_include_and_exclude_filter_files(src: Path, tmp_path: Path) -> None:
    (src / "sub" / "skip.log").write_text("l")
    cfg = CopyConfiguration.build([str(src)], str(tmp_path / "o"), include=["*.txt"],
                                  exclude=["sub/f.txt"])
    files = plan_all(cfg, lambda m: None).plan.files_to_copy
    assert [Path(f.destination).name for f in files] == ["top.txt"]
