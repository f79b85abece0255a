"""The files of a thin run that stay on the executors: copy-rows files (what planning
tasks write), their packing into work units by chunk, and the results files copy
tasks write, on real disk (``distcp.copying.copyrows``, ``distcp.copying.resultfiles``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from distcp.copying import copyrows, resultfiles
from distcp.copying.copyrows import Chunk, CopyRowsWriter, chunks_of, read_chunk
from distcp.copying.resultfiles import (
    REPORTED_FAILURES,
    ResultsWriter,
    publishing_by_folder,
    publishing_of,
    staged_tables,
)
from distcp.model import CopyableFile, FileStatus, TaskResult
from distcp.planning.packing import pack_chunks, split_chunks


def _file(n: int, size: int = 10) -> CopyableFile:
    return CopyableFile(FileStatus(f"/src/f{n}", size, 1_000.0 + n), f"/dst/f{n}", "urn:a",
                        "files")


def test_copy_rows_come_back_by_chunk_in_order(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copyrows, "CHUNK", 4)
    url = str(tmp_path / "plan" / "s1p0a0.parquet")  # its folder is made
    writer = CopyRowsWriter(url, {})
    files = [_file(n, size=n) for n in range(10)]
    for f in files:
        writer.add(f)
    rows = writer.close()
    assert rows is not None and rows.url == url
    assert rows.chunks == ((4, 0 + 1 + 2 + 3), (4, 4 + 5 + 6 + 7), (2, 8 + 9))
    assert (rows.files, rows.bytes) == (10, 45)
    back = [f for chunk in chunks_of([rows]) for f in read_chunk(chunk, {})]
    assert back == files


def test_writing_and_reading_copy_rows_never_imports_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas (0.2-0.3 s) to build an array of Python objects; the
    driver's planning of a big tree writes copy rows and needs pandas nowhere else."""
    code = (
        "import sys\n"
        "from distcp.copying.copyrows import CopyRowsWriter, chunks_of, read_chunk\n"
        "from distcp.model import CopyableFile, FileStatus\n"
        "w = CopyRowsWriter(sys.argv[1], {})\n"
        "files = [CopyableFile(FileStatus(f'/s/{n}', 2 ** 40 + n, 1.0), f'/d/{n}', 'u', 'f')"
        " for n in range(1500)]\n"
        "for f in files:\n"
        "    w.add(f)\n"
        "rows = w.close()\n"
        "got = [f for c in chunks_of([rows]) for f in read_chunk(c, {})]\n"
        "assert got == files and rows.chunks[0][1] == 1000 * 2 ** 40 + 499500, rows\n"
        "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p" / "rows.parquet")],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_row_group_cut_in_parts_reads_back_each_part(tmp_path: Path) -> None:
    url = str(tmp_path / "p.parquet")
    writer = CopyRowsWriter(url, {})
    files = [_file(n, size=100) for n in range(7)]
    for f in files:
        writer.add(f)
    rows = writer.close()
    assert rows is not None
    parts = split_chunks(chunks_of([rows]), 3, file_cost=0)
    assert [(c.first, c.files, c.bytes) for c in parts] == [(0, 3, 300), (3, 2, 200),
                                                             (5, 2, 200)]
    assert [f for c in parts for f in read_chunk(c, {})] == files


def test_chunks_are_cut_only_until_there_are_enough_and_never_below_one_file() -> None:
    few = [Chunk("u", 0, 1, 5), Chunk("u", 1, 3, 10_000)]
    assert split_chunks(few, 2, 0) == few  # enough already
    parts = split_chunks(few, 10, 0)
    assert sorted((c.index, c.first, c.files) for c in parts) == [
        (0, 0, 1), (1, 0, 1), (1, 1, 1), (1, 2, 1)]  # as many as there are files


def test_a_task_with_nothing_to_copy_writes_no_file(tmp_path: Path) -> None:
    assert CopyRowsWriter(str(tmp_path / "p.parquet"), {}).close() is None
    assert list(tmp_path.iterdir()) == []


def test_chunks_are_packed_by_cost_onto_the_least_loaded_unit() -> None:
    chunks = [Chunk("u", i, 100, 10_000_000 if i == 0 else 10) for i in range(7)]
    units = pack_chunks(chunks, 3, file_cost=1_000)
    assert sorted(c.index for u in units for c in u) == list(range(7))
    assert [c.index for c in units[0]] == [0]  # the costly chunk is a unit of its own
    assert sorted(len(u) for u in units[1:]) == [3, 3]
    assert pack_chunks([], 4, 1) == []


