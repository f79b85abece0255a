"""The executor side, run in-process on real local files (no Spark needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distcp.checksum import digest_of_bytes
from distcp.configuration import CopyConfiguration
from distcp.copying.task import TaskSpec, run_work_unit
from distcp.model import WorkUnit
from distcp.planning.listing import plan_all


def _unit(src: Path, dst: Path) -> tuple[WorkUnit, TaskSpec]:
    cfg = CopyConfiguration.build([str(src)], str(dst))
    files = plan_all(cfg, lambda m: None).plan.files_to_copy
    spec = TaskSpec("job", str(dst / ".pydistcp/staging/job"), str(dst / ".pydistcp/progress/job"))
    return WorkUnit(0, tuple(files)), spec


def test_staged_copies_are_verified_and_carry_attributes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(os.urandom(300_000))
    (src / "a.bin").chmod(0o600)
    os.utime(src / "a.bin", (1_600_000_000.5, 1_600_000_000.5))
    (src / "empty").write_bytes(b"")
    unit, spec = _unit(src, tmp_path / "dst")
    results = run_work_unit(unit, spec, attempt="t1")
    assert all(r.ok for r in results), results
    by_name = {Path(r.destination).name: r for r in results}
    staged = Path(by_name["a.bin"].staging)
    assert staged.read_bytes() == (src / "a.bin").read_bytes()
    assert by_name["a.bin"].checksum == digest_of_bytes((src / "a.bin").read_bytes())
    assert staged.stat().st_mode & 0o777 == 0o600
    assert staged.stat().st_mtime == 1_600_000_000.5
    assert "u0-t1" in str(staged)  # the attempt is part of the staging path
    assert by_name["empty"].bytes_written == 0
    assert not (tmp_path / "dst" / "a.bin").exists()  # tasks never write final paths


def test_vanished_source_is_a_failed_result_naming_the_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "gone.txt").write_text("x")
    (src / "kept.txt").write_text("y")
    unit, spec = _unit(src, tmp_path / "dst")
    (src / "gone.txt").unlink()
    results = {Path(r.origin).name: r for r in run_work_unit(unit, spec, attempt="t1")}
    assert results["kept.txt"].ok
    gone = results["gone.txt"]
    assert gone.status == "failed" and gone.error_type == "SourceReadError"
    assert gone.message == f"source vanished since listing: {src / 'gone.txt'}"
    assert gone.retryable


def test_a_source_that_became_a_directory_or_a_fifo_fails_alone_leaving_no_descriptor(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("dir", "fifo", "kept"):
        (src / name).write_text("x")
    unit, spec = _unit(src, tmp_path / "dst")
    (src / "dir").unlink()
    (src / "dir").mkdir()
    (src / "fifo").unlink()
    os.mkfifo(src / "fifo")
    fds = len(os.listdir("/proc/self/fd"))
    results = {Path(r.origin).name: r for r in run_work_unit(unit, spec, attempt="t1")}
    assert len(os.listdir("/proc/self/fd")) == fds  # each source's descriptor was closed
    assert results["kept"].ok
    for name in ("dir", "fifo"):
        assert results[name].error_type == "SourceReadError"
        assert results[name].message == (f"source changed while copying: {src / name} is no "
                                          "longer a regular file")
    staged = [p for p in (tmp_path / "dst").rglob("*") if p.is_file()]
    assert [p.name for p in staged if "progress" not in p.parts] == ["kept"]  # nothing else


def test_source_rewritten_during_copy_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x" * 1000)
    unit, spec = _unit(src, tmp_path / "dst")
    (src / "f").write_bytes(b"y" * 2000)
    [result] = run_work_unit(unit, spec, attempt="t1")
    assert result.status == "failed"
    assert "source changed while copying" in result.message
    staging = Path(spec.staging_root)
    assert not [p for p in staging.rglob("*") if p.is_file()]  # nothing half-staged left


@pytest.mark.parametrize("verify", ["digest", "size"])
def test_verify_modes_both_stage_identical_bytes(tmp_path: Path, verify: str) -> None:
    from dataclasses import replace

    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(50_000))
    unit, spec = _unit(src, tmp_path / "dst")
    [result] = run_work_unit(unit, replace(spec, verify=verify, buffer_size=4096), "t1")
    assert Path(result.staging).read_bytes() == (src / "f").read_bytes()


def test_a_listed_file_become_a_fifo_is_refused_without_waiting_for_a_writer(
        tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x" * 10)
    unit, spec = _unit(src, tmp_path / "dst")
    (src / "f").unlink()
    os.mkfifo(src / "f")  # opened for reading the usual way, this would block forever
    [result] = run_work_unit(unit, spec, attempt="t1")
    assert result.status == "failed" and result.error_type == "SourceReadError"
    assert result.message == (f"source changed while copying: {src / 'f'} is no longer a "
                              "regular file")


def test_the_plain_path_gives_the_stream_path_s_results(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain local file skips the stream layers (``task.plain``): same bytes, digest,
    attributes and result fields as through them."""
    from dataclasses import replace

    from distcp.copying import task

    src = tmp_path / "src"
    src.mkdir()
    for name, size in (("empty", 0), ("small", 100), ("big", 3 << 20)):
        (src / name).write_bytes(os.urandom(size))
        (src / name).chmod(0o640)
        os.utime(src / name, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    unit, spec = _unit(src, tmp_path / "dst")
    runs = {}
    plain_copies = []
    real = task._copy_plain
    monkeypatch.setattr(task, "_copy_plain",
                        lambda file, *args: plain_copies.append(file) or real(file, *args))
    from distcp.storage.local.storage import LocalStorage

    in_one_call: list[str] = []
    real_small = LocalStorage.stage_small_file

    def spy_small(self: LocalStorage, fd: int, st: os.stat_result, url: str,
                  **kw: object) -> object:
        done = real_small(self, fd, st, url, **kw)  # type: ignore[arg-type]
        if done is not None:
            in_one_call.append(Path(url).name)
        return done

    monkeypatch.setattr(LocalStorage, "stage_small_file", spy_small)
    for path in ("plain", "stream"):
        if path == "stream":
            monkeypatch.setattr(task, "_plain_file", lambda file, spec: False)
        runs[path] = {Path(r.destination).name: r for r in run_work_unit(unit, spec, path)}
    assert sorted(Path(f.destination).name for f in plain_copies) == ["big", "empty", "small"]
    assert in_one_call == ["small"]  # the empty and the big one through the writer
    for name in ("empty", "small", "big"):
        a, b = runs["plain"][name], runs["stream"][name]
        assert a.ok and b.ok
        assert replace(a, attempt="", staging="") == replace(b, attempt="", staging="")
        sa, sb = Path(a.staging).stat(), Path(b.staging).stat()
        assert Path(a.staging).read_bytes() == Path(b.staging).read_bytes() == \
            (src / name).read_bytes()
        assert (sa.st_mode, sa.st_mtime_ns) == (sb.st_mode, sb.st_mtime_ns)
        assert sa.st_mtime_ns == 1_600_000_000_123_456_789 and sa.st_mode & 0o777 == 0o640


@pytest.mark.parametrize(("sizes", "expected"), [
    ((0,), 64 << 10),
    ((10, 70_000), 128 << 10),
    ((64 << 10,), 64 << 10),
    ((100, 9 << 20), 8 << 20),
])
def test_a_unit_of_small_files_reads_into_a_buffer_the_size_of_its_largest(
        tmp_path: Path, sizes: tuple[int, ...], expected: int) -> None:
    """Mapping an 8 MiB buffer costs ~7 ms, once per copying thread of each unit: a unit
    whose files are all smaller gets its largest file rounded up to 64 KiB (at most
    ``--buffer-size``), and still copies every byte."""
    from distcp.copying.task import unit_buffer_size
    from distcp.storage.buffers import ReadBuffer

    src = tmp_path / "src"
    src.mkdir()
    for n, size in enumerate(sizes):
        (src / f"f{n}").write_bytes(os.urandom(size))
    unit, spec = _unit(src, tmp_path / "dst")
    assert len(ReadBuffer(unit_buffer_size(unit, spec)).view) == expected
    results = run_work_unit(unit, spec, attempt="t1")
    assert sorted(Path(r.staging).read_bytes() for r in results) == sorted(
        p.read_bytes() for p in src.iterdir())


def test_a_body_in_hand_shorter_than_its_listing_fails_its_file_and_stages_nothing(
        tmp_path: Path) -> None:
    """``_copy_body`` checks a body's length against the listing before staging it, as
    ``open_source`` does on the general way (the ETag proves the version; the size is
    checked all the same)."""
    from dataclasses import replace

    from distcp.copying import task
    from distcp.copying.results import ResultKey
    from distcp.model import FileStatus

    src = tmp_path / "src"
    src.mkdir()
    (src / "obj").write_bytes(b"x" * 64)
    unit, spec = _unit(src, tmp_path / "dst")
    [file] = unit.files
    file = replace(file, origin=FileStatus(url="s3://b/obj", size=64, mtime=1.0, etag="e"))
    folders = task.Folders(str(tmp_path / "staging"))
    key = ResultKey.of(file, 0, "a0")
    done = task._copy_body(file, key, folders, spec, b"short", bytearray(1 << 16))
    assert done is not None and done.status == "failed"
    assert done.error_type == "SourceReadError" and done.bytes_read == 0
    assert done.message.startswith(
        "source changed while copying: s3://b/obj (listed 64 bytes, read 5)")
    assert not any(p.is_file() for p in (tmp_path / "staging").rglob("*"))
    ok = task._copy_body(file, key, folders, spec, b"y" * 64, bytearray(1 << 16))
    assert ok is not None and ok.ok and Path(ok.staging).read_bytes() == b"y" * 64
