"""The built-in quality checks on real bytes, and the check list as a value."""

from __future__ import annotations

import gzip
import io
import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError
from distcp.quality import CheckList, CheckSpec, StagedOutput, check_list
from distcp.quality.builtin import TAIL_MAX


def verdict(checks: list[str], data: bytes, chunk: int = 7,
            destination: str = "/dst/f") -> str | None:
    """Run ``checks`` on ``data`` fed in ``chunk``-byte pieces, as a tee would."""
    run = check_list(checks).start()
    assert run is not None
    for i in range(0, len(data), chunk):
        run.update(memoryview(data)[i:i + chunk])
    return run.verdict(StagedOutput(destination, "staging", len(data)))


def parquet_bytes(table: pa.Table, **options: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)  # type: ignore[arg-type]
    return sink.getvalue()


TABLE = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def test_size_checks_pass_and_fail_with_the_numbers() -> None:
    assert verdict(["not-empty", "min-size=3", "max-size=1K"], b"abc") is None
    assert verdict(["not-empty"], b"") == \
        "/dst/f: quality check 'not-empty' failed: the output is empty (0 bytes)"
    assert verdict(["min-size=1K"], b"abc") == \
        "/dst/f: quality check 'min-size=1024' failed: 3 bytes, fewer than the minimum 1024"
    assert verdict(["max-size=2"], b"abc") == \
        "/dst/f: quality check 'max-size=2' failed: 3 bytes, more than the maximum 2"


def test_gzip_accepts_whole_and_multi_member_streams() -> None:
    data = gzip.compress(b"x" * 3_000_000) + gzip.compress(b"second member")
    assert verdict(["gzip"], data, chunk=4096) is None
    small = gzip.compress(b"one") + gzip.compress(b"two")
    assert verdict(["gzip"], small, chunk=1) is None
    assert verdict(["gzip"], small[:-1], chunk=1) == (
        "/dst/f: quality check 'gzip' failed: truncated gzip stream (it ends inside a member)")


def test_gzip_fails_a_truncated_stream() -> None:
    data = gzip.compress(b"some text " * 10_000)
    message = verdict(["gzip"], data[:-9], chunk=100)
    assert message == ("/dst/f: quality check 'gzip' failed: truncated gzip stream "
                       "(it ends inside a member)")


def test_gzip_fails_corrupt_bytes_and_non_gzip() -> None:
    data = bytearray(gzip.compress(b"abc" * 1000))
    data[-6] ^= 0xFF  # the CRC
    assert "not a valid gzip stream (" in (verdict(["gzip"], bytes(data)) or "")
    assert "not a valid gzip stream (" in (verdict(["gzip"], b"plain text, no gzip") or "")
    assert verdict(["gzip"], b"") == \
        "/dst/f: quality check 'gzip' failed: not a gzip stream (no member)"


def test_parquet_reads_the_footer_of_a_real_file() -> None:
    assert verdict(["parquet"], parquet_bytes(TABLE), chunk=5) is None


