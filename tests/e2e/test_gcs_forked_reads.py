"""GCS sources read by the processes a run forks, against fake-gcs-server on 127.0.0.1.

A download into a local tree is copied by one forked process per core, as a copy
between local trees is (``run.choice.forks_here``; ``GcsStorage.reads_forked``): each
child builds its own SDK client (``objects._after_fork``), its own connections for the
small objects' GETs, and its own gcsfs filesystem for an object read as a stream.
"""

from __future__ import annotations

import json
import os
import random
import traceback
from pathlib import Path

import pytest

from distcp.storage import storage_for
from distcp.storage.gcs import objects
from tests.conftest import run_cli
from tests.fixtures.gcs_server import GcsServer, fake_gcs_server, gcs  # noqa: F401 - fixtures
from tests.fixtures.stores import put_tree

pytestmark = pytest.mark.e2e


def test_a_child_builds_its_own_client_and_reads_what_the_parent_listed(
        gcs: GcsServer) -> None:  # noqa: F811
    """The parent lists through its client; a forked child gets another client (the
    parent's session stays the parent's) and reads the listed objects through it."""
    put_tree(gcs, "src", "probe/", {"a": b"first", "b/c": b"second"})
    storage = storage_for("gs://src/probe", {})
    assert storage.reads_forked("gs://src/probe")
    assert not storage.reads_forked("zip::gs://src/probe.zip")
    listed = dict(storage.walk("gs://src/probe"))
    parent = objects.client({})
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without the parent's exit handlers
        code = 1
        try:
            wanted = [(f"gs://{path}", status.etag or "") for path, status in sorted(
                listed.items()) if not status.is_dir]
            got = storage.read_versions(wanted)
            answer = {"own_client": objects.client({}) is not parent,
                      "bytes": [None if data is None else data.decode()
                                for _, data in sorted(got or [])]}
            os.write(write, json.dumps(answer).encode())
            code = 0
        except BaseException:  # noqa: BLE001 - shown, then reported by the exit status
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = json.loads(pipe.read() or b"{}")
    assert os.waitpid(pid, 0)[1] == 0
    assert answer == {"own_client": True, "bytes": ["first", "second"]}
    assert objects.client({}) is parent  # the parent's own is kept


def test_a_download_past_a_chunk_is_copied_by_forked_processes_with_streamed_objects(
        gcs: GcsServer, tmp_path: Path) -> None:  # noqa: F811
    """1,100 small objects and two of 1.5 MiB (streamed through gcsfs, made in each child
    that needs it), cold: kept past a chunk and copied by the forked processes, no JVM;
    every byte arrives and a rerun copies none."""
    rng = random.Random(7)
    files = {f"d{i % 7}/o{i:04d}": rng.randbytes(rng.randrange(1, 200)) for i in range(1_100)}
    files |= {f"big{i}": rng.randbytes(3 << 19) for i in range(2)}
    put_tree(gcs, "src", "forked/", files)
    dst, sj = tmp_path / "dst", tmp_path / "s.json"
    args = ("copy", "gs://src/forked", str(dst), "--no-progress", "--master", "local[2]",
            "--engine", "cold", "--summary-json", str(sj))
    first = run_cli(*args, env=gcs.env)
    assert first.returncode == 0, first.stderr
    summary = json.loads(sj.read_text())
    assert summary["files_copied"] == len(files) and summary["files_failed"] == 0
    (copy,) = summary["strategy"]["copy"]
    assert copy["strategy"] == "kept-here" and "2 processes forked here" in copy["why"]
    assert "spark_start_s" not in summary["phases"]  # no JVM started
    got = {p.relative_to(dst).as_posix(): p.read_bytes() for p in dst.rglob("*")
           if p.is_file() and ".pydistcp" not in p.parts}
    assert got == files
    again = run_cli(*args, env=gcs.env)
    assert again.returncode == 0, again.stderr
    s = json.loads(sj.read_text())
    assert (s["files_copied"], s["files_skipped"]) == (0, len(files))
