"""Copying in this process (``run.here``): which plans it takes, how many processes, and
a unit whose code raised, or whose forked process died, failing its files as data,
never the run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.copying.taskspec import TaskSpec
from distcp.model import CopyableFile, FileStatus, TaskResult, WorkUnit
from distcp.planning import beside
from distcp.run import choice, here
from distcp.run.choice import (
    HERE_BYTES,
    HERE_FILES,
    HERE_FORKED,
    HERE_THREADS_COLD,
    HERE_UPLOADS,
    copies_here,
    held_here,
)


def _files(n: int, size: int = 10) -> list[CopyableFile]:
    return [CopyableFile(FileStatus(f"/src/f{i}", size, 1.0), f"/dst/f{i}", "urn", "set")
            for i in range(n)]


def _cfg(**kw: object) -> CopyConfiguration:
    return replace(CopyConfiguration(sources=("/src",), destination="/dst"), **kw)


@pytest.mark.parametrize(("cfg", "files", "kept", "catalog", "here_"), [
    (_cfg(), _files(3), 0, False, True),
    # forked processes take the same bound on a cheap session: past it the kept
    # files are copied here too (kept_here), so a plan held on the driver is as well
    (_cfg(engine="warm"), _files(HERE_FORKED), 0, False, True),
    (_cfg(engine="warm"), _files(HERE_FORKED + 1), 0, False, False),
    # forked processes copy big files at a task's pace: no bound of bytes
    (_cfg(engine="warm"), _files(8, 256 << 20), 0, False, True),
    (_cfg(engine="cold"), _files(HERE_FORKED), 0, False, True),  # a JVM of its own
    (_cfg(engine="cold"), _files(HERE_FORKED + 1), 0, False, False),
    (_cfg(engine="cold"), _files(2, 1 << 40), 0, False, True),
    # kept, and copied here too (kept_here), on either engine
    (_cfg(engine="warm"), _files(3), 1, False, True),
    (_cfg(engine="cold"), _files(3), 1, False, True),
    (_cfg(engine="warm", copying="spark"), _files(3), 1, False, False),  # on executors
    (_cfg(), _files(3), 0, True, False),                       # the catalog starts Spark
    (_cfg(master="spark://h:7077"), _files(3), 0, False, False),  # a cluster's tasks
    (_cfg(master="sc://h:15002"), _files(3), 0, False, False),
    # ranges of a big file: units of the forked processes, written at their offsets
    (_cfg(split_size=8 << 20), _files(3), 0, False, True),
    # ... or parts of the file's upload, each range a unit of a thread
    (_cfg(split_size=8 << 20, destination="s3://b/dst"), _files(3), 0, False, True),
    # ranges a join task would concatenate (GCS composes objects whole): Spark's
    (_cfg(split_size=8 << 20, destination="gs://b/dst"), _files(3), 0, False, False),
    (_cfg(destination="gs://b/dst"), _files(3), 0, False, "splits"),
    (_cfg(copying="spark"), _files(3), 0, False, False),
    (_cfg(destination="s3://b/dst"), _files(3), 0, False, "splits here"),  # over idle cores
    (_cfg(copying="driver"), _files(HERE_FORKED + 1, HERE_BYTES), 0, False, True),
    # an object store in the run: threads copy, with the small bound of files; their
    # bytes are bound only when a converter's chain runs in them
    (_cfg(engine="cold", destination="s3://b/dst"), _files(HERE_THREADS_COLD), 0, False, True),
    (_cfg(engine="cold", destination="s3://b/dst"), _files(HERE_THREADS_COLD + 1), 0, False,
     False),
    # warm, thin uploads of local files wait on their requests: their own bound;
    # downloads (each file's write and check hold the GIL), stores to stores and
    # uploads through an SDK (Azure's, Google's) keep the small one
    (_cfg(engine="warm", destination="s3://b/dst"), _files(HERE_UPLOADS), 0, False, True),
    (_cfg(engine="warm", destination="s3://b/dst"), _files(HERE_UPLOADS + 1), 0, False,
     False),
    (_cfg(engine="warm", sources=("s3://b/src",)), _files(HERE_FILES), 0, False, True),
    (_cfg(engine="warm", sources=("s3://b/src",)), _files(HERE_FILES + 1), 0, False, False),
    (_cfg(engine="warm", sources=("s3://b/src",), destination="az://c/dst"),
     _files(HERE_FILES + 1), 0, False, False),
    (_cfg(engine="warm", state_dir="s3://b/state"), _files(HERE_FILES + 1), 0, False, False),
    (_cfg(engine="warm", destination="az://c/dst"), _files(HERE_FILES + 1), 0, False, False),
    (_cfg(engine="warm", destination="gs://b/dst"), _files(HERE_FILES + 1), 0, False, False),
    # write options take botocore's path on S3: the small bound
    (_cfg(engine="warm", destination="s3://b/dst", storage_class="STANDARD_IA"),
     _files(HERE_FILES + 1), 0, False, False),
    (_cfg(engine="cold", destination="s3://b/dst"), _files(4, 256 << 20), 0, False, True),
    (_cfg(engine="warm", sources=("s3://b/src",)), _files(2, 1 << 40), 0, False, True),
    (_cfg(engine="cold", destination="s3://b/dst", converters=("gzip",)),
     _files(1, HERE_BYTES), 0, False, True),
    (_cfg(engine="cold", destination="s3://b/dst", converters=("gzip",)),
     _files(1, HERE_BYTES + 1), 0, False, False),
    (_cfg(engine="cold", sources=("az://c/src",)), _files(HERE_THREADS_COLD + 1), 0, False,
     False),
    (_cfg(engine="cold", state_dir="s3://b/state"), _files(HERE_THREADS_COLD + 1), 0, False,
     False),
])
def test_which_plans_are_copied_here(cfg: CopyConfiguration, files: list[CopyableFile],
                                     kept: int, catalog: bool, here_: bool | str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beside, "_enabled", True)  # the command's process: it may fork
    # no caller's session: a session an earlier test left active (the session-scoped
    # ``spark`` fixture, local) would say where tasks run instead of ``cfg.master``
    if "pyspark.sql" in sys.modules:
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    splits = here_ in ("splits", "splits here")
    expected = here_ is True or here_ == "splits here"
    assert (copies_here(cfg, files, kept, catalog, splits) is not None) is expected


@pytest.mark.parametrize(("cfg", "held"), [
    # forked processes copy a kept plan too, cold as warm: it keeps past a chunk
    (_cfg(engine="cold"), None), (_cfg(engine="warm"), None),
    (_cfg(engine="cold", copying="spark"), None),
    (_cfg(engine="cold", split_size=1 << 20), None),  # collected: held whole anyway
    # threads: their own cold bound, ranges too (parts of the file's upload)
    (_cfg(engine="cold", split_size=1 << 20, destination="s3://b/dst"), HERE_THREADS_COLD),
    (_cfg(engine="cold", split_size=1 << 20, destination="gs://b/dst"), None),
    (_cfg(engine="cold", master="spark://h:7077"), None),
    (_cfg(engine="cold", destination="s3://b/dst"), HERE_THREADS_COLD),
    (_cfg(engine="warm", destination="s3://b/dst"), HERE_UPLOADS),
    (_cfg(engine="warm", sources=("s3://b/src",)), None)])
def test_driver_planning_holds_what_auto_would_copy_here(
        cfg: CopyConfiguration, held: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beside, "_enabled", True)
    if "pyspark.sql" in sys.modules:  # an earlier test's session would make it cheap
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    assert held_here(cfg) == held


def test_an_api_callers_process_copies_in_threads_with_their_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads copy there (its own threads' locks are not ours to fork), held by the
    GIL: cold, they take the threads' bound, not the forked processes'."""
    monkeypatch.setattr(beside, "_enabled", False)
    if "pyspark.sql" in sys.modules:
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    assert held_here(_cfg(engine="cold")) == HERE_THREADS_COLD
    assert copies_here(_cfg(engine="cold"), _files(HERE_THREADS_COLD), 0, False) is not None
    assert copies_here(_cfg(engine="cold"), _files(HERE_THREADS_COLD + 1), 0, False) is None


