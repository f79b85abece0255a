"""S3 end to end, against a real S3 server (moto) on 127.0.0.1: the real CLI on local Spark.

Each CLI run costs a Spark start, so one test checks several behaviours: trees
copied local -> S3 -> local and S3 -> S3 byte-identical, credentials from the
AWS environment chain and from --src-option/--dst-option, staged uploads
invisible to a boto3 reader until published, server-side copy with no byte
through the tasks, and a canary secret that never appears anywhere.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fixtures.processes import CmdlineWatcher
from tests.fixtures.s3_server import (  # noqa: F401 - fixtures
    CANARY,
    S3Server,
    assert_no_canary,
    moto_server,
    rclone_server,
    s3_any,
    scan_tree_for_canary,
)

pytestmark = pytest.mark.e2e


def make_tree(root: Path) -> dict[str, bytes]:
    """Small, empty and multipart-sized files, nested, a key with a space, '+' and '=',
    plus an empty directory."""
    rng = random.Random(5)
    files = {"a.bin": rng.randbytes(100_000), "empty.txt": b"", "d/e/f.txt": b"hello\n",
             "d/big.bin": rng.randbytes(11 * (1 << 20) + 17), "sp ace+plus=.txt": b"x" * 10}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "emptydir").mkdir()
    return files


def local_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pydistcp" not in p.parts}


def s3_state(s3srv: S3Server, prefix: str) -> dict[str, bytes]:
    return {k: v for k, v in s3srv.objects("dst", prefix).items() if "/.pydistcp/" in k}


def test_local_to_s3_to_local_is_identical_invisible_until_published_and_leaks_nothing(
        s3_any: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    s3 = s3_any
    src, back, logs = tmp_path / "src", tmp_path / "back", tmp_path / "logs"
    files = make_tree(src)
    outputs: list[str] = []
    watcher = CmdlineWatcher()
    watcher.start()
    try:
        # 1. local -> S3, credentials from the environment (AWS chain), killed before the
        #    first commit step: everything is staged, nothing is visible to a reader.
        crash = run_cli("copy", str(src), "s3://dst/tree", "--no-progress", "--log-dir", str(logs),
                        "--master", "local[2]", env={**s3.env, "DISTCP_CRASH_AT": "before_step:1"})
        outputs += [crash.stdout, crash.stderr]
        assert crash.returncode == 137, crash.stderr
        visible = {k for k in s3.objects("dst", "tree/") if "/.pydistcp/" not in k}
        assert visible == set(), "a reader saw an object before its file set was published"
        non_empty = sum(1 for data in files.values() if data)
        assert len(s3.pending_uploads()) == non_empty  # the 0-byte file: one PUT at publish
        r = run_cli("copy", str(src), "s3://dst/tree", "--no-progress", "--log-dir", str(logs),
                    "--master", "local[2]", "--summary-json", str(tmp_path / "s1.json"),
                    env=s3.env)
        outputs += [r.stdout, r.stderr]
        assert r.returncode == 0, r.stderr
        got = {k.removeprefix("tree/"): v for k, v in s3.objects("dst", "tree/").items()
               if "/.pydistcp/" not in k}
        assert got == files
        assert s3.pending_uploads() == []
        # 2. S3 -> local, credentials only from --src-option (no AWS_* in the environment).
        for key in s3.env:
            monkeypatch.delenv(key)
        r = run_cli("copy", "s3://dst/tree", str(back), "--no-progress", "--log-dir", str(logs),
                    "--master", "local[2]", *s3.cli_options("--src-option"),
                    "--copying", "spark")  # Spark's logs are searched below
        outputs += [r.stdout, r.stderr]
        assert r.returncode == 0, r.stderr
        assert local_files(back) == files
    finally:
        watcher.stop.set()
        watcher.join()
    # The canary secret: nowhere in outputs, logs, state (local and on S3), summaries,
    # events, or the command lines of any process the runs started.
    assert_no_canary(*outputs)
    assert scan_tree_for_canary(str(logs)) > 0
    assert scan_tree_for_canary(str(back / ".pydistcp")) > 0
    assert_no_canary((tmp_path / "s1.json").read_text())
    state = s3_state(s3, "")
    assert any("/events/" in k for k in state) and any("/datasets/" in k for k in state)
    assert_no_canary(*state.values())
    assert len(watcher.seen) > 3, "the watcher saw no child process"
    assert_no_canary(*watcher.seen.values())


def test_s3_to_s3_on_one_endpoint_is_a_server_side_copy(
        s3_any: S3Server, tmp_path: Path) -> None:  # noqa: F811
    """rclone serve s3 answers UploadPartCopy with an empty 200 and stores nothing: there
    the files go through the tasks instead, and the summary says so and why."""
    s3 = s3_any
    files = make_tree(tmp_path / "src")
    client = s3.client()
    for rel, data in files.items():
        client.put_object(Bucket="src", Key=f"tree/{rel}", Body=data)
    r = run_cli("copy", "s3://src/tree", "s3://dst/copy", "--no-progress", "--master", "local[2]",
                "--log-dir", str(tmp_path / "logs"), "--summary-json", str(tmp_path / "s.json"),
                env=s3.env)
    assert r.returncode == 0, r.stderr
    copied = {k.removeprefix("copy/"): v for k, v in s3.objects("dst", "copy/").items()
              if "/.pydistcp/" not in k}
    assert copied == files
    summary = json.loads((tmp_path / "s.json").read_text())
    total = sum(len(v) for v in files.values())
    if s3.kind == "rclone":
        assert summary["bytes_server_side"] == 0 and summary["bytes_read"] == total
        non_empty = sum(1 for v in files.values() if v)
        assert any(f"server-side copy not used for {non_empty} file(s)" in n
                   and "UploadPartCopy" in n for n in summary["notes"]), summary["notes"]
    else:
        assert summary["bytes_read"] == 0, "bytes went through the tasks"
        assert summary["bytes_server_side"] == total
    assert s3.pending_uploads() == []
    assert_no_canary(r.stdout, r.stderr, json.dumps(summary))
