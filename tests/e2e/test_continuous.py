"""``copy --continuous``: a Structured Streaming query publishing new files as they
arrive, exactly once across SIGKILLs and restarts.

In-process runs share the suite's Spark session (the query runs in it, as in the
engine of a caller); the crash test runs the command, as a user would, and kills
its whole process group with SIGKILL at random instants while a writer adds files.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp.callbacks import DEFAULT_CALLBACK, Callback
from distcp.configuration import CopyConfiguration
from distcp.planning import offsets
from distcp.planning.arrivals import Arrival, Arrivals
from distcp.planning.listing import find_datasets
from distcp.run.batch import run_batch
from distcp.run.pipeline import Within, run_copy
from distcp.storage import storage_for
from tests.conftest import PYDISTCP, cli_env, one_error_line, run_cli
from tests.e2e.test_fork_cli import tgz
from tests.fixtures.gpgkeys import ALICE, PASSPHRASE, gpg, keyring
from tests.fixtures.s3_server import S3Server, moto_server, s3  # noqa: F401 - fixtures
from tests.fixtures.stores import visible

pytestmark = pytest.mark.e2e


class Writer(threading.Thread):
    """Adds a file to ``root`` every ``every`` seconds (atomically: written beside, then
    renamed in), for ``seconds``; some land in sub-folders, one with an old mtime."""

    def __init__(self, root: Path, seconds: float, every: float = 0.1, seed: int = 7) -> None:
        super().__init__(daemon=True)
        self.root, self.seconds, self.every = root, seconds, every
        self.rng = random.Random(seed)
        self.written = 0

    def run(self) -> None:
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            n = self.written
            rel = Path(f"d{n % 3}") / f"f{n:05d}.bin" if n % 2 else Path(f"f{n:05d}.bin")
            self.put(rel, self.rng.randbytes(self.rng.randint(0, 4000)),
                     old=n % 17 == 5)
            self.written += 1
            time.sleep(self.every)

    def put(self, rel: Path, data: bytes, old: bool = False) -> None:
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.root.parent / f".{rel.name}.tmp"
        tmp.write_bytes(data)
        if old:  # as ``cp -p`` or ``rsync -t`` deliver: an mtime long past
            os.utime(tmp, (1_600_000_000, 1_600_000_000))
        tmp.rename(target)


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but its state folder, by relative path. The walk never
    enters ``.pydistcp``: a running copy removes its staging folders meanwhile (seen: a
    test's glob failed on a folder gone between listing and reading). A file gone
    between the two (a writer's temporary file, renamed) is left out."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".pydistcp"]
        for name in files:
            path = Path(folder, name)
            with contextlib.suppress(FileNotFoundError):
                found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def announced_sets(dst: Path) -> dict[str, int]:
    return announced_sets_at(dst / ".pydistcp")


def announced_sets_at(state: Path) -> dict[str, int]:
    """Each file set's COMPLETE event (kept in the state's event log): its idempotency
    key and how many files it published. A replay may send an event again, with the
    same key and the same count: a reader deduplicates by key."""
    lines = (state / "events" / "events.jsonl").read_text().splitlines()
    sets: dict[str, int] = {}
    for line in lines:
        facet = json.loads(line)["run"]["facets"].get("pydistcp_copy")
        if facet:
            assert sets.setdefault(facet["idempotency_key"], facet["files"]) == facet["files"]
    return sets


def test_new_files_are_published_as_they_arrive_until_idle(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "before.txt").write_bytes(b"there before the start")
    writer = Writer(src, seconds=4, every=0.1)
    writer.start()
    metrics = tmp_path / "metrics.prom"
    summary = distcp.copy(str(src), str(dst), continuous=True, interval=0.5, until_idle=True,
                          settle=0.2, max_files_per_batch=7, progress=False,
                          metrics_file=str(metrics))
    writer.join()
    assert summary.ok and writer.written >= 20
    assert files_of(dst) == files_of(src)  # the old-mtime files too
    published = sum(announced_sets(dst).values())
    assert published == len(files_of(src))  # each file published once
    status = json.loads((dst / ".pydistcp" / "continuous" / "status.json").read_text())
    assert status["state"] == "stopped" and status["batches"] >= 3  # 7 files a batch at most
    assert status["waiting_files"] == 0 and status["lag_seconds"] == 0
    assert status["files_copied"] == summary.files_copied == published
    text = metrics.read_text()
    assert "pydistcp_continuous_lag_seconds 0.0" in text
    assert f"pydistcp_continuous_batches {float(status['batches'])}" in text
    assert "pydistcp_run_finished 1.0" in text
    shown = run_cli("status", str(dst))
    assert shown.returncode == 0, shown.stderr
    assert f"continuous copy: stopped, job {summary.job_id}, {status['batches']} batch(es), " \
        f"{published} files" in shown.stdout
    assert "lag 0.0 s, waiting 0 files" in shown.stdout


def test_a_query_killed_while_logging_its_first_batch_does_not_block_the_restart(
        spark: Any, tmp_path: Path) -> None:
    """A SIGKILL while Spark writes batch 0's offsets leaves that write's temporary file
    in the checkpoint (seen in CI); Spark refuses such a folder at every later start
    ("should be empty on batch 0"). The restart clears it, says so, and copies."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.txt").write_bytes(b"there before the start")
    checkpoint = dst / ".pydistcp" / "continuous" / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"8e1f0c1e-5b36-4b8e-9d55-5c0f6f1b3a0e"}')
    (checkpoint / "offsets" / ".0.6a1c3f0e-2d4b-4a8e-9f1e-3c5d7b9a1e2f.tmp").write_text("v1\n")
    messages: list[str] = []

    class Told(Callback):
        def message(self, text: str) -> None:
            messages.append(text)

    writer = Writer(src, seconds=2, every=0.2)
    writer.start()
    summary = distcp.copy(str(src), str(dst), continuous=True, interval=0.5, until_idle=True,
                          settle=0.2, progress=False, callback=Told())
    writer.join()
    assert summary.ok
    assert files_of(dst) == files_of(src)
    assert "the last query was killed before its first batch; its checkpoint starts anew" \
        in messages
    assert any(name.isdigit() for name in os.listdir(checkpoint / "offsets"))