def test_a_unit_never_holds_more_files_than_its_limit() -> None:
    chunks = [Chunk("u", i, 1_000, 10) for i in range(25)]
    units = pack_chunks(chunks, 2, file_cost=1_000, max_files=5_000)
    assert sorted(c.index for u in units for c in u) == list(range(25))
    assert [sum(c.files for c in u) for u in units] == [5_000] * 5  # units added as needed


def _result(f: CopyableFile, ok: bool = True, staging: str = "", **kw: object) -> TaskResult:
    return TaskResult(f.guid, 1, "a", f.origin.url, f.destination, "urn:a", "files",
                      "ok" if ok else "failed", staging=staging, **kw)  # type: ignore[arg-type]


def test_results_file_lists_the_staged_outputs_and_the_report_sums_them(tmp_path: Path) -> None:
    url = str(tmp_path / "results" / "u1-a.parquet")
    writer = ResultsWriter(1, url, {})
    good = [_file(n) for n in range(3)]
    for n, f in enumerate(good):
        writer.add(_result(f, staging=f"/stage/{n}", bytes_read=10, bytes_written=10,
                           checksum=f"d{n}", requests=(("get", 1),)), f)
    writer.add(_result(_file(7), ok=False, message="gone", bytes_read=4), _file(7))
    report = writer.close()
    assert (report.url, report.files_ok, report.files_failed) == (url, 3, 1)
    assert (report.bytes_read, report.bytes_written, report.newest_mtime) == (34, 30, 1_002.0)
    assert report.requests == (("get", 3),)
    assert [r.message for r in report.failures] == ["gone"]
    assert _staged(url) == [
        (f"/dst/f{n}", 10, 1_000.0 + n, f"d{n}", f.guid) for n, f in enumerate(good)]
    assert publishing_of(url, {}) == ([(f"/stage/{n}", f"/dst/f{n}", 10) for n in range(3)], [])


def _staged(url: str) -> list[tuple[Any, ...]]:
    """(destination, size, mtime, digest, guid) of each staged output of a results file."""
    return [tuple(row.values()) for table in staged_tables(url, {}) for row in table.to_pylist()]


def test_results_file_keeps_staged_uploads_with_their_parts(tmp_path: Path) -> None:
    """An object store's outputs: uploads to complete with their parts, an empty file to
    PUT, an object a task already published (nothing left to do)."""
    url = str(tmp_path / "u2-a.parquet")
    writer = ResultsWriter(2, url, {})
    files = [_file(n) for n in range(3)]
    parts = ((1, '"e1"', 5 << 20), (2, '"e2"', 7))
    writer.add(_result(files[0], staging="s3-upload:U1:s3://b/k0", bytes_written=(5 << 20) + 7,
                       parts=parts), files[0])
    writer.add(_result(files[1], staging="s3-empty:s3://b/k1"), files[1])
    writer.add(_result(files[2], staging="s3-published:s3://b/k2"), files[2])
    writer.close()
    moves, uploads = publishing_of(url, {})
    assert moves == []
    assert uploads == [("s3-upload:U1:s3://b/k0", "/dst/f0", (5 << 20) + 7, parts),
                       ("s3-empty:s3://b/k1", "/dst/f1", 0, ())]


def test_a_results_file_of_the_version_before_parts_still_publishes(tmp_path: Path) -> None:
    """A pending sequence's results files may predate the parts column (renames only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    url = str(tmp_path / "old.parquet")
    pq.write_table(pa.table({"guid": ["g"], "ok": [True], "staging": ["/stage/0"],
                             "destination": ["/dst/f0"], "size": [3], "mtime": [1.0],
                             "digest": ["d"]}), url)
    assert publishing_of(url, {}) == ([("/stage/0", "/dst/f0", 3)], [])


def test_a_report_carries_the_first_failures_whole_and_counts_the_rest(tmp_path: Path) -> None:
    writer = ResultsWriter(2, str(tmp_path / "r.parquet"), {})
    for n in range(REPORTED_FAILURES + 5):
        writer.add(_result(_file(n), ok=False, message=f"m{n}"), _file(n))
    report = writer.close()
    assert report.files_failed == REPORTED_FAILURES + 5
    assert len(report.failures) == REPORTED_FAILURES
    assert _staged(report.url) == []  # nothing to publish


@pytest.mark.parametrize("read_rows", [resultfiles.READ_ROWS, 2])
def test_a_results_files_renames_come_grouped_by_folder_as_publishing_of_lists_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_rows: int) -> None:
    """Files that keep their names in one staging folder, bound for one final folder,
    are one FolderMove; a renamed one, a failure and an upload are as before; a
    folder's files read in different tables (``READ_ROWS``) are still one move."""
    monkeypatch.setattr(resultfiles, "READ_ROWS", read_rows)
    url = str(tmp_path / "u1-a.parquet")
    writer = ResultsWriter(1, url, {})
    staged = [("/stage/u1/d0/a", "/dst/x/a"), ("/stage/u1/d0/b", "/dst/x/b"),
              ("/stage/u1/d1/c", "/dst/y/c"), ("/stage/u1/d0/t.tmp", "/dst/x/t"),
              ("/stage/u1/d1/d", "/dst/y/d")]
    for n, (staging, final) in enumerate(staged):
        f = CopyableFile(FileStatus(f"/src/{n}", n, 1.0), final, "urn:a", "files")
        writer.add(_result(f, staging=staging, bytes_written=n), f)
    writer.add(_result(_file(8), ok=False), _file(8))
    up = _file(9)
    writer.add(_result(up, staging="s3-empty:s3://b/k9"), up)
    writer.close()
    found = publishing_by_folder(url, {})
    assert found is not None
    folders, moves, uploads = found
    assert sorted((m.staged, m.final, m.names, m.sizes) for m in folders) == [
        ("/stage/u1/d0", "/dst/x", ("a", "b"), (0, 1)),
        ("/stage/u1/d1", "/dst/y", ("c", "d"), (2, 4))]
    assert moves == [("/stage/u1/d0/t.tmp", "/dst/x/t", 3)]
    assert uploads == [("s3-empty:s3://b/k9", "/dst/f9", 0, ())]
    by_file = [(f.staged.location, f.final, f.size) for m in folders for f in m.files()]
    assert sorted(by_file + moves) == sorted(publishing_of(url, {})[0])


