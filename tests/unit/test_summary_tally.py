"""Stages report Tallies; the run adds them to its Summary, whose JSON is unchanged."""

from __future__ import annotations

import json

from distcp.summary import CopyTally, Failure, Summary, Tally, tally_of

#: The keys of ``--summary-json`` (issue 10 moved who counts, not what is written).
SUMMARY_KEYS = {
    "job_id", "files_copied", "files_skipped", "files_failed", "files_deleted",
    "files_not_published", "files_recovered", "bytes_recovered", "sequences_replayed",
    "sequences_set_aside", "recovery_expired", "destination_listings", "bytes_copied",
    "links_copied", "bytes_read", "bytes_server_side", "ranges_resumed", "bytes_resumed",
    "uploads_aborted", "requests", "requests_per_file", "notes", "directories_created",
    "datasets", "duration_s", "failures", "entries_skipped", "phases", "dry_run", "plan",
    "log_file", "throughput_bytes_per_s", "ok",
    # issue 13 point 4 (--catalog-table): registrations, apart from file failures
    "partitions_registered", "catalog_failures", "branches", "sources_deleted",
    "per_dataset",
    # issue 11 point 2: rows collected from planning on Spark, results from copying
    "plan_rows_collected", "results_collected",
    # issue 36 point 1: how the run planned and copied, and why
    "strategy",
    # issue 38 point 7: --checksum compares contents (files, those the same, bytes read)
    "files_compared", "files_compared_same", "bytes_compared",
    # issue 38 point 6: registrations of earlier runs that failed again (fail no run)
    "catalog_pending",
    # issue 38 point 6: of the files recovered, those replayed commits published
    "files_replayed", "bytes_replayed"}


def test_tallies_add_up_in_order_into_the_summary() -> None:
    replay = Tally(sequences_replayed=1, files_recovered=2, bytes_recovered=30,
                   failures=(Failure("urn:a", "replay failed", "urn:a", files=0),))
    publish = tally_of([Tally(notes=("n1",)),
                        Tally(failures=(Failure("/s/x", "boom"),)),
                        Tally(files_copied=3, bytes_copied=10, notes=("n2",))])
    s = Summary(job_id="j", notes=["split note"])
    s.add(replay)
    s.add(publish)
    assert (s.sequences_replayed, s.files_recovered, s.bytes_recovered) == (1, 2, 30)
    assert (s.files_copied, s.bytes_copied, s.files_failed) == (3, 10, 1)
    assert [f.path for f in s.failures] == ["urn:a", "/s/x"]
    assert s.notes == ["split note", "n1", "n2"]
    assert not s.ok


def test_the_summary_json_keeps_its_keys_and_holds_no_tally() -> None:
    s = Summary(job_id="j")
    s.add(Tally(files_copied=1, failures=(Failure("p", "e"),)))
    data = json.loads(s.to_json())
    assert set(data) == SUMMARY_KEYS
    assert data["failures"] == [{"path": "p", "error": "e", "dataset": "", "files": 1}]
    assert data["files_copied"] == 1 and data["files_failed"] == 1


def test_copy_tallies_add_up_into_the_summary() -> None:
    """The copy adapters return what they report (issue 36: phases return values): the
    first Spark start counts, copy times and requests add up, notes keep their order,
    and the way the run copied is the summary's ``strategy["copy"]``."""
    collected = CopyTally(results_collected=4, bytes_read=100, bytes_server_side=7,
                          requests=(("get", 2), ("put", 1)), notes=("split note",),
                          ranges_resumed=1, bytes_resumed=8,
                          phases=(("spark_start_s", 2.0), ("copy_s", 1.25), ("join_s", 0.5)))
    kept = CopyTally(bytes_read=50, requests=(("put", 3),),
                     phases=(("spark_start_s", 0.1), ("copy_s", 0.5)))
    chosen = CopyTally(strategy=({"strategy": "collected", "why": "few files"},))
    s = Summary(job_id="j", notes=["replay note"], phases={"plan_s": 0.3})
    s.add_copy(collected + kept + chosen)
    assert (s.results_collected, s.bytes_read, s.bytes_server_side) == (4, 150, 7)
    assert (s.ranges_resumed, s.bytes_resumed) == (1, 8)
    assert s.requests == {"get": 2, "put": 4}
    assert s.notes == ["replay note", "split note"]
    assert s.phases == {"plan_s": 0.3, "spark_start_s": 2.0, "copy_s": 1.75, "join_s": 0.5}
    assert s.strategy == {"copy": [{"strategy": "collected", "why": "few files"}]}
    s.add_copy(CopyTally(phases=(("copy_s", 0.25),)))
    assert s.phases["copy_s"] == 2.0 and s.strategy["copy"]  # a later copy keeps the record


def test_recovered_files_are_said_where_they_are_counted() -> None:
    """Copies the recovery area gave back are of the files copied ("of which"); files a
    replayed commit published before planning are of those the plan skipped: the first
    line's copied, skipped and failed add up to the run's sources either way."""
    s = Summary(job_id="j")
    s.add(Tally(sequences_replayed=1, files_recovered=4, bytes_recovered=40,
                files_replayed=4, bytes_replayed=40))
    s.add(Tally(files_copied=3, bytes_copied=30, files_recovered=2, bytes_recovered=20))
    s.files_skipped = 4
    lines = s.render().splitlines()
    assert lines[0].startswith("copied 3 files (30 B), skipped 4, failed 0")
    assert lines[1] == ("of which recovered 2 files (20 B) copied by earlier runs, without "
                        "reading their sources again")
    assert ("recovered 4 files (40 B) copied by earlier runs, without reading their sources "
            "again: their commits, finished before planning, published them, and the plan "
            "found them in place (skipped)") in lines
    assert (s.files_recovered, s.files_replayed) == (6, 4)