def test_encrypted_archives_landing_are_expanded_as_they_land(spark: Any, tmp_path: Path
                                                               ) -> None:
    ring = keyring()
    src, dst = tmp_path / "landing", tmp_path / "dst"
    src.mkdir()
    members = {"r/a.csv": b"a,b\n1,2\n", "r/b.bin": bytes(range(256)) * 40}

    def land() -> None:
        for n in range(3):  # more often than the interval: --until-idle waits for the last
            time.sleep(0.3)
            sealed = gpg(ring.home, "--trust-model", "always", "-r", ALICE, "--encrypt",
                         data=tgz({**members, "n.txt": str(n).encode()})).stdout
            Writer(src, 0).put(Path(f"drop{n}.tar.gz.gpg"), sealed)

    landing = threading.Thread(target=land)
    landing.start()
    summary = distcp.copy(str(src), str(dst), continuous=True, interval=2, until_idle=True,
                          settle=0.3, convert=["decrypt", "gunzip", "untar"],
                          gpg_home=ring.home, gpg_passphrase=PASSPHRASE, progress=False)
    landing.join()
    assert summary.ok, summary.failures
    for n in range(3):
        got = files_of(dst / f"drop{n}")
        assert got == {**members, "n.txt": str(n).encode()}


def test_a_continuous_copy_to_s3_publishes_each_new_file_once(
        spark: Any, tmp_path: Path, s3: S3Server) -> None:  # noqa: F811
    src = tmp_path / "src"
    src.mkdir()
    writer = Writer(src, seconds=3, every=0.15)
    writer.start()
    summary = distcp.copy(str(src), "s3://dst/landed", continuous=True, interval=0.5,
                          until_idle=True, settle=0.2, progress=False)
    writer.join()
    assert summary.ok, summary.failures
    assert visible(s3, "dst", "landed/") == files_of(src)
    assert summary.files_copied == len(files_of(src))


