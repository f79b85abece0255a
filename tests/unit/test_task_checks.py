"""Checks in the executor, in-process on real local staging (no Spark): what a failed
check leaves behind (nothing) and how it is reported (as data, not retryable)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from distcp.configuration import CopyConfiguration
from distcp.copying.task import TaskSpec, run_work_unit
from distcp.model import WorkUnit
from distcp.planning.listing import plan_all
from distcp.quality import check_list


def _unit(src: Path, dst: Path, checks: list[str], **options: object
          ) -> tuple[WorkUnit, TaskSpec]:
    cfg = CopyConfiguration.build([str(src)], str(dst), check=checks, **options)
    files = plan_all(cfg, lambda m: None).plan.files_to_copy
    spec = TaskSpec("job", str(dst / ".pydistcp/staging/job"), str(dst / ".pydistcp/progress/job"),
                    checks=check_list(checks))
    return WorkUnit(0, tuple(files)), spec


def staged_files(dst: Path) -> list[str]:
    return sorted(p.name for p in (dst / ".pydistcp/staging").rglob("*") if p.is_file())


def test_a_failed_check_discards_the_staged_output_and_fails_the_file(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    good = gzip.compress(b"x" * 100_000)
    (src / "good.gz").write_bytes(good)
    (src / "cut.gz").write_bytes(good[:-4])
    unit, spec = _unit(src, dst, ["gzip"])
    results = {Path(r.origin).name: r for r in run_work_unit(unit, spec, attempt="t1")}
    assert results["good.gz"].ok and Path(results["good.gz"].staging).read_bytes() == good
    cut = results["cut.gz"]
    assert (cut.status, cut.error_type, cut.retryable, cut.staging) == (
        "failed", "QualityCheckError", False, "")
    assert cut.message == (f"{dst / 'cut.gz'}: quality check 'gzip' failed: truncated gzip "
                           "stream (it ends inside a member)")
    assert len(staged_files(dst)) == 1  # the good file's; the cut one was deleted


def test_one_failing_member_fails_the_archive_and_stages_nothing_of_it(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("a.txt", b"first"), ("empty.txt", b""), ("c.txt", b"third")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (src / "bundle.tar").write_bytes(buf.getvalue())
    unit, spec = _unit(src, dst, ["not-empty"], converters=("untar",))
    [result] = run_work_unit(unit, spec, attempt="t1")
    assert (result.status, result.message) == (
        "failed", (f"{dst / 'bundle' / 'empty.txt'}: quality check 'not-empty' failed: "
                  "the output is empty (0 bytes)"))
    assert staged_files(dst) == []
