"""``pydistcp check``'s pure parts: pairing listings, verdicts, packing, the report."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from pyspark import cloudpickle

import distcp
from distcp.checking.compare import (
    Outcome,
    Pair,
    judge_digests,
    judge_listed,
    judge_present,
    pair_listings,
    sides_to_read,
    stored_digest,
)
from distcp.checking.digests import DigestJob, DigestResult, DigestUnit, digest_one, pack
from distcp.checking.report import CheckReport
from distcp.checksum import digest_of_bytes
from distcp.datasets.versions import TableLag
from distcp.errors import ConfigurationError
from distcp.model import FileStatus
from distcp.storage import spec_for


def st(url: str, size: int = 10, mtime: float = 100.0, link: str | None = None) -> FileStatus:
    return FileStatus(url, size, mtime, link_target=link)


def rel(url: str) -> str:
    return url.removeprefix("/d/")


def test_pairs_are_the_union_of_both_listings_sorted_with_the_manifest_digest() -> None:
    src = {"/d/b": st("/s/b"), "/d/a": st("/s/a", mtime=5.0)}
    dst = {"/d/a": st("/d/a"), "/d/c": st("/d/c")}
    manifest = {"/d/a": [10, 5.0, "xxh3c128-1m:1", "g"], "/d/b": [10, 99.0, "xxh3c128-1m:2", "g"]}
    pairs = pair_listings(src, dst, manifest, rel)
    assert [(p.path, p.src is not None, p.dst is not None, p.stored) for p in pairs] == [
        ("a", True, True, "xxh3c128-1m:1"), ("b", True, False, ""), ("c", False, True, "")]


@pytest.mark.parametrize(("record", "expected"), [
    ([10, 100.0, "xxh3c128-1m:1", "g"], "xxh3c128-1m:1"),   # the source is as it was published
    ([10, 100.5, "xxh3c128-1m:1", "g"], ""),        # touched since
    ([11, 100.0, "xxh3c128-1m:1", "g"], ""),        # resized since
    ([10, 100.0, "", "g"], ""),             # no digest recorded (server-side copy)
    ([-1, 100.0, "", "g"], ""),             # a converted file's planned destination
    ([10, 100.0, "md5:1", "g"], ""),        # another algorithm's: not comparable
    (None, ""),
])
def test_a_stored_digest_stands_in_only_for_an_unchanged_source(record: list | None,
                                                                 expected: str) -> None:
    assert stored_digest(st("/s/a"), record) == expected


def test_listings_alone_decide_missing_sides_sizes_links_and_size_only() -> None:
    assert judge_listed(Pair("a", st("/s/a"), None)) == Outcome("a", "-", "missing on destination")
    assert judge_listed(Pair("a", None, st("/d/a"))) == Outcome("a", "+", "missing on source")
    assert judge_listed(Pair("a", st("/s/a", 3), st("/d/a", 4))) == Outcome(
        "a", "*", "sizes differ: source 3 bytes, destination 4")
    assert judge_listed(Pair("a", st("/s/a"), st("/d/a"))) is None  # digests decide
    assert judge_listed(Pair("a", st("/s/a"), st("/d/a")), size_only=True).verdict == "="
    same = judge_listed(Pair("l", st("/s/l", link="t"), st("/d/l", link="t")))
    other = judge_listed(Pair("l", st("/s/l", link="t"), st("/d/l", link="u")))
    assert (same and same.verdict, other and other.verdict) == ("=", "*")


def test_the_destination_is_always_read_the_source_only_without_a_stored_digest() -> None:
    assert sides_to_read(Pair("a", st("/s/a"), st("/d/a"))) == ("src", "dst")
    assert sides_to_read(Pair("a", st("/s/a"), st("/d/a"), stored="xxh3c128-1m:1")) == ("dst",)


def test_digests_judge_equal_differing_and_unreadable() -> None:
    plain = Pair("a", st("/s/a"), st("/d/a"))
    stored = Pair("a", st("/s/a"), st("/d/a"), stored="x:1")
    assert judge_digests(plain, {"src": "x:1", "dst": "x:1"}, {}).verdict == "="
    assert judge_digests(stored, {"dst": "x:1"}, {}) == Outcome("a", "=", "same stored digest")
    bad = judge_digests(stored, {"dst": "x:2"}, {})
    assert bad.verdict == "*" and "x:1 at the source, x:2 at the destination" in bad.reason
    err = judge_digests(plain, {"src": "x:1"}, {"dst": "cannot read /d/a: gone"})
    assert err == Outcome("a", "!", "cannot read /d/a: gone")


def _job(key: int, size: int, side: str = "dst") -> DigestJob:
    return DigestJob(key, side, f"/d/{key}", size, spec_for("/d"))


def test_pack_balances_bytes_and_keeps_every_job_once() -> None:
    jobs = [_job(0, 100), _job(1, 60), _job(2, 50), _job(3, 1), _job(4, 0)]
    groups = pack(jobs, 2)
    assert sorted(j.key for g in groups for j in g) == [0, 1, 2, 3, 4]
    assert sorted(sum(j.size for j in g) for g in groups) == [101, 110]  # 100+1 and 60+50
    assert len(pack(jobs[:1], 8)) == 1 and pack([], 4) == []


def test_digest_one_reads_the_file_or_says_why_not(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"hello" * 1000)
    job = DigestJob(7, "src", str(tmp_path / "f"), 5000, spec_for(str(tmp_path)))
    assert digest_one(job, bytearray(4096)) == DigestResult(7, "src",
                                                            digest_of_bytes(b"hello" * 1000), 5000)
    gone = digest_one(DigestJob(8, "dst", str(tmp_path / "nope"), 1, spec_for(str(tmp_path))),
                      bytearray(16))
    assert (gone.key, gone.side, gone.digest) == (8, "dst", "")
    assert gone.error.startswith(f"cannot read {tmp_path / 'nope'}")


def test_values_sent_to_executors_round_trip_through_pickle() -> None:
    unit = DigestUnit(3, (_job(1, 5),), "/d/.pydistcp/progress/check-x", (("k", "v"),))
    for dumps in (pickle.dumps, cloudpickle.dumps):
        assert pickle.loads(dumps(unit)) == unit
        result = DigestResult(1, "dst", "x:1", 5)
        assert pickle.loads(dumps(result)) == result


def test_report_counts_lines_files_and_json(tmp_path: Path) -> None:
    report = CheckReport("/s", "/d", outcomes=[
        Outcome("a", "=", "same digest"), Outcome("b", "*", "contents differ"),
        Outcome("c", "-", "missing on destination"), Outcome("d", "+", "missing on source"),
        Outcome("e", "!", "cannot read")])
    assert not report.ok and report.counts == {"match": 1, "differ": 1, "missing_on_dst": 1,
                                               "missing_on_src": 1, "error": 1}
    assert report.render().startswith("1 matching, 1 differing, 1 missing on destination, "
                                      "1 missing on source, 1 errors")
    targets = {"combined": str(tmp_path / "all"), "differ": str(tmp_path / "differ"),
               "missing_on_dst": str(tmp_path / "mod"), "match": None}
    report.write(targets)
    assert (tmp_path / "all").read_text() == "= a\n* b\n- c\n+ d\n! e\n"
    assert (tmp_path / "differ").read_text() == "b\n"
    assert (tmp_path / "mod").read_text() == "c\n"
    assert not (tmp_path / "None").exists()
    import json

    data = json.loads(report.to_json())
    assert data["ok"] is False and [d["path"] for d in data["differences"]] == list("bcde")
    assert CheckReport(outcomes=[Outcome("a", "=", "")]).ok
    one_way = CheckReport(one_way=True, outcomes=[Outcome("a", "=", "")])
    assert "missing on source" not in one_way.render()


def test_task_counters_are_written_at_most_once_a_second_and_summed(tmp_path: Path) -> None:
    from distcp.checking.digests import Counter
    from distcp.spark.check import read_counters

    folder = str(tmp_path / "progress")
    (tmp_path / "progress").mkdir()
    first = Counter(DigestUnit(0, (), folder), "s1p0a0")
    first.add(100)  # within the second: nothing written yet
    assert read_counters(folder, {}) == (0, 0)
    first.last -= Counter.INTERVAL_S
    first.add(50)
    assert read_counters(folder, {}) == (2, 150)
    second = Counter(DigestUnit(1, (), folder), "s1p1a0")
    second.add(7)
    second.write()
    retry = Counter(DigestUnit(1, (), folder), "s1p1a1")  # a retried attempt counts anew
    retry.write()
    assert read_counters(folder, {}) == (3, 157)
    Counter(DigestUnit(2, ()), "x").write()  # no folder: counts nothing, writes nothing
    assert sorted(p.name for p in (tmp_path / "progress").iterdir()) == [
        "u0-s1p0a0.json", "u1-s1p1a0.json", "u1-s1p1a1.json"]


def test_check_refuses_the_stream_finder_before_listing_anything(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as refused:
        distcp.check(str(tmp_path / "nowhere"), str(tmp_path / "dst"), finder="stream")
    assert str(refused.value) == ("check --finder stream: not supported: check the topic "
                                  "folders as plain folders (--dataset-glob)")
    assert not (tmp_path / "dst").exists()


def test_files_wanted_only_at_the_destination_are_present_or_missing_never_read() -> None:
    dst = {"/d/metadata/v2.metadata.json": st("/d/metadata/v2.metadata.json", 999),
           "/d/data/x.parquet": st("/d/data/x.parquet")}
    got = judge_present(["/d/metadata/snap.avro", "/d/metadata/v2.metadata.json",
                         "/d/metadata/snap.avro"], dst, rel)
    assert got == [
        Outcome("metadata/snap.avro", "-", "missing on destination"),
        Outcome("metadata/v2.metadata.json", "=", "present (rewritten for the destination: "
                                                  "not compared with the source's)")]
    assert judge_present([], dst, rel) == []


def test_a_table_behind_its_source_is_a_line_before_the_counts_and_in_the_json() -> None:
    import json

    lag = TableLag("/s/t", "snapshot 41 (metadata version 2)",
                   "snapshot 97 (metadata version 8)", 5, "snapshots")
    report = CheckReport("/s/t", "/d/t", outcomes=[Outcome("a", "=", "same digest")],
                         tables=[lag, TableLag("/s/u", "version 3", "version 3", 0,
                                               "versions")])
    lines = report.render().splitlines()
    assert lines[:2] == [
        ("table /s/t: the destination holds snapshot 41 (metadata version 2), the source is "
         "at snapshot 97 (metadata version 8): 5 snapshots behind (compared at the "
         "destination's)"),
        ("table /s/u: the destination holds version 3, the source is at version 3: 0 "
         "versions behind (compared at the destination's)")]
    assert lines[2].startswith("1 matching, 0 differing") and len(lines) == 3
    assert report.ok  # behind is not a difference
    data = json.loads(report.to_json())
    assert data["tables"][0] == {"table": "/s/t", "destination": lag.destination,
                                 "source": lag.source, "behind": 5, "unit": "snapshots"}
    assert "\n" not in CheckReport().render()
