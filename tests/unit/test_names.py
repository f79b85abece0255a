"""Every name survives (issue 38, point 2): names that are not UTF-8, hold a newline or
glob characters, or are as long as the filesystem allows, through each layer that
stores or prints them; on real disk, no Spark.

A name that is not valid UTF-8 is a str holding lone surrogates in Python
(``os.fsdecode``); UTF-8-only formats (Parquet, Arrow, Spark strings) store it in
``distcp.names.to_utf8``'s form, JSON records as its ``\\udcXX`` escapes, and output
prints it escaped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from distcp.commit.log import CommitStepStore
from distcp.commit.state_steps import AdvanceWatermark
from distcp.commit.steps import CommitSequence, MakeDirectories, PublishFiles
from distcp.copying.resultfiles import ResultsWriter, publishing_of, staged_tables
from distcp.model import CopyableFile, FileStatus, TaskResult
from distcp.names import from_utf8, is_utf8, printable, to_utf8, utf8_problem
from distcp.state import manifest as mf
from distcp.state.store import StateStore
from distcp.storage import treelisting as tl
from distcp.summary import Failure, Summary

#: The hostile names, as bytes: each must come back byte for byte.
HOSTILE = (b"a\nb.txt", b"[x]*?.txt", b"caf\xe9.txt", b"d\xff\xfe/x.txt", b"L" * 255,
           b"back\\slash \x00e9.txt".replace(b"\x00", b""), "café.txt".encode())
NAMES = tuple("/dst/" + os.fsdecode(n) for n in HOSTILE)


@pytest.mark.parametrize("name", NAMES)
def test_a_name_comes_back_from_its_utf8_form_byte_for_byte(name: str) -> None:
    text = to_utf8(name)
    text.encode("utf-8")  # valid UTF-8: what Arrow and Parquet strings take
    assert os.fsencode(from_utf8(text)) == os.fsencode(name)


def test_a_valid_name_is_its_own_utf8_form_and_a_byte_is_nul_and_two_digits() -> None:
    assert to_utf8("/d/café [x]*?\n.txt") == "/d/café [x]*?\n.txt"
    assert to_utf8(os.fsdecode(b"/d/caf\xe9/x")) == "/d/caf\x00e9/x"  # '/' stays a prefix
    assert from_utf8("/d/no escape here") == "/d/no escape here"
    assert [is_utf8(n) for n in ("café", os.fsdecode(b"caf\xe9"))] == [True, False]


def test_a_manifest_stores_every_name_and_reads_it_back(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path), {})
    state = store.load("urn:names")
    entries = [(n, i, 1.5, "xxh3:00", f"g{i}") for i, n in enumerate(NAMES)]
    store.append_segment(state, "seq-1", entries, ())
    store.save(state)
    gone = os.fsdecode(b"/dst/gone\xe9")
    store.append_segment(state, "seq-2", [(gone, 1, 1.0, "", "g")], ())
    store.append_segment(state, "seq-3", (), [gone, NAMES[0]])
    store.save(state)
    manifest = StateStore(str(tmp_path), {}).load("urn:names").manifest
    assert sorted(os.fsencode(d) for d in manifest) == sorted(
        os.fsencode(n) for n in NAMES[1:])
    assert manifest[NAMES[2]] == [2, 1.5, "xxh3:00", "g2"]


def test_a_segment_written_before_the_utf8_form_reads_unchanged(tmp_path: Path) -> None:
    """A segment of today's format (plain strings, no name escaped) is read as it is."""
    old = pa.table({"destination": ["/dst/a\\x.txt", "/dst/café"], "size": [1, 2],
                    "mtime": [1.0, 2.0], "digest": ["", ""], "guid": ["g1", "g2"],
                    "seq": [0, 0], "deleted": [False, False]})
    table = mf.newest(mf.from_parquet(mf.to_parquet(old.cast(mf._schema()))))
    assert sorted(mf.to_dict(table)) == ["/dst/a\\x.txt", "/dst/café"]


def test_a_commit_record_keeps_every_name(tmp_path: Path) -> None:
    """The commit log is JSON: a name that is not UTF-8 is written as its ``\\udcXX``
    escapes, ASCII, and read back as the same name."""
    store = CommitStepStore(str(tmp_path), {})
    seq = CommitSequence("urn:names", "files", (
        MakeDirectories(tuple(n.rsplit("/", 1)[0] for n in NAMES)),
        PublishFiles(tuple((f"/stage/{i}", n, i) for i, n in enumerate(NAMES))),
        AdvanceWatermark("job-a", "urn:names", 1.0, tuple(
            (n, 1, 1.0, "", "g") for n in NAMES))), "job-a")
    store.persist(seq, "job")
    raw = Path(store.url_of("job-a")).read_bytes()
    assert raw.isascii() and b"\\udce9" in raw
    [pending] = CommitStepStore(str(tmp_path), {}).pending()
    assert pending.sequence == seq