@pytest.mark.parametrize("flags, says", [
    (("--until-idle",), "--until-idle needs --continuous"),
    (("--continuous", "--delete"), "--continuous cannot be used with --delete"),
    (("--continuous", "--interval", "0"), "--interval must be at least 0.1"),
    (("--continuous", "--master", "sc://h:15002"),
     "--continuous cannot be used with a Spark Connect master"),
])
def test_what_a_continuous_copy_refuses_is_one_line_exit_2(tmp_path: Path, flags: tuple[str, ...],
                                                           says: str) -> None:
    (tmp_path / "src").mkdir()
    r = run_cli("copy", str(tmp_path / "src"), str(tmp_path / "dst"), *flags)
    assert r.returncode == 2, r.stderr
    assert says in one_error_line(r.stderr)
    assert not (tmp_path / "dst").exists()


def _start(src: Path, dst: Path | str, *extra: str, env: dict[str, str] | None = None
           ) -> subprocess.Popen[str]:
    return subprocess.Popen([*PYDISTCP, "copy", str(src), str(dst), "--continuous",
                             "--interval", "1", "--settle", "0.2", "--no-progress", *extra],
                            env=cli_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def said(err: str) -> str:
    """A run's stderr for a failed check, its error lines on the first line: the line a
    CI log's short summary keeps (``-ra``) when it cuts the rest."""
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    return " | ".join(errors[-3:] or err.splitlines()[-3:]) + "\n" + err


def _status(state: Path) -> dict[str, Any]:
    """The continuous status document under a state root (``DST/.pydistcp``)."""
    try:
        return dict(json.loads((state / "continuous" / "status.json").read_text()))
    except (FileNotFoundError, ValueError):
        return {"job_id": "", "batches": -1, "state": ""}


class Dropper(threading.Thread):
    """Drops an encrypted archive (``drops/dropN.tar.gz.gpg``) every ``every`` seconds
    for ``seconds``, written beside and renamed in; its members by drop."""

    def __init__(self, root: Path, ring: Any, seconds: float, every: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.root, self.ring, self.seconds, self.every = root, ring, seconds, every
        self.members: dict[str, dict[str, bytes]] = {}

    def run(self) -> None:
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            n = len(self.members)
            members = {"rows.csv": f"n,v\n{n},{n * n}\n".encode(),
                       "blob.bin": random.Random(n).randbytes(5000)}
            sealed = gpg(self.ring.home, "--trust-model", "always", "-r", ALICE, "--encrypt",
                         data=tgz(members)).stdout
            Writer(self.root, 0).put(Path("drops") / f"drop{n}.tar.gz.gpg", sealed)
            self.members[f"drop{n}"] = members
            time.sleep(self.every)

    def expanded(self) -> dict[str, bytes]:
        """What the destination holds of the drops: each archive expanded in place."""
        return {f"drops/{drop}/{name}": data for drop, members in self.members.items()
                for name, data in members.items()}


def killed_twice_then_caught_up(src: Path, dst: str, state: Path, *extra: str,
                                env: dict[str, str] | None = None, seconds: float = 30,
                                dropper: Callable[[Path], threading.Thread] | None = None
                                ) -> None:
    """A writer adds a file every 0.1 s for ``seconds`` (and ``dropper`` its archives);
    the copy is killed (its whole process group, JVM included) twice at random instants
    after its query started (after its first batch while files arrive), and restarted;
    a last start with --until-idle catches up."""
    src.mkdir()
    writer = Writer(src, seconds=seconds, every=0.1)
    writer.start()
    drops = dropper(src) if dropper else None
    if drops:
        drops.start()
    rng = random.Random(2026)
    shown = ("status", dst, "--state-dir", str(state))
    for _ in range(2):
        before = _status(state)["job_id"]
        proc = _start(src, dst, *extra, env=env)
        try:
            begun = time.monotonic()
            while (_status(state)["job_id"] == before or _status(state)["state"] != "running") \
                    and time.monotonic() - begun < 120:
                time.sleep(0.2)
            # While files still arrive, among its batches; once they stopped no batch comes
            # (seen: a second start waited 120 s for one), so any instant of the query.
            while writer.is_alive() and _status(state)["batches"] < 1 \
                    and time.monotonic() - begun < 120:
                time.sleep(0.2)
            time.sleep(rng.uniform(0.5, 4.0))
            running = run_cli(*shown, env=env)
            assert "continuous copy: running, " in running.stdout, \
                running.stdout + running.stderr
        finally:  # a failed check must not leave the copy running for the rest of the suite
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        killed = run_cli(*shown, env=env)
        assert "continuous copy: not running (ended without stopping)" in killed.stdout
    writer.join()
    if drops:
        drops.join()
    last = _start(src, dst, "--until-idle", *extra, env=env)
    _out, err = last.communicate(timeout=300)
    assert last.returncode == 0, said(err)
    published = sum(announced_sets_at(state).values())  # a file set counts its outputs
    want = sum(len(m) for m in drops.members.values()) if isinstance(drops, Dropper) \
        else len(files_of(src))
    assert published == want  # each once
    assert not list((state / "commits").glob("*.json"))  # nothing pending


def test_sigkill_at_random_instants_loses_nothing_and_publishes_each_file_once(
        tmp_path: Path) -> None:
    """For half a minute, files arrive (through both kills); two kills at random instants."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    killed_twice_then_caught_up(src, str(dst), dst / ".pydistcp", seconds=30)
    assert files_of(dst) == files_of(src)


def test_sigkill_while_encrypted_archives_land_expands_each_once(tmp_path: Path) -> None:
    """Archives land in a folder the copy decrypts and expands (a converter applies to
    every file of a run, so the landing folder holds archives only); two kills at random
    instants: each archive expanded once, whole, none half-visible."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    ring = keyring()
    secret = tmp_path / "passphrase"
    secret.write_text(PASSPHRASE)
    drops: list[Dropper] = []

    def dropper(root: Path) -> Dropper:
        drops.append(Dropper(root, ring, seconds=30, every=0.5))
        return drops[0]

    killed_twice_then_caught_up(src, str(dst), dst / ".pydistcp", "--convert",
                                "decrypt,gunzip,untar", "--gpg-home", str(ring.home),
                                "--gpg-passphrase-file", str(secret), seconds=0,
                                dropper=dropper)
    assert len(drops[0].members) >= 20
    assert files_of(dst) == drops[0].expanded()


def test_sigkill_of_a_continuous_copy_to_s3_loses_nothing_and_publishes_each_file_once(
        tmp_path: Path, s3: S3Server) -> None:  # noqa: F811
    """The same onto the S3 server (the state kept locally, with --state-dir). A batch
    Spark runs again after a kill used to publish the files the restart's catch-up had
    just published (see the test below)."""
    src, state = tmp_path / "src", tmp_path / "state"
    killed_twice_then_caught_up(src, "s3://dst/landed", state, "--state-dir", str(state),
                                env=s3.env, seconds=15)
    assert visible(s3, "dst", "landed/") == files_of(src)


def test_a_batch_offered_files_published_since_the_destination_was_listed_skips_them(
        spark: Any, tmp_path: Path, s3: S3Server) -> None:  # noqa: F811
    """The second publishes after two kills on S3, without the kills: a restart's
    catch-up published files that Spark then ran again in the batch it had offered them
    in, whose stat of each target was answered from a listing of the destination folder
    the process had cached before the catch-up published (the finder's ``isdir``): the
    files looked missing there and were published again. Here the catch-up publishes
    two files and another writer a third, then a batch is offered all three."""
    src, state = tmp_path / "src", tmp_path / "state"
    src.mkdir()
    (src / "first.bin").write_bytes(b"there before")
    cfg = CopyConfiguration.build([str(src)], "s3://dst/landed", state_dir=str(state),
                                  progress=False)
    assert run_copy(cfg, DEFAULT_CALLBACK, Within(spark)).files_copied == 1
    for name in ("a.bin", "b.bin"):
        (src / name).write_bytes(name.encode() * 100)
    assert run_copy(cfg, DEFAULT_CALLBACK, Within(spark)).files_copied == 2  # the catch-up
    (src / "c.bin").write_bytes(b"c.bin" * 100)
    s3.client().put_object(Bucket="dst", Key="landed/c.bin", Body=b"c.bin" * 100)
    (urn,) = (ds.urn for ds in find_datasets(cfg))
    storage = storage_for(str(src), {})
    offered = [Arrival(urn, str(src / n), storage.stat(str(src / n)))
               for n in ("a.bin", "b.bin", "c.bin")]
    done = run_batch(cfg, offered, spark, DEFAULT_CALLBACK)
    assert done.ok and done.files_copied == 0 and done.files_skipped == 3
    assert sum(announced_sets_at(state).values()) == 3  # each file announced once


def test_a_batch_killed_after_its_commit_record_is_finished_by_the_restart(
        tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()

    def later() -> None:
        while _status(dst / ".pydistcp")["state"] != "running":  # the catch-up has ended
            time.sleep(0.1)
        Writer(src, 0).put(Path("new.bin"), b"arrived while running")

    threading.Thread(target=later, daemon=True).start()
    proc = _start(src, dst, env={"DISTCP_CRASH_AT": "after_persist:1"})
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 137, err
    assert not (dst / "new.bin").exists()
    assert len(list((dst / ".pydistcp" / "commits").glob("*.json"))) == 1
    r = run_cli("copy", str(src), str(dst), "--continuous", "--interval", "0.5",
                "--until-idle", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert (dst / "new.bin").read_bytes() == b"arrived while running"
    assert sum(announced_sets(dst).values()) == 1
    assert "recovered 1" in r.stdout or "replayed" in r.stdout, r.stdout


@pytest.mark.parametrize("engine", ["cold", "warm"])
def test_sigterm_to_the_process_group_finishes_the_batch_and_exits_0(
        tmp_path: Path, engine: str, request: pytest.FixtureRequest) -> None:
    """As ``systemctl stop`` sends it: to every process of the group, the JVM too, which
    must outlive it until the batch is published. On the warm engine the batch runs in
    the engine's worker: the client waits for it before it stops the query."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    proc = _start(src, dst, env=request.getfixturevalue("warm_engine")
                  if engine == "warm" else None)
    begun = time.monotonic()
    while _status(dst / ".pydistcp")["state"] != "running" and time.monotonic() - begun < 120:
        time.sleep(0.1)
    writer = Writer(src, seconds=8, every=0.05)  # still writing when the signal comes
    writer.start()
    # The first batch takes what arrived while the query started (on a cold JVM, all
    # of the writer's first seconds): signalled once it has published, mid-stream.
    while _status(dst / ".pydistcp")["batches"] < 1 and time.monotonic() - begun < 120:
        time.sleep(0.1)
    assert _status(dst / ".pydistcp")["batches"] >= 1, "no batch within 120 s"
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    writer.join()
    assert proc.returncode == 0, said(err)  # seen once in CI: exit 1, its words cut off
    assert "Traceback" not in err
    status = _status(dst / ".pydistcp")
    assert status["state"] == "stopped"
    published = files_of(dst)
    assert published and all(files_of(src)[k] == v for k, v in published.items())
    assert f"copied {status['files_copied']} files" in out
    assert sum(announced_sets(dst).values()) == len(published)  # whole batches only


def test_a_fork_replicates_each_new_file_to_both_destinations(spark: Any, tmp_path: Path
                                                               ) -> None:
    src, dst, other = tmp_path / "src", tmp_path / "dst", tmp_path / "other"
    src.mkdir()
    writer = Writer(src, seconds=2, every=0.1)
    writer.start()
    summary = distcp.copy(str(src), str(dst), continuous=True, interval=0.5, until_idle=True,
                          settle=0.2, fork=[str(other)], progress=False)
    writer.join()
    assert summary.ok, summary.failures
    assert files_of(dst) == files_of(other) == files_of(src)


def test_a_stream_dataset_is_replicated_partition_by_partition_as_each_is_ready(
        spark: Any, tmp_path: Path) -> None:
    """A streaming job's hourly folders, each ready once its _SUCCESS lands: the source
    lists only from the watermark on, and each batch plans the dataset as a scheduled
    run would, moving its watermarks with the data."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "clicks").mkdir(parents=True)

    def stream() -> None:
        # A partition ready every 0.4 s, well within the 1.5 s interval: --until-idle
        # stops only after a whole interval in which none became ready.
        for hour in range(6):
            part = src / "clicks" / "2026" / "11" / "20" / f"{hour:02d}"
            Writer(src, 0).put(part.relative_to(src) / "part-0.json",
                               f'{{"hour": {hour}}}'.encode())
            time.sleep(0.2)
            Writer(src, 0).put(part.relative_to(src) / "_SUCCESS", b"")
            time.sleep(0.2)

    streaming = threading.Thread(target=stream)
    streaming.start()
    summary = distcp.copy(str(src), str(dst), finder="stream", ready_marker="_SUCCESS",
                          continuous=True, interval=1.5, until_idle=True, settle=0.2,
                          progress=False)
    streaming.join()
    assert summary.ok, summary.failures
    assert files_of(dst) == files_of(src)
    shown = run_cli("status", str(dst))
    assert "actual high 2026-11-20T05:00:00" in shown.stdout, shown.stdout


def test_on_the_warm_engine_the_query_runs_there_and_its_client_shows_each_batch(
        warm_engine: dict[str, str], tmp_path: Path) -> None:
    """The batches run in the engine's Python worker (the server's environment, its own
    folder); the client follows them: each batch's line, the totals, the status. Paths
    relative to the client's folder and the client's task variables reach the worker."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "before.txt").write_bytes(b"there before the start")
    writer = Writer(src, seconds=3, every=0.1)
    writer.start()
    r = run_cli("copy", "src", "dst", "--continuous", "--interval", "0.5", "--until-idle",
                "--settle", "0.2", "--max-files-per-batch", "5",
                "--metrics-file", "metrics.prom", cwd=tmp_path, env=warm_engine)
    writer.join()
    assert r.returncode == 0, r.stderr
    assert files_of(dst) == files_of(src)
    published = sum(announced_sets(dst).values())
    assert published == len(files_of(src))
    status = _status(dst / ".pydistcp")
    assert status["state"] == "stopped" and status["batches"] >= 3
    assert status["last_batch"]["pid"] != status["pid"]  # the engine's worker, not the client
    lines = [line for line in r.stderr.splitlines() if line.startswith("pydistcp: batch ")]
    assert len(lines) == min(status["batches"], 20), r.stderr  # each batch's line, shown
    assert f"copied {status['files_copied']} files" in r.stdout
    assert status["files_copied"] == published
    assert "pydistcp_continuous_batches" in (tmp_path / "metrics.prom").read_text()


def test_a_warm_engines_query_ends_when_its_client_is_killed(
        warm_engine: dict[str, str], tmp_path: Path) -> None:
    """SIGKILL of the client (no stop asked): the query it left in the engine stops at
    its next listing and publishes nothing more; a restart takes over and finishes."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.bin").write_bytes(b"a")
    proc = _start(src, dst, env=warm_engine)
    begun = time.monotonic()
    while not (dst / "a.bin").exists() and time.monotonic() - begun < 120:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    while _status(dst / ".pydistcp")["state"] != "running" and time.monotonic() - begun < 120:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    Writer(src, 0).put(Path("after.bin"), b"landed after the client died")
    time.sleep(4)  # four of its intervals: an orphaned query would have published it
    assert not (dst / "after.bin").exists()
    r = run_cli("copy", str(src), str(dst), "--continuous", "--interval", "0.5",
                "--until-idle", "--no-progress", env=warm_engine)
    assert r.returncode == 0, r.stderr
    assert files_of(dst) == files_of(src)
    assert sum(announced_sets(dst).values()) == 2


def test_listing_after_seen_lists_only_new_keys_and_skips_none_pending(
        tmp_path: Path, s3: S3Server) -> None:  # noqa: F811
    """``--listing-after-seen`` on S3: each read lists from StartAfter the last key seen
    below anything still pending (left by a full batch, or unsettled); a key that sorts
    before it is found by the next full listing."""
    client = s3.client()

    def put(key: str) -> None:
        client.put_object(Bucket="src", Key=f"landing/{key}", Body=key.encode())

    for key in ("2026-11-29T01.bin", "2026-11-29T02.bin", "2026-11-29T03.bin"):
        put(key)
    cfg = CopyConfiguration.build(["s3://src/landing"], str(tmp_path / "dst"), continuous=True,
                                  listing_after_seen=True, settle=0, max_files_per_batch=2)
    arrivals = Arrivals(cfg)

    def read() -> list[str]:
        batch, _ = arrivals.read(offsets.initial())
        return [a.path.rsplit("/", 1)[1] for a in batch]

    assert read() == ["2026-11-29T01.bin", "2026-11-29T02.bin"]  # the first: a full listing
    (urn,) = arrivals.starts
    assert arrivals.starts[urn].endswith("T02.bin")  # T03 is left: listed again next time
    put("2026-11-29T04.bin")
    assert read() == ["2026-11-29T03.bin", "2026-11-29T04.bin"]
    assert [p.rsplit("/", 1)[1] for p in arrivals.keys[urn]] == [
        "2026-11-29T03.bin", "2026-11-29T04.bin"]  # nothing before the start was listed
    put("2026-11-28-late.bin")  # sorts before everything seen
    put("2026-11-29T05.bin")
    assert read() == ["2026-11-29T05.bin"]
    arrivals.full_at[urn] = 0.0  # --full-listing-every has passed
    assert read() == ["2026-11-28-late.bin"]
    assert len(arrivals.keys[urn]) == 6
    assert read() == []


def test_a_continuous_copy_from_s3_listing_after_seen_publishes_each_new_object(
        spark: Any, tmp_path: Path, s3: S3Server) -> None:  # noqa: F811
    client = s3.client()
    for n in range(5):
        client.put_object(Bucket="src", Key=f"landing/{n:04d}.bin", Body=bytes([n]) * 100)

    def more() -> None:
        for n in range(5, 25):
            time.sleep(0.1)
            client.put_object(Bucket="src", Key=f"landing/{n:04d}.bin", Body=bytes([n]) * 100)

    adding = threading.Thread(target=more)
    adding.start()
    summary = distcp.copy("s3://src/landing", str(tmp_path / "dst"), continuous=True,
                          interval=0.5, until_idle=True, settle=0.2, listing_after_seen=True,
                          max_files_per_batch=4, progress=False)
    adding.join()
    assert summary.ok, summary.failures
    assert files_of(tmp_path / "dst") == {f"{n:04d}.bin": bytes([n]) * 100 for n in range(25)}
    assert sum(announced_sets(tmp_path / "dst").values()) == 25


def test_a_source_gone_mid_copy_ends_it_with_one_line(tmp_path: Path) -> None:
    """A listing that fails (the source folder removed) ends the copy with its cause in
    one line and the documented exit code, not Spark's traceback; what was published
    stays."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "a.bin").write_bytes(b"a")
    proc = _start(src, dst)
    begun = time.monotonic()
    while _status(dst / ".pydistcp")["state"] != "running" and time.monotonic() - begun < 120:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    src.rename(tmp_path / "moved")
    _out, err = proc.communicate(timeout=120)
    line = one_error_line(err)
    assert proc.returncode == 2, err
    assert "listing the continuous copy's sources failed" in line and str(src) in line
    assert line.endswith("the copy stopped")
    assert (dst / "a.bin").read_bytes() == b"a"
