"""Planning with converters: archive expansion directories, reruns, --delete, plugins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from distcp.configuration import CopyConfiguration
from distcp.datasets.recursive import RecursiveCopyableDataset
from distcp.model import CopyableFile, FileStatus
from distcp.planning.plan import check_duplicates, expansion_targets, plan_dataset

DST = "file:///dst"


def _archive(name: str, destination: str, mtime: float = 100.0) -> CopyableFile:
    return CopyableFile(FileStatus(f"file:///src/{name}", 10, mtime), destination, "urn",
                        f"file:{name}", converters=("untar",))


def _dir(url: str) -> FileStatus:
    return FileStatus(url, 0, 5.0, is_dir=True)


def test_published_archive_is_skipped_on_rerun_and_a_changed_one_is_not() -> None:
    a = _archive("a.tar", f"{DST}/a/")
    b = _archive("b.tar", f"{DST}/b/", mtime=200.0)
    listing = {f"{DST}/a": _dir(f"{DST}/a"), f"{DST}/a/x": FileStatus(f"{DST}/a/x", 1, 1.0),
               f"{DST}/b": _dir(f"{DST}/b")}
    target = expansion_targets([a, b], listing, {a.guid}, DST)
    plan = plan_dataset("urn", DST, [a, b], [], target)
    assert [x.file.destination for x in plan.skip] == [f"{DST}/a/"]
    assert [x.file.destination for x in plan.copy] == [f"{DST}/b/"]


def test_expansion_deleted_at_the_destination_is_copied_again() -> None:
    a = _archive("a.tar", f"{DST}/a/")
    target = expansion_targets([a], {f"{DST}/other": _dir(f"{DST}/other")}, {a.guid}, DST)
    plan = plan_dataset("urn", DST, [a], [], target)
    assert [x.reason for x in plan.copy] == ["new"]


def test_delete_never_removes_what_an_archive_expanded() -> None:
    a = _archive("a.tar", f"{DST}/a/")
    listing = {f"{DST}/a": _dir(f"{DST}/a"), f"{DST}/a/deep": _dir(f"{DST}/a/deep"),
               f"{DST}/a/deep/x": FileStatus(f"{DST}/a/deep/x", 1, 1.0),
               f"{DST}/stale.txt": FileStatus(f"{DST}/stale.txt", 1, 1.0)}
    plan = plan_dataset("urn", DST, [a], [], listing, delete=True)
    assert plan.delete == (f"{DST}/stale.txt",)


def test_archives_may_share_a_directory_with_expand_into_parent() -> None:
    a, b = _archive("a.tar", f"{DST}/"), _archive("b.tar", f"{DST}/")
    plan = plan_dataset("urn", DST, [a, b], [], {})
    check_duplicates([plan], shared_folders=True)  # no DuplicateDestinationError
    assert len(plan.copy) == 2


def test_a_file_where_the_expansion_directory_goes_is_a_planning_error() -> None:
    import pytest

    from distcp.errors import PlanningError

    a = _archive("a.tar", f"{DST}/a/")
    with pytest.raises(PlanningError, match="cannot expand .* a file is there"):
        plan_dataset("urn", DST, [a], [], {f"{DST}/a": FileStatus(f"{DST}/a", 3, 1.0)})


def test_each_converted_file_is_its_own_file_set_and_datasets_can_choose(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "x.gz").write_bytes(b"")
    (src / "y.gz").write_bytes(b"")
    cfg = CopyConfiguration.build([str(src)], str(tmp_path / "dst"), converters=["gunzip"])
    files = RecursiveCopyableDataset("u", str(src), str(tmp_path / "dst")).listing(cfg).files
    assert sorted(f.file_set for f in files) == ["file:d/x.gz", "file:y.gz"]
    plain = CopyConfiguration.build([str(src)], str(tmp_path / "dst"))
    chosen = RecursiveCopyableDataset("u", str(src), str(tmp_path / "dst"),
                                      converters=["gunzip"]).listing(plain).files
    assert sorted(Path(f.destination).name for f in chosen) == ["x", "y"]
    assert {f.converters for f in chosen} == {("gunzip",)}


def test_third_party_converter_through_the_entry_point_group(tmp_path: Path) -> None:
    """A real installed-distribution layout on sys.path, in a fresh interpreter."""
    pkg = tmp_path / "acme_rot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import io\nfrom dataclasses import replace\n"
        "from distcp.converters.base import Converter\n"
        "class Upper(Converter):\n    name = 'upper'\n"
        "    def rename(self, d):\n        return d + '.up'\n"
        "    def convert(self, s):\n"
        "        yield replace(s, stream=io.BytesIO(s.stream.read().upper()),"
        " destination=self.rename(s.destination))\n")
    info = tmp_path / "acme_rot-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rot\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydistcp.converters]\nupper = acme_rot:Upper\n")
    code = ("from distcp.registry import CONVERTERS\n"
            "from distcp.converters.base import build_chain, ConverterOptions, rename_through\n"
            "c = build_chain(['gunzip', 'upper'], ConverterOptions())\n"
            "print(type(c[1]).__name__, rename_through(c, 'a.gz'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": f"{tmp_path}:{Path.cwd()}"}, check=True)
    assert out.stdout.split() == ["Upper", "a.up"]


def test_single_converted_file_is_found_under_its_renamed_destination(tmp_path: Path) -> None:
    import os

    from distcp.planning.listing import plan_all

    (tmp_path / "x.gz").write_bytes(b"")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "x").write_bytes(b"already converted")
    st = os.stat(tmp_path / "x.gz")
    os.utime(tmp_path / "dst" / "x", ns=(st.st_mtime_ns, st.st_mtime_ns))
    cfg = CopyConfiguration.build([str(tmp_path / "x.gz")], str(tmp_path / "dst"),
                                  converters=["gunzip"])
    [dataset] = plan_all(cfg, lambda m: None).plan.datasets
    assert [a.reason for a in dataset.skip] == ["converted copy with the same mtime exists"]


def test_archives_sharing_a_folder_are_each_up_to_date_only_by_their_own_version() -> None:
    """--expand-into-parent: r published into DST/, p (same mtime) failed there; the
    folder's expansions say r, so p is copied and r skipped."""
    p = _archive("p.tar", f"{DST}/")
    r = _archive("r.tar", f"{DST}/")
    listing = {f"{DST}/r.txt": FileStatus(f"{DST}/r.txt", 1, 1.0)}
    target = expansion_targets([p, r], listing, {r.guid}, DST)
    plan = plan_dataset("urn", DST, [p, r], [], target)
    assert [x.file.origin.url for x in plan.copy] == [p.origin.url]
    assert [x.file.origin.url for x in plan.skip] == [r.origin.url]
