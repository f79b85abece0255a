"""Sources whose outputs land on one file fail whole before anything publishes."""

from __future__ import annotations

from distcp.commit.collisions import COLLISION, refuse_collisions
from distcp.model import CopyableFile, FileStatus, TaskResult
from distcp.planning.plan import Action, DatasetPlan, Plan


def _file(name: str, dest: str) -> CopyableFile:
    return CopyableFile(FileStatus(f"/src/{name}", 10, 1.0), dest, "urn", "")


def _result(f: CopyableFile, dest: str, status: str = "ok") -> TaskResult:
    return TaskResult(guid=f.guid, unit_id=0, attempt="a", origin=f.origin.url,
                      destination=dest, dataset_urn="urn", file_set="",
                      status=status, staging=f"/stage/{dest}")  # type: ignore[arg-type]


def _plan(copy: list[CopyableFile], skip: list[CopyableFile] = ()) -> Plan:  # type: ignore[assignment]
    return Plan((DatasetPlan("urn", "/dst", tuple(Action(f, "new") for f in copy),
                             tuple(Action(f, "same") for f in skip), (), ()),))


def test_two_archives_holding_one_member_both_fail_whole_with_one_result_each() -> None:
    p, q, r = _file("p.tgz", "/dst/"), _file("q.tgz", "/dst/"), _file("r.tgz", "/dst/")
    results = [_result(p, "/dst/"), _result(p, "/dst/same"), _result(p, "/dst/p-only"),
               _result(q, "/dst/"), _result(q, "/dst/same"), _result(r, "/dst/r")]
    out = refuse_collisions(results, _plan([p, q, r]))
    assert [(o.origin, o.status, o.destination) for o in out] == [
        ("/src/p.tgz", "failed", "/dst/"), ("/src/q.tgz", "failed", "/dst/"),
        ("/src/r.tgz", "ok", "/dst/r")]
    assert out[0].error_type == COLLISION and out[0].staging == ""
    assert out[0].message == ("cannot publish /src/p.tgz: /src/q.tgz also writes /dst/same, "
                              "and neither is published; rename one at the source, or "
                              "expand the archive into its own folder")


def test_a_member_on_a_file_left_in_place_fails_its_archive_only() -> None:
    plain, s = _file("r", "/dst/r"), _file("s.tgz", "/dst/")
    out = refuse_collisions([_result(s, "/dst/r")], _plan([s], skip=[plain]))
    assert [o.status for o in out] == ["failed"]
    assert "/dst/r is already published from /src/r, which this run leaves in place" in \
        out[0].message


def test_shared_folders_and_failed_results_collide_with_nothing() -> None:
    p, q = _file("p.tgz", "/dst/"), _file("q.tgz", "/dst/")
    results = [_result(p, "/dst/"), _result(p, "/dst/d/"), _result(q, "/dst/"),
               _result(q, "/dst/d/"), _result(q, "/dst/d/a", status="failed"),
               _result(p, "/dst/d/a")]
    assert refuse_collisions(results, _plan([p, q])) == results