def test_a_results_file_naming_an_escaped_path_is_read_file_by_file(tmp_path: Path) -> None:
    """A name that is not UTF-8 is stored escaped (``names.to_utf8``): the grouping by
    Arrow leaves such a file to ``publishing_of``, which gives the name back."""
    url = str(tmp_path / "u1-a.parquet")
    writer = ResultsWriter(1, url, {})
    f = CopyableFile(FileStatus("/src/n", 1, 1.0), "/dst/x/\udcffname", "urn:a", "files")
    writer.add(_result(f, staging="/stage/d0/\udcffname", bytes_written=1), f)
    writer.close()
    assert publishing_by_folder(url, {}) is None
    assert publishing_of(url, {}) == ([("/stage/d0/\udcffname", "/dst/x/\udcffname", 1)], [])


def test_a_folder_move_is_one_rename_into_an_empty_folder_and_file_by_file_into_a_full_one(
        tmp_path: Path) -> None:
    from distcp.storage.folders import FolderMove
    from distcp.storage.local.storage import LocalStorage

    for folder, names in (("s1", "ab"), ("s2", "cd")):
        (tmp_path / folder).mkdir()
        for name in names:
            (tmp_path / folder / name).write_bytes(b"x")
    (tmp_path / "f1").mkdir()
    (tmp_path / "f2").mkdir()
    (tmp_path / "f2" / "mine").write_bytes(b"kept")
    inode = (tmp_path / "s1").stat().st_ino
    after: list[str] = []
    LocalStorage().publish_all([], lambda f: after.append(f.final), [
        FolderMove(str(tmp_path / "s1"), str(tmp_path / "f1"), ("a", "b"), (1, 1)),
        FolderMove(str(tmp_path / "s2"), str(tmp_path / "f2"), ("c", "d"), (1, 1))])
    assert (tmp_path / "f1").stat().st_ino == inode  # the staging folder itself
    assert sorted(p.name for p in (tmp_path / "f2").iterdir()) == ["c", "d", "mine"]
    assert (tmp_path / "f2" / "mine").read_bytes() == b"kept"
    assert sorted(Path(f).name for f in after) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("read_rows", [resultfiles.READ_ROWS, 2])
def test_a_publish_reads_a_small_results_file_once_for_its_renames_and_its_manifest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_rows: int) -> None:
    """Inside ``read_once`` the second reader gets what the file held when the first read
    it (here: the file is gone by then); a file past ``READ_ROWS`` is read each time."""
    monkeypatch.setattr(resultfiles, "READ_ROWS", read_rows)
    url = str(tmp_path / "u1-a.parquet")
    writer = ResultsWriter(1, url, {})
    for n in range(3):
        writer.add(_result(_file(n), staging=f"/stage/{n}", bytes_written=10), _file(n))
    writer.close()
    renames, manifest = publishing_of(url, {}), _staged(url)
    with resultfiles.read_once():
        assert publishing_of(url, {}) == renames
        Path(url).unlink()
        if read_rows == 2:  # three rows: never held
            with pytest.raises(FileNotFoundError):
                _staged(url)
            return
        assert _staged(url) == manifest
        with pytest.raises(FileNotFoundError):  # the second reader took it: not held twice
            _staged(url)
    assert getattr(resultfiles._reading, "held", None) is None
