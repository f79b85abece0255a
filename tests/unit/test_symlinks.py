"""``--links copy`` on the executor and in the commit steps, in-process on real local
files (no Spark): staged as links, verified, published, kept for recovery, deleted."""

from __future__ import annotations

import os
from pathlib import Path

from distcp.checksum import digest_of_bytes
from distcp.commit.recovery import RecoveryArea
from distcp.commit.steps import CommitContext, DeletePaths, PublishFiles
from distcp.configuration import CopyConfiguration
from distcp.copying.task import TaskSpec, run_work_unit
from distcp.model import CopyableFile, WorkUnit
from distcp.planning.listing import plan_all


def _plan(src: Path, dst: Path) -> tuple[list[CopyableFile], TaskSpec]:
    cfg = CopyConfiguration.build([str(src)], str(dst), links="copy")
    files = plan_all(cfg, lambda m: None).plan.files_to_copy
    spec = TaskSpec("job", str(dst / ".pydistcp/staging/job"), str(dst / ".pydistcp/progress/job"))
    return files, spec


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"data")
    (src / "rel").symlink_to("a")
    (src / "dang").symlink_to("../nowhere/x")
    os.utime(src / "rel", ns=(1_600_000_000_000_000_001,) * 2, follow_symlinks=False)
    return src


def test_links_are_staged_as_links_with_their_text_size_digest_and_mtime(
        tmp_path: Path) -> None:
    src = _src(tmp_path)
    files, spec = _plan(src, tmp_path / "dst")
    results = {Path(r.destination).name: r for r in
               run_work_unit(WorkUnit(0, tuple(files)), spec, attempt="t1")}
    assert all(r.ok for r in results.values()), results
    rel, dang = Path(results["rel"].staging), Path(results["dang"].staging)
    assert rel.is_symlink() and os.readlink(rel) == "a"
    assert dang.is_symlink() and os.readlink(dang) == "../nowhere/x"
    assert results["rel"].link_target == "a" and results["a"].link_target is None
    assert results["dang"].bytes_written == len("../nowhere/x")
    assert results["dang"].checksum == digest_of_bytes(b"../nowhere/x")
    assert rel.lstat().st_mtime_ns == 1_600_000_000_000_000_001
    assert not rel.resolve().is_relative_to(src)  # nothing was written through the link
    assert (src / "a").read_bytes() == b"data"


def test_a_link_retargeted_after_listing_fails_and_stages_nothing(tmp_path: Path) -> None:
    src = _src(tmp_path)
    files, spec = _plan(src, tmp_path / "dst")
    (src / "rel").unlink()
    (src / "rel").symlink_to("elsewhere")
    results = {Path(r.destination).name: r for r in
               run_work_unit(WorkUnit(0, tuple(files)), spec, attempt="t1")}
    failed = results["rel"]
    assert (failed.status, failed.error_type) == ("failed", "SourceReadError")
    assert failed.message == (f"source changed while copying: {src}/rel (link to "
                              "'elsewhere', listed 'a')")
    assert failed.retryable and not failed.staging
    staged = sorted(p.name for p in Path(spec.staging_root).rglob("*") if p.is_symlink())
    assert len(staged) == 1  # "dang" only


def test_staged_links_publish_replace_a_link_and_survive_recovery(tmp_path: Path) -> None:
    src = _src(tmp_path)
    dst = tmp_path / "dst"
    files, spec = _plan(src, dst)
    by_name = {Path(r.destination).name: r for r in
               run_work_unit(WorkUnit(0, tuple(files)), spec, attempt="t1")}
    ctx = CommitContext()
    # kept for recovery: the relative "a" resolves to nothing there, and must not need to
    recovery = RecoveryArea(str(dst / ".pydistcp"), {})
    recovery.keep(by_name["rel"].guid, by_name["rel"].destination, [by_name["rel"]])
    [kept] = recovery.take(next(f for f in files if f.destination.endswith("/rel"))) or []
    assert os.readlink(kept.staging) == "a"
    (dst / "rel").symlink_to("old-target")  # the destination had another link there
    publish = PublishFiles(((kept.staging, kept.destination, kept.bytes_written),))
    assert not publish.verify(ctx)
    publish.execute(ctx)
    assert publish.verify(ctx)  # judged from the link's own size, not its target's
    assert os.readlink(dst / "rel") == "a" and (dst / "rel").lstat().st_size == 1


def test_delete_removes_a_link_to_a_directory_and_never_its_content(tmp_path: Path) -> None:
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "x").write_bytes(b"x")
    (tmp_path / "stale").symlink_to(tmp_path / "keep")
    (tmp_path / "gone").symlink_to("nowhere")
    step = DeletePaths((str(tmp_path / "stale"), str(tmp_path / "gone")))
    assert not step.verify(CommitContext())
    step.execute(CommitContext())
    assert step.verify(CommitContext())
    assert not os.path.lexists(tmp_path / "stale") and not os.path.lexists(tmp_path / "gone")
    assert (tmp_path / "keep" / "x").read_bytes() == b"x"