@pytest.mark.parametrize(("master", "parallelism", "threads"), [
    ("local[3]", None, 3), ("local", None, 1), ("local[2]", 5, 5), ("local[2,3]", None, 2)])
def test_one_thread_per_core_of_the_local_master(master: str, parallelism: int | None,
                                                 threads: int) -> None:
    assert choice.cores_here(_cfg(master=master, parallelism=parallelism)) == threads


def _spec(tmp_path: Path) -> TaskSpec:
    return TaskSpec(job_id="j", staging_root=str(tmp_path / "s"),
                    progress_root=str(tmp_path / "p"), state_root=str(tmp_path))


def _ok(unit: WorkUnit, spec: TaskSpec, attempt: str) -> Iterator[TaskResult]:
    for f in unit.files:  # the copying process's id as the message
        yield TaskResult(guid=f.guid, unit_id=unit.unit_id, attempt=attempt,
                         origin=f.origin.url, destination=f.destination,
                         dataset_urn=f.dataset_urn, file_set=f.file_set, status="ok",
                         message=str(os.getpid()))


@pytest.fixture(params=[True, False], ids=["forked", "threads"])
def forks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Units in forked processes (the command's way) or in threads (an API caller's)."""
    monkeypatch.setattr(beside, "_enabled", request.param)
    return bool(request.param)


def test_a_unit_whose_code_raised_fails_its_files_and_the_others_are_copied(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, forks: bool) -> None:
    files = _files(4)
    units = [WorkUnit(0, tuple(files[:2])), WorkUnit(1, tuple(files[2:]))]

    def fake(unit: WorkUnit, spec: TaskSpec, attempt: str) -> Iterator[TaskResult]:
        if unit.unit_id == 0:
            raise RuntimeError("disk on fire\nsecond line")
        yield from _ok(unit, spec, attempt)

    monkeypatch.setattr(here, "stream_work_unit", fake)
    results = here.run_here(units, _spec(tmp_path), 2)
    assert [(r.origin, r.status) for r in results] == [
        ("/src/f0", "failed"), ("/src/f1", "failed"), ("/src/f2", "ok"), ("/src/f3", "ok")]
    assert results[0].message == "/src/f0: copy failed: disk on fire"
    assert results[0].error_type == "RuntimeError"
    assert results[2].attempt == f"here{os.getpid()}"
    assert (results[2].message != str(os.getpid())) is forks  # copied in a child


def test_forked_processes_copy_every_unit_of_a_queue_longer_than_its_pipe(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(beside, "_enabled", True)
    monkeypatch.setattr(here, "stream_work_unit", _ok)
    files = _files(20_000)  # 80,000 bytes of unit numbers: more than a pipe's 64 KiB
    units = [WorkUnit(n, (f,)) for n, f in enumerate(files)]
    started: list[int] = []
    results = here.run_here(units, _spec(tmp_path), 2, lambda: started.append(1))
    assert [r.origin for r in results] == [f.origin.url for f in files]
    assert {r.status for r in results} == {"ok"} and started == [1]
    assert str(os.getpid()) not in {r.message for r in results}


def test_a_copying_process_that_dies_fails_the_files_of_its_unit(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(beside, "_enabled", True)

    def dies(unit: WorkUnit, spec: TaskSpec, attempt: str) -> Iterator[TaskResult]:
        if unit.unit_id == 1:
            os._exit(137)  # as if killed: no result, no finally
        yield from _ok(unit, spec, attempt)

    monkeypatch.setattr(here, "stream_work_unit", dies)
    files = _files(6)
    units = [WorkUnit(n, tuple(files[2 * n:2 * n + 2])) for n in range(3)]
    results = here.run_here(units, _spec(tmp_path), 2)
    assert [(r.origin, r.status) for r in results] == [
        ("/src/f0", "ok"), ("/src/f1", "ok"), ("/src/f2", "failed"), ("/src/f3", "failed"),
        ("/src/f4", "ok"), ("/src/f5", "ok")]
    assert results[2].error_type == "ChildProcessError"
    assert results[2].message.startswith("/src/f2: copy failed: copying process ")
    assert "exited with status 137" in results[2].message


@pytest.mark.parametrize(("master", "enabled", "every"), [
    ("local[2]", True, True),  # the command's walk forks: both cores, as Spark's tasks
    ("local[1]", True, True),
    ("local[4]", True, False),  # Spark's tasks would have more cores
    ("spark://cluster:7077", True, False),  # a cluster's executors
    ("local[2]", False, False),  # an API caller's process walks on one core
])
def test_a_big_local_tree_stays_on_the_driver_where_its_walk_has_sparks_cores(
        monkeypatch: pytest.MonkeyPatch, master: str, enabled: bool, every: bool) -> None:
    from distcp.planning import beside
    from distcp.spark.jvm import is_local_master

    monkeypatch.setattr(beside, "_enabled", enabled)
    # no session of another test's is active in a command's process
    monkeypatch.setattr(choice, "tasks_run_here", is_local_master)
    assert choice.walks_every_core(_cfg(master=master)) is every


@pytest.mark.parametrize(("cfg", "enabled", "here_"), [
    (_cfg(engine="cold"), True, True),  # the command, cold: no JVM for the kept chunks
    (_cfg(engine="warm"), True, True),  # the engine's tasks are no faster
    (_cfg(engine="cold", copying="spark"), True, False),
    (_cfg(engine="cold", destination="s3://b/dst"), True, False),  # threads: Spark instead
    (_cfg(engine="cold", master="spark://h:7077"), True, False),
    (_cfg(engine="cold"), False, False),  # an API caller's process does not fork
    (_cfg(engine="cold", converters=("gunzip",)), True, True),
    (_cfg(engine="cold", converters=("decrypt", "gunzip")), True, False),  # gpg: never forked
    (_cfg(engine="cold", converters=("decrypt", "untar")), True, False),
])
def test_which_kept_copies_are_copied_by_processes_forked_here(
        cfg: CopyConfiguration, enabled: bool, here_: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beside, "_enabled", enabled)
    if "pyspark.sql" in sys.modules:  # no caller's session (see above)
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    assert (choice.kept_here(cfg) is not None) is here_


#: An S3 reach the lean path takes (endpoint and credentials given): a child reads afresh.
_PLAIN = {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": "s"}


@pytest.mark.parametrize(("cfg", "forks"), [
    (_cfg(sources=("s3://b/src",), src_options=_PLAIN), True),
    (_cfg(sources=("/src", "s3://b/src"), src_options=_PLAIN), True),
    # s3fs's own chain (AWS without an endpoint), anonymous access: its client is made here
    (_cfg(sources=("s3://b/src",)), False),
    (_cfg(sources=("s3://b/src",), src_options={**_PLAIN, "anon": True}), False),
    # an object store written to: its client's pools and the lock's heartbeat stay here
    (_cfg(sources=("s3://b/src",), src_options=_PLAIN, destination="s3://b/dst",
          dst_options=_PLAIN), False),
    (_cfg(sources=("s3://b/src",), src_options=_PLAIN, state_dir="s3://b/state"), False),
    # GCS: each child builds its own SDK client; a GCS destination is written from here
    (_cfg(sources=("gs://b/src",)), True),
    (_cfg(sources=("gs://b/src",), destination="gs://b/dst"), False),
    (_cfg(sources=("az://c/src",)), False)])
def test_which_sources_the_processes_forked_here_read(
        cfg: CopyConfiguration, forks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beside, "_enabled", True)
    for name in [n for n in os.environ if n.startswith("AWS_")]:  # the options' reach only
        monkeypatch.delenv(name)
    assert choice.forks_here(cfg) is forks
    if "pyspark.sql" in sys.modules:  # no caller's session (see above)
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    assert (choice.here_files(cfg) == HERE_FORKED) is forks


def test_the_reason_names_who_copies_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes forked here only where every branch's ends allow it and this process
    may fork (the CLI's); else threads of this process, as ``run_units`` takes them."""
    local, to_gcs = _cfg(), _cfg(sources=("gs://b/src",), destination="gs://b/dst")
    monkeypatch.setattr(beside, "_enabled", True)
    assert choice.copiers_here([local]) == "processes forked here"
    assert choice.copiers_here([local, to_gcs]) == "threads of this process"
    (way,) = choice.copy_strategies(3, 0, None, "--copying driver",
                                    copiers=choice.copiers_here([local]))
    assert way.why == "3 files copied by processes forked here, no Spark job: " \
        "--copying driver"
    monkeypatch.setattr(beside, "_enabled", False)  # an API caller's process
    assert choice.copiers_here([local]) == "threads of this process"