def test_parquet_footer_is_read_from_the_tail_of_a_large_file() -> None:
    """Only the last TAIL_MAX bytes are kept: a file larger than that still passes."""
    big = pa.table({"blob": [b"\0" * (1 << 20)] * (TAIL_MAX // (1 << 20) * 3)})
    data = parquet_bytes(big, compression="none", use_dictionary=False)
    assert len(data) > 2 * TAIL_MAX
    assert verdict(["parquet", "schema=blob:binary"], data, chunk=1 << 20) is None


def test_parquet_fails_a_corrupt_footer_and_a_truncated_file() -> None:
    data = bytearray(parquet_bytes(TABLE))
    footer = int.from_bytes(data[-8:-4], "little")
    data[-8 - footer:-8] = b"\xff" * footer  # garbage where the Thrift metadata is
    message = verdict(["parquet"], bytes(data)) or ""
    assert message.startswith("/dst/f: quality check 'parquet' failed: unreadable Parquet "
                              "footer ("), message
    assert verdict(["parquet"], parquet_bytes(TABLE)[:-3]) == (
        "/dst/f: quality check 'parquet' failed: not a complete Parquet file "
        "(no PAR1 at its end: truncated?)")
    assert verdict(["parquet"], b"x" * 100) == \
        "/dst/f: quality check 'parquet' failed: not a Parquet file (no PAR1 at its start)"


def test_schema_names_each_difference() -> None:
    data = parquet_bytes(TABLE)
    assert verdict(["schema=name:string,id:int64"], data) is None
    assert verdict(["schema=id:int32,name:string,ts:timestamp[ms, tz=UTC]"], data) == (
        "/dst/f: quality check 'schema=id:int32,name:string,ts:timestamp[ms, tz=UTC]' "
        "failed: schema differs: column 'id' is int64, not int32, column 'ts' is missing")
    assert verdict(["schema=id:int64"], data) == (
        "/dst/f: quality check 'schema=id:int64' failed: schema differs: "
        "unexpected column 'name' (string)")


def test_schema_from_a_file_is_read_once_on_the_driver(tmp_path: Path) -> None:
    (tmp_path / "expected.txt").write_text("id:int64\nname:string\n")
    checks = check_list([f"schema=@{tmp_path / 'expected.txt'}"])
    assert checks.specs[0].arg == "id:int64,name:string"
    (tmp_path / "expected.txt").unlink()  # executors never read it
    assert verdict([checks.specs[0].text], parquet_bytes(TABLE)) is None


def test_every_failure_is_listed() -> None:
    assert verdict(["not-empty", "gzip"], b"") == (
        "/dst/f: quality check 'not-empty' failed: the output is empty (0 bytes); "
        "check 'gzip' failed: not a gzip stream (no member)")


@pytest.mark.parametrize(("text", "error"), [
    ("nope", ("--check nope: unknown checks plugin 'nope'; known: gzip, max-size, min-size, "
             "not-empty, parquet, schema. Third-party plugins register in the entry-point "
             "group 'pydistcp.checks'")),
    ("min-size", "--check min-size: min-size needs an argument: min-size=VALUE"),
    ("gzip=1", "--check gzip=1: gzip takes no argument"),
    ("max-size=12Q", ("--check max-size=12Q: not a size: '12Q' (examples: 1048576, 64K, "
                     "256M, 2G)")),
    ("schema=id", "--check schema=id: not COLUMN:TYPE: 'id'"),
    ("schema=@/no/such/file", ("--check schema=@/no/such/file: [Errno 2] No such file or "
                              "directory: '/no/such/file'")),
])
def test_bad_checks_are_configuration_errors(text: str, error: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as info:
        CopyConfiguration.build([str(tmp_path)], str(tmp_path / "d"), check=[text])
    assert str(info.value) == error


def test_split_size_and_check_are_refused_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="--split-size cannot be used with --check"):
        CopyConfiguration.build([str(tmp_path)], str(tmp_path / "d"), check=["gzip"],
                                split_size="64M")


def test_check_list_pickles_and_knows_whether_it_reads_bytes() -> None:
    from pyspark import cloudpickle

    from distcp.copying.taskspec import TaskSpec
    from distcp.errors import QualityCheckError

    checks = check_list(["not-empty", "schema=id:int64"])
    assert pickle.loads(pickle.dumps(checks)) == checks
    spec = TaskSpec("job", "/s", "/p", checks=checks)
    assert pickle.loads(cloudpickle.dumps(spec)).checks == checks
    error = pickle.loads(pickle.dumps(QualityCheckError("/d/f: quality check 'gzip' failed")))
    assert (type(error), str(error)) == (QualityCheckError, "/d/f: quality check 'gzip' failed")
    assert checks.reads_bytes and not check_list(["min-size=1"]).reads_bytes
    assert not CheckList() and CheckList().start() is None


def _plugin(tmp_path: Path, body: str) -> dict[str, str]:
    pkg = tmp_path / "acme_checks"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(body)
    info = tmp_path / "acme_checks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-checks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[pydistcp.checks]\ncsv-header = acme_checks:CsvHeader\n")
    return {"PYTHONPATH": f"{tmp_path}:{Path.cwd()}"}


def test_a_plugin_check_through_the_entry_point_group(tmp_path: Path) -> None:
    env = _plugin(tmp_path, (
        "from distcp.quality import QualityCheck\n"
        "class Head:\n    def __init__(self): self.head = b''\n"
        "    def update(self, chunk): self.head = (self.head + bytes(chunk))[:64]\n"
        "class CsvHeader(QualityCheck):\n    name = 'csv-header'\n    reads_bytes = True\n"
        "    takes_arg = True\n"
        "    def inspector(self): return Head()\n"
        "    def check(self, output, seen):\n"
        "        if not seen.head.startswith(self.arg.encode()):\n"
        "            return 'header is not ' + self.arg\n"))
    code = ("from distcp.quality import check_list, StagedOutput\n"
            "for data in (b'id,name\\n1,a\\n', b'x\\n'):\n"
            "    run = check_list(['csv-header=id,name']).start()\n"
            "    run.update(data)\n"
            "    print(run.verdict(StagedOutput('/d/f.csv', '', len(data))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.splitlines() == [
        "None", "/d/f.csv: quality check 'csv-header=id,name' failed: header is not id,name"]


def test_a_broken_plugin_is_one_line_naming_it(tmp_path: Path) -> None:
    env = _plugin(tmp_path, "import no_such_module_here\n")
    code = ("from distcp.quality import check_list\n"
            "try:\n    check_list(['csv-header'])\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout == (
        "ConfigurationError --check csv-header: checks plugin 'csv-header' "
        "(acme_checks:CsvHeader) cannot be imported: No module named "
        "'no_such_module_here'; is the package that provides it installed?\n")


def test_a_branch_of_a_job_file_takes_its_checks(tmp_path: Path) -> None:
    from distcp.cli import job_keys
    from distcp.jobs import load_job

    job = tmp_path / "job.toml"
    job.write_text('[[datasets]]\nsource = "s3://drops/partner"\n[[branches]]\n'
                   'destination = "/lake"\ncheck = ["not-empty", "schema=id:int64"]\n')
    assert load_job(str(job), job_keys()).copy_arguments()[2]["check"] == [
        "not-empty", "schema=id:int64"]
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "job.toml").write_text(
        '[[datasets]]\nsource = "s3://drops/partner"\n[[branches]]\n'
        'destination = "/lake"\ncheck = ["schema=@expected.txt", "gzip"]\n')
    assert load_job(str(tmp_path / "tables" / "job.toml"), job_keys()).copy_arguments()[2][
        "check"] == [f"schema=@{tmp_path / 'tables' / 'expected.txt'}", "gzip"]
    job.write_text('[[datasets]]\nsource = "s3://drops/partner"\ncheck = ["gzip"]\n'
                   '[[branches]]\ndestination = "/lake"\n')
    with pytest.raises(ConfigurationError) as info:
        load_job(str(job), job_keys())
    assert str(info.value) == (f"{job}:3: datasets[0].check: not a key of [[datasets]]; "
                               "it belongs in [[branches]]")


def test_sizes_are_resolved_to_bytes_on_the_driver() -> None:
    assert check_list(["min-size=1K", "max-size=2M"]).specs == (
        CheckSpec("min-size", "1024"), CheckSpec("max-size", str(2 << 20)))


def test_executors_running_checks_import_no_driver_stage() -> None:
    code = ("import sys\nfrom distcp.quality import check_list, CheckList, CheckSpec\n"
            "from distcp.copying import task\n"
            "checks = CheckList(tuple(CheckSpec(n, a) for n, a in [('not-empty', None), "
            "('min-size', '1'), ('max-size', '9'), ('gzip', None), ('parquet', None), "
            "('schema', 'a:int64')]))\n"
            "checks.start()\n"
            "print(','.join(m for m in sys.modules if m.startswith(('distcp.planning', "
            "'distcp.commit', 'distcp.configuration', 'pyspark'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""


def test_a_plugin_written_against_the_old_import_path_still_loads() -> None:
    """``distcp.checks`` was renamed ``distcp.quality``; old plugins import and are warned."""
    import importlib
    import sys

    sys.modules.pop("distcp.checks", None)
    with pytest.warns(DeprecationWarning, match="distcp.checks is now distcp.quality"):
        old = importlib.import_module("distcp.checks")
    from distcp.quality import QualityCheck

    assert old.QualityCheck is QualityCheck
