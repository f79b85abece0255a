"""The real ``pydistcp run JOB.toml`` in a subprocess, on local Spark and the moto S3 server.

Each run costs a Spark start, so each test checks several behaviours: paths in the
file resolve under its folder (the command runs from elsewhere), the dry run,
a flag winning over the file's key, a converter chain, and an S3 job whose
credentials come only from references in the file and leak nowhere.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.processes import CmdlineWatcher
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    ACCESS_KEY,
    SECRET_KEY,
    S3Server,
    assert_no_canary,
    moto_server,
    s3,
    scan_tree_for_canary,
)

pytestmark = pytest.mark.e2e

#: Workers must run this interpreter; Spark's gateway honours the variable, not the conf.
ENV = {"PYSPARK_PYTHON": sys.executable}


def write_job(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def test_job_copies_a_local_tree_after_a_dry_run_and_a_flag_wins_over_the_file(
        tmp_path: Path) -> None:
    jobs, elsewhere = tmp_path / "jobs", tmp_path / "elsewhere"
    elsewhere.mkdir()
    files = {"a.txt": b"alpha\n", "d/e/f.bin": bytes(range(256)) * 300, "empty": b""}
    for rel, data in files.items():
        (jobs / "in" / rel).parent.mkdir(parents=True, exist_ok=True)
        (jobs / "in" / rel).write_bytes(data)
    job = write_job(jobs / "tree.toml", """\
        summary_json = "from-file.json"
        master = "local[1]"
        no_progress = true

        [[datasets]]
        source = "in"

        [[branches]]
        name = "mirror"
        destination = "out"
        """)
    bad = write_job(jobs / "bad.toml", '[[datasets]]\nsource = "in"\n[[branches]]\n'
                                       'destination = "out"\nconvrt = ["gunzip"]\n')
    refused = run_cli("run", str(bad), cwd=elsewhere, env=ENV)
    assert refused.returncode == 2
    assert refused.stderr == (f"pydistcp: error: {bad}:5: branches[0].convrt: unknown key; "
                              "did you mean 'convert'?\n")

    dry = run_cli("run", str(job), "--dry-run", cwd=elsewhere, env=ENV)
    assert dry.returncode == 0, dry.stderr
    planned = {line.split()[1] for line in dry.stdout.splitlines() if line.startswith("copy ")}
    assert planned == {str(jobs / "out" / rel) for rel in files}
    assert not (jobs / "out").exists()
    assert json.loads((jobs / "from-file.json").read_text())["dry_run"] is True
    (jobs / "from-file.json").unlink()

    r = run_cli("run", str(job), "--summary-json", "cli.json", "--master", "local[2]",
                cwd=elsewhere, env=ENV)
    assert r.returncode == 0, r.stderr
    assert files_under(jobs / "out") == files
    summary = json.loads((elsewhere / "cli.json").read_text())
    assert summary["files_copied"] == len(files) and summary["dry_run"] is False
    assert not (jobs / "from-file.json").exists()


def test_job_with_a_converter_chain_expands_a_gzipped_tar(tmp_path: Path) -> None:
    members = {"logs/a.log": b"line 1\nline 2\n", "logs/sub/b.log": b"b" * 70_000}
    drops = tmp_path / "job" / "drops"
    drops.mkdir(parents=True)
    with tarfile.open(drops / "day1.tar.gz", "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (drops / "notes.txt").write_bytes(b"not an archive")
    job = write_job(tmp_path / "job" / "ingest.toml", """\
        master = "local[2]"

        [[datasets]]
        source = "drops"
        include = ["*.tar.gz"]

        [[branches]]
        destination = "lake"
        convert = ["gunzip", "untar"]
        """)
    r = run_cli("run", str(job), "--no-progress", cwd=tmp_path, env=ENV)
    assert r.returncode == 0, r.stderr
    assert files_under(tmp_path / "job" / "lake") == {
        f"day1/{name}": data for name, data in members.items()}


def test_job_to_s3_takes_credentials_only_by_reference_and_leaks_them_nowhere(
        s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    files = {"2024/01/a.csv": b"id,v\n1,2\n", "2024/01/b.csv": b"x" * 200_000,
             "readme": b"partner drop"}
    client = s3.client()
    for rel, data in files.items():
        client.put_object(Bucket="src", Key=f"partner/{rel}", Body=data)
    for key in s3.env:  # no AWS_* chain: the job's references are the only credentials
        monkeypatch.delenv(key)
    job = write_job(tmp_path / "archive.toml", f"""\
        [[datasets]]
        source = "s3://src/partner"        # any URL a copy takes; finder options beside it

        [[branches]]
        name = "archive"
        destination = "s3://dst/partner"

        [storage."s3://"]
        endpoint_url = "{s3.endpoint}"
        key = {{ env = "JOB_KEY_ID" }}
        secret = {{ file = "secrets/s3-secret" }}
        """)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "s3-secret").write_text(SECRET_KEY + "\n")
    logs = tmp_path / "logs"
    with CmdlineWatcher() as watcher:
        r = run_cli("run", str(job), "--no-progress", "--master", "local[2]", "--log-dir",
                    str(logs), "--summary-json", str(tmp_path / "s.json"),
                    env={**ENV, "JOB_KEY_ID": ACCESS_KEY,
                         "PYDISTCP_COPYING": "spark"})  # its processes and logs checked too
    assert r.returncode == 0, r.stderr
    copied = {k.removeprefix("partner/"): v for k, v in s3.objects("dst", "partner/").items()
              if "/.pydistcp/" not in k}
    assert copied == files
    assert json.loads((tmp_path / "s.json").read_text())["files_copied"] == len(files)
    state = {k: v for k, v in s3.objects("dst", "").items() if "/.pydistcp/" in k}
    assert state, "the run kept no state on S3"
    assert_no_canary(r.stdout, r.stderr, (tmp_path / "s.json").read_text(), *state.values())
    assert scan_tree_for_canary(str(logs)) > 0
    assert len(watcher.seen) > 1, "the watcher saw no child process"
    assert_no_canary(*watcher.seen.values())