@pytest.mark.parametrize(("converters", "forks"), [
    ((), True), (("gunzip", "untar"), True), (("decrypt",), False), (("decrypt", "gunzip"), False),
])
def test_a_gpg_chain_is_copied_here_by_threads_never_by_forked_processes(
        converters: tuple[str, ...], forks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked after the preflight ran python-gnupg in this process was killed by
    signal 11 or 6 starting gnupg's threads: gpg's converters copy here in threads."""
    monkeypatch.setattr(beside, "_enabled", True)
    assert choice.forks_here(_cfg(converters=converters)) is forks


@pytest.mark.parametrize(("cfg", "files", "why"), [
    # forked processes read at the pace of Spark's local tasks, without a job's start
    (_cfg(engine="cold"), 10 * HERE_FORKED, "forked processes at its tasks' pace"),
    (_cfg(engine="warm"), 10 * HERE_FORKED, "forked processes at its tasks' pace"),
    # threads (an object store) take the copy's bound: on a cheap session, its job is quick
    (_cfg(engine="warm", destination="s3://b/dst"), HERE_FILES, "at most 1,000"),
    (_cfg(engine="warm", destination="s3://b/dst"), HERE_FILES + 1, None),
    (_cfg(engine="cold", destination="s3://b/dst"), HERE_THREADS_COLD, "at most 10,000"),
    (_cfg(engine="cold", destination="s3://b/dst"), HERE_THREADS_COLD + 1, None),
    (_cfg(engine="cold", copying="spark"), 1, None),
    (_cfg(engine="warm", copying="driver"), HERE_FILES + 1, "--copying driver"),
    (_cfg(engine="cold", master="spark://h:7077"), 1, None)])  # a cluster's tasks
def test_which_checks_read_here(cfg: CopyConfiguration, files: int, why: str | None,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beside, "_enabled", True)
    if "pyspark.sql" in sys.modules:  # an earlier test's session would make it cheap
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    got = choice.reads_here(cfg, files)
    assert (got is None) is (why is None) and (why is None or why in str(got))


@pytest.mark.parametrize(("cfgs", "files", "here_"), [
    ([_cfg(engine="cold"), _cfg(engine="cold", destination="/dst2")], HERE_FORKED, True),
    ([_cfg(engine="cold"), _cfg(engine="cold", destination="/dst2")], HERE_FORKED + 1,
     False),
    # the warm engine: forked processes keep their bound, threads their own (uploads)
    ([_cfg(engine="warm"), _cfg(engine="warm", destination="/dst2")], HERE_FORKED, True),
    ([_cfg(engine="warm"), _cfg(engine="warm", destination="/dst2")], HERE_FORKED + 1,
     False),
    ([_cfg(engine="warm"), _cfg(engine="warm", destination="s3://b/d")], HERE_UPLOADS,
     True),
    ([_cfg(engine="warm"), _cfg(engine="warm", destination="s3://b/d")], HERE_UPLOADS + 1,
     False),
    # one branch on S3: threads for all, whose bound is the smaller
    ([_cfg(engine="cold"), _cfg(engine="cold", destination="s3://b/d")], HERE_THREADS_COLD,
     True),
    ([_cfg(engine="cold"), _cfg(engine="cold", destination="s3://b/d")],
     HERE_THREADS_COLD + 1, False),
    # a branch registering in the catalog starts the session anyway
    ([_cfg(engine="cold"), _cfg(engine="cold", destination="/d2", catalog_table="db.t")], 3,
     False),
    ([_cfg(engine="cold", copying="spark"), _cfg(engine="cold", destination="/d2")], 3,
     False)])
def test_which_forks_are_copied_here(cfgs: list[CopyConfiguration], files: int,
                                     here_: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beside, "_enabled", True)
    if "pyspark.sql" in sys.modules:
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    assert (choice.fork_copies_here(cfgs, files) is not None) is here_


def test_a_checks_digests_read_here_in_each_way(tmp_path: Path, forks: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Real files: each job's digest as the storage reads it, a missing file an error
    of its own, a unit whose code raised an error for each of its files."""
    from distcp.callbacks import Callback
    from distcp.checking import digests
    from distcp.checking.digests import DigestJob
    from distcp.storage import spec_for

    paths = []
    for n in range(6):
        paths.append(tmp_path / f"f{n}")
        paths[-1].write_bytes(os.urandom(1000 + n))
    paths[3].unlink()
    jobs = [DigestJob(n, "src", str(p), 1000 + n, spec_for(str(p), {}))
            for n, p in enumerate(paths)]
    cfg = _cfg(engine="cold", tasks=2)
    results = {r.key: r for r in here.read_here(cfg, jobs, "", Callback())}
    buffer = bytearray(1 << 16)
    for n, p in enumerate(paths):
        if n != 3:
            want = spec_for(str(p), {}).open().digest_of(str(p), buffer)
            assert (results[n].digest, results[n].size) == (want.hexdigest(), 1000 + n)
    assert results[3].error.startswith(f"cannot read {paths[3]}")
    real = digests.digest_one

    def flaky(job: DigestJob, buffer: bytearray) -> digests.DigestResult:
        if job.key == 4:
            raise RuntimeError("reader on fire")
        return real(job, buffer)

    monkeypatch.setattr(digests, "digest_one", flaky)
    results = {r.key: r for r in here.read_here(cfg, jobs, "", Callback())}
    failed = {k for k, r in results.items() if r.error}
    assert 4 in failed and 3 in failed and len(results) == 6
    assert results[4].error == f"cannot read {paths[4]}: reader on fire"
    assert all(not results[k].error for k in set(range(6)) - failed)
