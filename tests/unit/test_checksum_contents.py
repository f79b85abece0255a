"""``--checksum`` between trees without stored digests: planning leaves files of the same
size waiting on their contents; what reading both sides (or the stores' checksums)
finds settles them. Literal listings: no filesystem, no Spark."""

from __future__ import annotations

import pickle
from dataclasses import replace

from distcp.checking.compare import Outcome, Pair
from distcp.checking.digests import DigestResult
from distcp.checking.reads import digest_jobs, judge_read
from distcp.model import CopyableFile, FileStatus
from distcp.planning.contents import judge_unread, pairs_of, resolved, waiting
from distcp.planning.plan import CONTENTS, Plan, plan_dataset
from distcp.storage import storage_for


def cf(name: str, size: int = 10, mtime: float = 100.0) -> CopyableFile:
    return CopyableFile(FileStatus(f"/src/{name}", size, mtime), f"/dst/{name}", "u", "all")


def st(name: str, size: int = 10, mtime: float = 100.0, etag: str | None = None
       ) -> FileStatus:
    return FileStatus(f"/dst/{name}", size, mtime, etag=etag)


def checksum_plan(**files: FileStatus | None) -> Plan:
    target = {f"/dst/{n}": s for n, s in files.items() if s is not None}
    return Plan((plan_dataset("u", "/dst", [cf(n) for n in files], [], target,
                              compare="checksum"),))


def test_only_same_size_files_without_known_checksums_wait_on_their_contents() -> None:
    plan = checksum_plan(same=st("same"), bigger=st("bigger", size=11), new=None)
    d = plan.datasets[0]
    assert {a.file.destination: (a.reason, a.existing is not None) for a in d.copy} == {
        "/dst/same": (CONTENTS, True), "/dst/bigger": ("size differs", False),
        "/dst/new": ("new", False)}
    assert [a.file.destination for _, a in waiting(plan)] == ["/dst/same"]


def test_other_comparisons_leave_nothing_waiting() -> None:
    target = {"/dst/a": st("a", mtime=5.0)}
    for compare in ("default", "size-only", "ignore-existing"):
        plan = Plan((plan_dataset("u", "/dst", [cf("a")], [], target, compare=compare),))
        assert waiting(plan) == []
    overwritten = Plan((plan_dataset("u", "/dst", [cf("a")], [], target, overwrite=True,
                                     compare="checksum"),))
    assert waiting(overwritten) == []


def test_the_same_contents_are_skipped_different_or_unread_ones_copied() -> None:
    plan = checksum_plan(a=st("a"), b=st("b"), c=st("c"), d=st("d", size=3))
    outcomes = {"/dst/a": Outcome("/dst/a", "=", "same digest"),
                "/dst/b": Outcome("/dst/b", "*", "contents differ"),
                "/dst/c": Outcome("/dst/c", "!", "cannot read /dst/c: denied")}
    d = resolved(plan, outcomes).datasets[0]
    assert [(a.file.destination, a.reason) for a in d.skip] == [
        ("/dst/a", "same contents (--checksum): same digest")]
    assert {a.file.destination: a.reason for a in d.copy} == {
        "/dst/b": "contents differ (--checksum)",
        "/dst/c": "contents not compared (cannot read /dst/c: denied)",
        "/dst/d": "size differs"}
    assert all(a.existing is None for a in d.copy)  # settled: nothing waits any more
    assert d.files_skipped == 1


def test_skips_counted_where_decided_grow_by_those_found_the_same() -> None:
    plan = checksum_plan(a=st("a"))
    plan = Plan((replace(plan.datasets[0], skips_counted=7),))
    d = resolved(plan, {"/dst/a": Outcome("/dst/a", "=", "same digest")}).datasets[0]
    assert d.files_skipped == 8


def test_a_manifest_digest_stands_in_for_an_unchanged_source_only() -> None:
    plan = checksum_plan(a=st("a"), b=st("b"))
    manifest = {"/dst/a": [10, 100.0, "xxh3c128-1m:aa", "g"],
                "/dst/b": [10, 99.0, "xxh3c128-1m:bb", "g"]}  # b's source changed since
    pairs = pairs_of(waiting(plan), {"u": manifest})
    assert [(p.path, p.stored) for p in pairs] == [("/dst/a", "xxh3c128-1m:aa"), ("/dst/b", "")]
    jobs = digest_jobs(pairs, {}, {})
    assert [(j.key, j.side, j.url) for j in jobs] == [
        (0, "dst", "/dst/a"), (1, "src", "/src/b"), (1, "dst", "/dst/b")]
    got = judge_read(pairs, [DigestResult(0, "dst", "xxh3c128-1m:aa", 10),
                             DigestResult(1, "src", "xxh3c128-1m:1", 10)])
    assert [o.verdict for o in got] == ["=", "!"]  # b's destination was not read


def test_stores_checksums_decide_only_in_one_algorithm() -> None:
    def pair(src: str | None, dst: str | None) -> Pair:
        return Pair("/dst/a", FileStatus("s3://b/a", 10, 1.0, etag=src),
                    FileStatus("s3://c/a", 10, 1.0, etag=dst))

    def checksum(status: FileStatus, side: str) -> str | None:
        return storage_for(status.url, {}).stored_checksum(status)

    md5, other = '"' + "a" * 32 + '"', "b" * 32
    assert judge_unread(pair(md5, md5), checksum) == Outcome(
        "/dst/a", "=", f"same checksum in both stores (md5:{'a' * 32})")
    assert judge_unread(pair(md5, other), checksum).verdict == "*"  # type: ignore[union-attr]
    assert judge_unread(pair(md5, f"{'a' * 32}-2"), checksum) is None  # multipart: read
    assert judge_unread(pair(md5, None), checksum) is None
    local = Pair("/dst/a", FileStatus("/src/a", 10, 1.0), FileStatus("/dst/a", 10, 1.0))
    assert judge_unread(local, checksum) is None  # a local file's store keeps none
    empty = Pair("/dst/e", FileStatus("/src/e", 0, 1.0), FileStatus("/dst/e", 0, 9.0))
    assert judge_unread(empty, checksum) == Outcome("/dst/e", "=", "both empty")


def test_a_waiting_action_pickles_with_the_status_it_waits_on() -> None:
    action = checksum_plan(a=st("a")).datasets[0].copy[0]
    assert pickle.loads(pickle.dumps(action)) == action
    assert action.existing == st("a")
