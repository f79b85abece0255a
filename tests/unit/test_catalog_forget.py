"""A catalog registration that cannot be made is removable by a documented command:
``pydistcp cleanup DST --forget-registrations`` drops the commits holding nothing but a
registration (their data is published), never one with data steps left; ``status``
names such a commit and the command."""

from __future__ import annotations

import subprocess
from pathlib import Path

from distcp.commit.catalog_steps import RegisterPartitions
from distcp.commit.log import CommitStepStore
from distcp.commit.steps import CommitSequence, PublishFiles
from tests.conftest import PYDISTCP, cli_env


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYDISTCP, *args], capture_output=True, text=True, check=False,
                          env=cli_env(), stdin=subprocess.DEVNULL, timeout=120)


def test_cleanup_forgets_registrations_and_nothing_else(tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    state = dst / ".pydistcp"
    store = CommitStepStore(str(state), {})
    register = RegisterPartitions("web.visits", (((("dt", "1"),), f"{dst}/dt=1"),
                                                 ((("dt", "2"),), f"{dst}/dt=2")))
    store.persist(CommitSequence("urn:a", "all", (register,), "job-1-a"), "job-1")
    data = PublishFiles(((f"{state}/staging/job-2/x", f"{dst}/x", 1),))
    store.persist(CommitSequence("urn:b", "all", (data, register), "job-2-b"), "job-2")

    shown = _cli("status", str(dst))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("a catalog registration an earlier run could not make") == 1
    assert "'pydistcp cleanup DST --forget-registrations' drops it" in shown.stdout

    dry = _cli("cleanup", str(dst), "--forget-registrations", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would forget 1 pending catalog registration(s)" in dry.stdout
    assert len(store.pending()) == 2

    done = _cli("cleanup", str(dst), "--forget-registrations")
    assert done.returncode == 0, done.stderr
    assert "; forgot 1 pending catalog registration(s)" in done.stdout
    (left,) = store.pending()
    assert left.sequence.id == "job-2-b"  # data steps left: never touched

    plain = _cli("cleanup", str(dst))
    assert "registration" not in plain.stdout  # not asked, not mentioned
