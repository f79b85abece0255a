"""A task's memory is bounded by buffers, not by the members of an archive (issue 11.6).

The results of one file spill to local disk (``Outputs``), leave the task in rows of
pickles as they come (``distcp.spark.arrow``), an archive's journal record is written
as a segment of its own, and untar's record of member names spills to SQLite.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from distcp.commit.replay import read_journal
from distcp.converters import untar
from distcp.converters.seen import NameTable
from distcp.copying import outputs
from distcp.copying.outputs import Outputs
from distcp.model import TaskResult
from distcp.spark.arrow import pickled_rows, unpickled
from tests.fixtures.convert import run_convert
from tests.fixtures.members import make_tgz, task_peak


def _result(n: int, **fields: object) -> TaskResult:
    shared = "urn:shared"  # one object in every result: pickles refer back to it
    return TaskResult(**{"guid": f"g{n}", "unit_id": 0, "attempt": "a0", "origin": "o",
                         "destination": f"d/{n}", "status": "ok", "dataset_urn": shared,
                         "file_set": shared, **fields})  # type: ignore[arg-type]


def test_results_past_the_in_memory_ones_come_back_from_the_spill_in_order(
        tmp_path: Path) -> None:
    results = [_result(n, bytes_written=n) for n in range(50)]
    out = Outputs(str(tmp_path), in_memory=4)
    for r in results:
        out.append(r)
    out.amend_first(bytes_read=99, message="note")
    assert out.spilled and len(out) == 50 and out.all_ok
    expected = [_result(0, bytes_read=99, message="note"), *results[1:]]
    assert list(out) == expected
    assert list(out) == expected  # read twice: the task journals, then sends
    assert os.listdir(tmp_path) == []  # anonymous: nothing to leave behind if killed
    out.close()


def test_a_failed_result_is_counted_without_reading_the_spill(tmp_path: Path) -> None:
    out = Outputs(str(tmp_path), in_memory=1)
    for n in range(3):
        out.append(_result(n, status="failed" if n == 2 else "ok"))
    assert not out.all_ok
    assert out.verified() is None  # a failure is never journaled


def test_the_results_journaled_are_the_held_ones_amended_and_never_a_spill(
        tmp_path: Path) -> None:
    one = Outputs.one(_result(0))
    one.amend_first(bytes_read=7, requests=(("get", 1),))
    assert one.verified() == [_result(0, bytes_read=7, requests=(("get", 1),))]
    assert list(one) == one.verified()  # amended once, read alike both ways
    assert Outputs.one(_result(1, status="failed")).verified() is None
    spilled = Outputs(str(tmp_path), in_memory=1)
    for n in range(3):
        spilled.append(_result(n))
    assert spilled.all_ok and spilled.verified() is None  # journaled alone, streamed
    spilled.close()


def test_rewritten_applies_a_change_to_every_result(tmp_path: Path) -> None:
    out = Outputs(str(tmp_path), in_memory=2)
    for n in range(5):
        out.append(_result(n))
    again = out.rewritten(lambda r: TaskResult(**{**_fields(r), "staging": "s/" + r.guid}))
    assert [r.staging for r in again] == [f"s/g{n}" for n in range(5)]


def _fields(r: TaskResult) -> dict[str, object]:
    return {f: getattr(r, f) for f in r.__dataclass_fields__}


def test_results_leave_in_rows_of_bounded_size_and_come_back_equal() -> None:
    results = [_result(n, message="x" * (n % 7)) for n in range(5000)]
    rows = list(pickled_rows(iter(results), row_bytes=16 << 10))
    assert len(rows) > 10 and max(len(r) for r in rows) < (16 << 10) + 1024
    assert [r for row in rows for r in unpickled(row)] == results


def test_the_name_table_answers_the_same_once_spilled_to_sqlite() -> None:
    table = NameTable(in_memory=100)
    for n in range(1000):
        table.put(f"dir/{n}", n % 2)
    assert table.spilled
    assert [table.get(f"dir/{n}") for n in (0, 1, 998, 999)] == [0, 1, 0, 1]
    assert "dir/1000" not in table and table.get("dir") is None
    table.put("dir/5", 0)
    assert table.get("dir/5") == 0
    table.close()


def test_an_archive_of_many_members_is_journaled_whole_in_a_segment_of_its_own(
        tmp_path: Path) -> None:
    members = outputs.IN_MEMORY + 44  # past the results a task holds as a list
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    make_tgz(src / "many.tar.gz", members, per_dir=100)
    (dst / ".pydistcp/progress/job").mkdir(parents=True)  # as the driver prepares it
    run = run_convert(src, dst, "untar")
    assert not run.failed and len(run.results) == members + 1  # + the root
    staged = {r.destination: Path(r.staging).read_bytes() for r in run.results
              if r.staging and not r.destination.endswith("/")}
    assert len(staged) == members
    assert staged[f"{dst}/many/d00002/member-0000299.txt"] == b"00000299"
    [(planned, journaled)] = read_journal(str(dst / ".pydistcp"), {}, "job").values()
    assert planned == f"{dst}/many/"
    assert [(r.destination, r.staging, r.bytes_written) for r in journaled] == [
        (r.destination, r.staging, r.bytes_written) for r in run.results]


def test_an_archive_whose_last_member_is_a_duplicate_stages_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    with tarfile.open(src / "dup.tar", "w") as tar:
        for n in [*range(outputs.IN_MEMORY + 10), 0]:
            info = tarfile.TarInfo(f"m{n}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    run = run_convert(src, dst, "untar")
    [failed] = run.results
    assert "duplicate member 'm0'" in failed.message and run.staged() == []


def test_a_task_peak_memory_does_not_grow_with_the_members_of_an_archive(
        tmp_path: Path) -> None:
    """The Python worker's peak RSS at 10,000 and at 50,000 members (a 200,000-member
    archive took it to 571 MiB before the results spilled and streamed)."""
    peaks = {}
    for members in (10_000, 50_000):
        archive = make_tgz(tmp_path / f"m{members}.tar.gz", members)
        work = tmp_path / f"work{members}"
        work.mkdir()
        out = task_peak(archive, work)
        assert out["results"] == members + 1 and out["failed"] == []
        peaks[members] = out["peak_rss_mib"]
    assert peaks[50_000] - peaks[10_000] < 20, peaks



def test_skipped_links_past_the_hundredth_are_counted_not_named(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    with tarfile.open(src / "links.tar", "w") as tar:
        info = tarfile.TarInfo("file")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
        for n in range(untar.NOTES_MAX + 50):
            link = tarfile.TarInfo(f"l{n}")
            link.type, link.linkname = tarfile.SYMTYPE, "file"
            tar.addfile(link)
    run = run_convert(src, tmp_path / "dst", "untar", archive_links="skip")
    assert not run.failed
    message = run.results[0].message
    assert "symbolic link 'l99' -> 'file'" in message and "'l100'" not in message
    assert message.endswith("; and 50 more links not expanded")


def test_the_first_result_is_amended_even_when_every_result_spilled(tmp_path: Path) -> None:
    out = Outputs(str(tmp_path), in_memory=0)
    for n in range(3):
        out.append(_result(n))
    out.amend_first(bytes_read=7)
    assert [r.bytes_read for r in out] == [7, 0, 0]
