"""Stream datasets' partition patterns and watermark arithmetic (pure; no Spark)."""

from __future__ import annotations

import calendar
import json
from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.datasets.partitions import (
    PartitionPattern,
    StreamMarks,
    Watermarks,
    Window,
    advance,
    expected_high,
    late_name,
    listing_floor,
    span,
)
from distcp.errors import ConfigurationError
from distcp.state.store import DatasetState, StateStore, urn_key


def utc(*parts: int) -> float:
    return float(calendar.timegm((*parts, *(0,) * (6 - len(parts)))))


def test_the_default_pattern_reads_hourly_folders() -> None:
    p = PartitionPattern.parse(None)
    assert (p.text, len(p.levels), p.unit) == ("yyyy/MM/dd/HH", 4, "hour")
    units: dict[str, int] | None = {}
    for depth, name in enumerate(["2026", "11", "23", "10"]):
        units = p.match(depth, name, units)
    assert units == {"year": 2026, "month": 11, "day": 23, "hour": 10}
    assert p.match(0, "_temporary") is None
    assert p.match(1, "13", {"year": 2026}) is None  # no month 13
    assert p.match(2, "31", {"year": 2026, "month": 2}) is None
    assert p.match(3, "24", {"year": 2026, "month": 1, "day": 1}) is None


def test_a_pattern_with_literals_in_its_folders() -> None:
    p = PartitionPattern.parse("dt=yyyy-MM-dd/hr=HH")
    assert p.match(0, "dt=2026-02-28") == {"year": 2026, "month": 2, "day": 28}
    assert p.match(0, "dt=2026-02-30") is None
    assert p.match(0, "2026-02-28") is None
    assert p.match(1, "hr=07", {"year": 2026, "month": 2, "day": 28}) == \
        {"year": 2026, "month": 2, "day": 28, "hour": 7}
    assert p.unit == "hour"


@pytest.mark.parametrize("bad", ["MM/yyyy", "yyyy/dd", "yyyy/yyyy", "topic", "yyyy//MM"])
def test_a_bad_pattern_names_the_flag(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="--partition-pattern"):
        PartitionPattern.parse(bad)


def test_span_of_a_partition_and_of_the_folders_above_it() -> None:
    assert span({"year": 2026, "month": 11, "day": 23, "hour": 10}) == \
        (utc(2026, 11, 23, 10), utc(2026, 11, 23, 11))
    assert span({"year": 2026, "month": 12}) == (utc(2026, 12, 1), utc(2027, 1, 1))
    assert span({"year": 2026}) == (utc(2026, 1, 1), utc(2027, 1, 1))
    assert span({"year": 2026, "month": 2, "day": 28}) == (utc(2026, 2, 28), utc(2026, 3, 1))


def test_the_window_prunes_folders_older_than_low_minus_lookback() -> None:
    low = utc(2026, 11, 23, 10)
    w = Window(listing_floor(low, 3 * 3600), now=utc(2026, 11, 23, 12))
    assert w.floor == utc(2026, 11, 23, 7)
    assert not w.may_hold(*span({"year": 2026, "month": 11, "day": 22}))  # the day before
    assert w.may_hold(*span({"year": 2026, "month": 11, "day": 23}))
    assert not w.admits(*span({"year": 2026, "month": 11, "day": 23, "hour": 6}))
    assert w.admits(*span({"year": 2026, "month": 11, "day": 23, "hour": 7}))
    assert listing_floor(None, 3600) is None and listing_floor(low, None) is None


def test_min_and_max_age_count_from_a_partitions_end() -> None:
    now = utc(2026, 11, 23, 12, 30)
    w = Window(None, now, min_age=1800, max_age=3 * 3600)
    hour = lambda h: span({"year": 2026, "month": 11, "day": 23, "hour": h})
    assert not w.admits(*hour(12))  # still open
    assert w.admits(*hour(11))  # closed 30 minutes ago
    assert w.admits(*hour(9))  # closed at 10:00, 2.5 h ago
    assert not w.admits(*hour(8))  # closed at 9:00, 3.5 h ago
    assert not w.may_hold(*span({"year": 2026, "month": 11, "day": 22}))


def test_watermark_arithmetic_over_three_runs() -> None:
    h = [utc(2026, 11, 23, n) for n in range(24)]
    # run 1 plans 10 and 11, publishes both
    marks = None
    for t in (h[10], h[11]):
        marks = advance(marks, None, expected_high(None, [h[10], h[11]]), t)
    assert marks == Watermarks(None, h[11], h[11])
    # run 2: low is run 1's actual high; it plans 12 and 13, publishes only 12
    low = marks.actual_high
    marks = advance(marks, low, expected_high(low, [h[12], h[13]]), h[12])
    assert marks == Watermarks(h[11], h[13], h[12])
    # run 3: a late file in 10 never moves the actual high back
    low = marks.actual_high
    marks = advance(marks, low, expected_high(low, [h[10], h[13]]), h[10])
    assert marks == Watermarks(h[12], h[13], h[12])
    # a run with nothing new keeps its low as the expected high
    assert advance(marks, h[12], expected_high(h[12], []), None) == Watermarks(h[12], h[12], h[12])


