"""``pydistcp check`` end to end: real listings, real digests read by Spark tasks.

Most tests call ``distcp.check`` on the shared session; two CLI runs prove the exit
statuses and rclone's combined report file.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.callbacks import Callback
from tests.conftest import imported_by, run_cli, traced_cli
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e


def make_source(root: Path) -> dict[str, bytes]:
    rng = random.Random(13)
    files = {"a.bin": rng.randbytes(3 * (1 << 20) + 5), "empty": b"", "d/e/f.txt": b"hello\n",
             "d/g.csv": rng.randbytes(40_000), "h.log": rng.randbytes(900)}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def flip_byte_keeping_size_and_mtime(path: Path, offset: int) -> None:
    """Change one bit in place, then put the mtime back, as bit rot or a careless tool
    would leave it: only the content tells."""
    before = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x10]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


class Recorder(Callback):
    def __init__(self) -> None:
        self.sizes: list[tuple[int, int]] = []
        self.updates: list[tuple[int, int]] = []

    def set_size(self, files: int, nbytes: int) -> None:
        self.sizes.append((files, nbytes))

    def update(self, files: int, nbytes: int) -> None:
        self.updates.append((files, nbytes))


def test_a_fresh_copy_checks_equal_reading_only_the_destination(spark: Any,
                                                                 tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_source(src)
    assert distcp.copy(str(src), str(dst)).ok
    rec = Recorder()
    report = distcp.check(str(src), str(dst), callback=rec)
    assert report.ok and report.lines() == [f"= {p}" for p in sorted(files)]
    # every source digest came from the manifest: only the copies were read
    assert report.stored_digests == len(files) and report.files_read == len(files)
    assert report.bytes_read == sum(len(b) for b in files.values())
    assert rec.sizes == [(len(files), report.bytes_read)]
    assert rec.updates[-1] == rec.sizes[0]
    assert not list((dst / ".pydistcp" / "progress").glob("check-*"))  # no debris
    assert spark.range(2).count() == 2  # the shared session is left running


@pytest.mark.parametrize("copying", ["auto", "spark"])  # read in this process's threads
def test_a_flipped_byte_with_size_and_mtime_kept_is_found(spark: Any, tmp_path: Path,
                                                          copying: str) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_source(src)
    assert distcp.copy(str(src), str(dst)).ok
    flip_byte_keeping_size_and_mtime(dst / "a.bin", 2 * (1 << 20) + 77)  # in the 3rd block
    flip_byte_keeping_size_and_mtime(dst / "d" / "e" / "f.txt", 0)
    for stored in (True, False):
        report = distcp.check(str(src), str(dst), stored_digests=stored, copying=copying)
        assert bool(report.read_here) is (copying == "auto")
        assert not report.ok
        assert report.lines("*") == ["* a.bin", "* d/e/f.txt"], stored
        assert report.counts == {"match": 3, "differ": 2, "missing_on_dst": 0,
                                 "missing_on_src": 0, "error": 0}
        assert report.stored_digests == (5 if stored else 0)
        assert report.files_read == (5 if stored else 10)
    # --size-only reads nothing and cannot tell
    assert distcp.check(str(src), str(dst), size_only=True).ok


def test_missing_extra_and_resized_files_one_way_and_report_files(spark: Any,
                                                                   tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_source(src)
    assert distcp.copy(str(src), str(dst)).ok
    (dst / "d" / "g.csv").unlink()
    (dst / "extra.txt").write_bytes(b"only here")
    (dst / "h.log").write_bytes(b"shorter")
    out = tmp_path / "reports"
    out.mkdir()
    names = ("combined", "missing_on_dst", "missing_on_src", "differ", "match", "error")
    report = distcp.check(str(src), str(dst), summary_json=str(out / "s.json"),
                          **{n: str(out / n) for n in names})
    assert report.lines() == ["= a.bin", "= d/e/f.txt", "- d/g.csv", "= empty", "+ extra.txt",
                              "* h.log"]
    assert (out / "combined").read_text() == "".join(f"{x}\n" for x in report.lines())
    assert {n: (out / n).read_text() for n in names[1:]} == {
        "missing_on_dst": "d/g.csv\n", "missing_on_src": "extra.txt\n", "differ": "h.log\n",
        "match": "a.bin\nd/e/f.txt\nempty\n", "error": ""}
    assert [o.reason for o in report.outcomes if o.path == "h.log"] == [
        "sizes differ: source 900 bytes, destination 7"]
    summary = json.loads((out / "s.json").read_text())
    assert summary["ok"] is False and summary["counts"]["differ"] == 1
    one_way = distcp.check(str(src), str(dst), one_way=True)
    assert "+ extra.txt" not in one_way.lines() and not one_way.ok
    (dst / "h.log").write_bytes((src / "h.log").read_bytes())
    (dst / "d" / "g.csv").write_bytes((src / "d" / "g.csv").read_bytes())
    assert distcp.check(str(src), str(dst), one_way=True).ok  # the extra file is fine
    assert not distcp.check(str(src), str(dst)).ok  # both ways it is not
    absent = distcp.check(str(src), str(tmp_path / "absent"))
    assert absent.counts["missing_on_dst"] == 5 and absent.files_read == 0
    assert not (tmp_path / "absent").exists()


def test_filters_select_the_same_files_and_an_unrelated_tree_is_read_on_both_sides(
        spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    files = make_source(src)
    dst.mkdir()
    for rel, data in files.items():  # copied by another tool: no pydistcp state
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_bytes(data)
    (dst / "notes.md").write_bytes(b"not a log")
    report = distcp.check(str(src), str(dst), include=["*.log", "*.txt"])
    assert report.ok and report.lines() == ["= d/e/f.txt", "= h.log"]
    assert (report.stored_digests, report.files_read) == (0, 4)
    listed = tmp_path / "list.txt"
    listed.write_text("h.log\nnot/there.txt\n")
    report = distcp.check(str(src), str(dst), files_from=str(listed))
    assert [(o.verdict, o.path) for o in report.outcomes] == [
        ("=", "h.log"), ("!", str(src / "not" / "there.txt"))]
    assert not (dst / ".pydistcp").exists()  # a check writes nothing to DST


def test_an_s3_source_against_a_local_copy(spark: Any, s3: S3Server,  # noqa: F811
                                          tmp_path: Path) -> None:
    local, dst = tmp_path / "local", tmp_path / "dst"
    files = make_source(local)
    fs = s3.filesystem()
    fs.put(str(local) + "/", "src/tree/", recursive=True)
    assert distcp.copy("s3://src/tree", str(dst), src_options=s3.options).ok
    report = distcp.check("s3://src/tree", str(dst), src_options=s3.options)
    assert report.ok and len(report.outcomes) == len(files)
    assert report.stored_digests == len(files)  # the S3 source was not downloaded again
    flip_byte_keeping_size_and_mtime(dst / "d" / "g.csv", 39_999)
    fs.pipe("src/tree/new.bin", b"new at the source")
    report = distcp.check("s3://src/tree", str(dst), src_options=s3.options,
                          stored_digests=False)
    assert report.lines("*-+!") == ["* d/g.csv", "- new.bin"]
    assert report.files_read == 2 * len(files)


def test_cli_exit_status_and_combined_report(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_source(src)
    logs = tmp_path / "logs"
    assert distcp.copy(str(src), str(dst)).ok  # the shared session: one JVM less
    r = run_cli("check", str(src), str(dst), "--master", "local[2]", "--log-dir", str(logs))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].startswith("5 matching, 0 differing, 0 missing on "
                                                "destination, 0 missing on source, 0 errors")
    assert "file(s) by processes forked here, no Spark job" in r.stderr
    flip_byte_keeping_size_and_mtime(dst / "h.log", 450)
    (dst / "empty").unlink()
    combined = tmp_path / "combined.txt"
    r = run_cli("check", str(src), str(dst), "--no-progress", "--master", "local[2]",
                "--log-dir", str(logs), "--combined", str(combined),
                "--summary-json", "-")
    assert r.returncode == 1, r.stderr
    assert combined.read_text() == "= a.bin\n= d/e/f.txt\n= d/g.csv\n- empty\n* h.log\n"
    assert json.loads(r.stdout)["counts"] == {"match": 3, "differ": 1, "missing_on_dst": 1,
                                              "missing_on_src": 0, "error": 0}
    assert "* h.log  (contents differ" in r.stderr and "- empty  (missing on destination)" \
        in r.stderr
    usage = run_cli("check", str(src))
    assert usage.returncode == 2 and "give at least one SRC and a DST" in usage.stderr
    missing = run_cli("check", str(tmp_path / "nope"), str(dst), "--master", "local[2]")
    assert missing.returncode == 2 and "nope" in missing.stderr, missing.stderr


def test_a_small_check_reads_here_with_no_spark_and_spark_reads_the_same(
        tmp_path: Path) -> None:
    """A cold check of a few files reads them in forked processes of its own, no JVM;
    ``--copying spark`` reads them in a Spark job: the same verdicts either way."""
    src, dst, logs = tmp_path / "src", tmp_path / "dst", tmp_path / "logs"
    make_source(src)
    assert run_cli("copy", str(src), str(dst), "--no-progress").returncode == 0
    flip_byte_keeping_size_and_mtime(dst / "d" / "g.csv", 123)
    reports = {}
    for copying in ("auto", "spark"):
        r = run_cli("check", str(src), str(dst), "--engine", "cold", "--no-progress",
                    "--copying", copying, "--log-dir", str(logs), "--summary-json", "-")
        assert r.returncode == 1, r.stderr
        assert "* d/g.csv  (contents differ" in r.stderr
        reports[copying] = json.loads(r.stdout)
        assert reports[copying]["counts"]["differ"] == 1
        assert reports[copying]["files_read"] == 5
    assert reports["auto"]["read_here"] == (
        "--copying auto: 5 files to read on a local master, forked processes at its "
        "tasks' pace: a Spark job's start would cost more")
    assert reports["auto"]["log_file"] == "" and reports["spark"]["read_here"] == ""
    assert [p.name for p in logs.glob("spark-*.log")] == [
        Path(reports["spark"]["log_file"]).name]
    assert not list((dst / ".pydistcp" / "progress").glob("check-*"))  # no debris


def test_a_small_check_imports_neither_spark_nor_pandas(tmp_path: Path) -> None:
    """The manifest's read builds arrays, for which pyarrow would import pandas only to
    ask whether they are pandas objects (0.2 s of a 0.6 s check): the command answers
    "absent", as a copy here does; what it reads is judged as before."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_source(src)
    assert run_cli("copy", str(src), str(dst), "--no-progress").returncode == 0
    flip_byte_keeping_size_and_mtime(dst / "a.bin", 10)
    out = traced_cli("check", str(src), str(dst), "--no-progress", "--engine", "cold")
    assert out.returncode == 1, out.stderr[-2000:]
    first, last = out.stdout.splitlines()
    assert first.startswith("* a.bin  (contents differ"), out.stdout
    assert last.startswith("4 matching, 1 differing") and "5 stored digests used" in last
    # (pyarrow's probe is answered by an import refused at once: "pandas" alone)
    assert sorted(m for m in imported_by(out) if m.startswith(("pyspark", "pandas."))) == []