def test_a_summary_json_names_a_failure_that_is_not_utf8_reversibly() -> None:
    name = os.fsdecode(b"/src/caf\xe9\n.txt")
    summary = Summary(failures=[Failure(name, f"{name}: refused")], files_failed=1)
    text = summary.to_json()
    assert text.isascii()
    assert os.fsencode(json.loads(text)["failures"][0]["path"]) == b"/src/caf\xe9\n.txt"


def test_a_listing_row_keeps_every_name_through_arrow() -> None:
    rows = [tl.row_of(n, FileStatus(url=n, size=1, mtime=2.0, link_target=n)) for n in NAMES]
    batch = pa.RecordBatch.from_pylist(rows, schema=tl.arrow_schema())
    back = [tl.entry_of(r) for r in batch.to_pylist()]
    assert [(p, s.url, s.link_target) for p, s in back] == [(n, n, n) for n in NAMES]
    skipped = tl.skipped_row(tl.Skipped(NAMES[2], f"{NAMES[2]}: a FIFO", False))
    assert tl.entry_of(pa.RecordBatch.from_pylist(
        [skipped], schema=tl.arrow_schema()).to_pylist()[0]) == tl.Skipped(
        NAMES[2], f"{NAMES[2]}: a FIFO", False)


def test_a_results_file_keeps_every_name(tmp_path: Path) -> None:
    """A copy task's results file (Parquet) gives back every staged path and
    destination, and its staged table is a manifest segment as it is."""
    url = str(tmp_path / "results.parquet")
    writer = ResultsWriter(0, url, {})
    for i, name in enumerate(NAMES):
        file = CopyableFile(FileStatus(url=f"/src/{i}", size=i, mtime=3.0), name, "urn:a",
                            "files")
        writer.add(TaskResult(f"g{i}", 0, "a0", f"/src/{i}", name, "urn:a", "files", "ok",
                              staging=f"/stage{name}", bytes_written=i), file)
    writer.close()
    moves, _ = publishing_of(url, {})
    assert moves == [(f"/stage{n}", n, i) for i, n in enumerate(NAMES)]
    segment = mf.staged_segment(pa.concat_tables(staged_tables(url, {})), 1)
    assert sorted(mf.to_dict(segment)) == sorted(NAMES)


def test_a_line_of_output_cannot_be_forged_by_a_name() -> None:
    name = os.fsdecode(b"/dst/a\nFAILED b\xe9\x1b[2J")
    assert printable(f"pydistcp: FAILED {name}: x") == \
        "pydistcp: FAILED /dst/a\\nFAILED b\\xe9\\x1b[2J: x"
    summary = Summary(entries_skipped=[Failure(name, "a FIFO")])
    assert len(summary.render().splitlines()) == 3


def test_an_object_key_must_be_utf8() -> None:
    assert utf8_problem("a\n[x]*?.txt") is None
    assert "not valid UTF-8" in (utf8_problem(os.fsdecode(b"caf\xe9")) or "")


@pytest.mark.parametrize("root", ["memory://names", "local"])
def test_removing_a_name_with_glob_characters_removes_that_name_only(
        root: str, tmp_path: Path) -> None:
    """fsspec's ``rm`` reads ``[x]*?.txt`` as a pattern (s3fs's too: it removed
    ``xab.txt`` and kept ``[x]*?.txt``): ``--delete`` and a move must remove the name."""
    import fsspec

    from distcp.storage import storage_for

    base = str(tmp_path) if root == "local" else root
    fs, _ = fsspec.core.url_to_fs(base)
    for rel in ("[x]*?.txt", "xab.txt", "d[*]/a", "dab/b"):
        fs.makedirs(f"{base}/{rel}".rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(f"{base}/{rel}", b"x")
    for rel in ("[x]*?.txt", "d[*]"):
        storage_for(f"{base}/{rel}", {}).remove(f"{base}/{rel}")
    left = {p.removeprefix(fs._strip_protocol(base)) for p in fs.find(base)}
    assert left == {"/xab.txt", "/dab/b"}