def test_stream_marks_know_late_sets_by_their_partition() -> None:
    m = StreamMarks(1.0, 2.0, (("2026/11/23/10", 5.0), (late_name("2026/11/23/10"), 5.0)))
    assert m.time_of("2026/11/23/10+late") == 5.0
    assert m.time_of("all") is None


def test_a_version_2_state_document_reads_and_saves_as_version_3(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), {})
    urn = "/data/topic"
    (tmp_path / "datasets").mkdir()
    v2 = {"version": 2, "urn": urn, "watermark": 1700000200.0, "applied": ["a:wm"],
          "runs": [{"job_id": "j0"}], "segments": [], "garbage": [], "next_seq": 4}
    (tmp_path / "datasets" / f"{urn_key(urn)}.json").write_text(json.dumps(v2))
    state = store.load(urn)
    assert (state.watermark, state.watermarks, state.next_seq) == (1700000200.0, None, 4)
    state.watermarks = Watermarks(1.0, 3.0, 2.0)
    store.save(state)
    doc = json.loads(Path(store.url_of(urn)).read_text())
    assert doc["version"] == 3
    assert doc["watermarks"] == {"low": 1.0, "expected_high": 3.0, "actual_high": 2.0}
    assert (doc["watermark"], doc["applied"], doc["runs"], doc["next_seq"]) == \
        (1700000200.0, ["a:wm"], [{"job_id": "j0"}], 4)
    again = StateStore(str(tmp_path), {}).load(urn)
    assert (again.low_watermark, again.expected_high_watermark,
            again.actual_high_watermark) == (1.0, 3.0, 2.0)


def test_a_newer_state_document_is_refused_not_rewritten(tmp_path: Path) -> None:
    from distcp.errors import StateError

    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / f"{urn_key('u')}.json").write_text(
        json.dumps({"version": 99, "urn": "u"}))
    with pytest.raises(StateError, match="version 99"):
        StateStore(str(tmp_path), {}).load("u")
    assert DatasetState("u").watermarks is None


@pytest.mark.parametrize(("options", "complaint"), [
    ({"lookback": "24h"}, "--lookback needs --finder stream"),
    ({"ready_marker": "_SUCCESS"}, "--ready-marker needs --finder stream"),
    ({"finder": "glob"}, "--finder glob needs --dataset-glob"),
    ({"finder": "stream", "ready_marker": "a/b"}, "--ready-marker 'a/b'"),
    ({"finder": "stream", "delete": True}, "takes no --files-from"),
    ({"finder": "nope"}, "--finder must be single, glob, stream, delta or iceberg"),
    ({"finder": "delta", "delete": True}, "--finder delta copies a table's new versions"),
    ({"finder": "delta", "converters": ("gunzip",)}, "takes no --files-from, "
     "--files-from-manifest, --delete, --convert, nor move"),
    ({"finder": "delta", "partition_pattern": "yyyy"}, "--partition-pattern needs --finder "
     "stream"),
])
def test_stream_settings_are_checked_with_the_flag_named(options, complaint) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match=complaint.replace("(", r"\(")):
        CopyConfiguration.build(["/src"], "/dst", **options)


def test_lookback_reads_a_duration() -> None:
    cfg = CopyConfiguration.build(["/src"], "/dst", finder="stream", lookback="24h")
    assert cfg.lookback == 86400.0


def test_the_stream_finder_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    from distcp.errors import PlanningError
    from distcp.finders.stream import StreamDatasetsFinder

    (tmp_path / "src" / "clicks").mkdir(parents=True)
    (tmp_path / "src" / "notes.txt").write_text("not a topic")
    cfg = CopyConfiguration.build([str(tmp_path / "src")], str(tmp_path / "dst"),
                                  finder="stream", partition_pattern="HH/yyyy")
    with pytest.raises(ConfigurationError, match="--partition-pattern 'HH/yyyy'"):
        list(StreamDatasetsFinder(cfg).find())
    cfg = cfg.with_(partition_pattern=None)
    assert [d.urn.rsplit("/", 1)[-1] for d in StreamDatasetsFinder(cfg).find()] == ["clicks"]
    with pytest.raises(ConfigurationError, match="exactly one source root"):
        list(StreamDatasetsFinder(cfg.with_(sources=("/a", "/b"))).find())
    with pytest.raises(PlanningError, match="no topic directory under .* matches"):
        list(StreamDatasetsFinder(cfg.with_(dataset_glob="views*")).find())
