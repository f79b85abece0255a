"""Copying in this process (``run.here``): which plans it takes, how many threads, and
a unit whose code raised failing its files as data, never the run."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from distcp.configuration import CopyConfiguration
from distcp.copying.taskspec import TaskSpec
from distcp.model import CopyableFile, FileStatus, TaskResult, WorkUnit
from distcp.run import here
from distcp.run.choice import HERE_BYTES, HERE_FILES, copies_here


def _files(n: int, size: int = 10) -> list[CopyableFile]:
    return [CopyableFile(FileStatus(f"/src/f{i}", size, 1.0), f"/dst/f{i}", "urn", "set")
            for i in range(n)]


def _cfg(**kw: object) -> CopyConfiguration:
    return replace(CopyConfiguration(sources=("/src",), destination="/dst"), **kw)


@pytest.mark.parametrize(("cfg", "files", "kept", "catalog", "here_"), [
    (_cfg(), _files(3), 0, False, True),
    (_cfg(), _files(HERE_FILES), 0, False, True),
    (_cfg(), _files(HERE_FILES + 1), 0, False, False),
    (_cfg(), _files(2, HERE_BYTES), 0, False, False),
    (_cfg(), _files(3), 1, False, False),                      # files kept on executors
    (_cfg(), _files(3), 0, True, False),                       # the catalog starts Spark
    (_cfg(master="spark://h:7077"), _files(3), 0, False, False),  # a cluster's tasks
    (_cfg(master="sc://h:15002"), _files(3), 0, False, False),
    (_cfg(split_size=8 << 20), _files(3), 0, False, False),
    (_cfg(copying="spark"), _files(3), 0, False, False),
    (_cfg(), _files(3), 0, False, "splits"),                   # ranges over idle cores
    (_cfg(copying="driver"), _files(HERE_FILES + 1, HERE_BYTES), 0, False, True),
])
def test_which_plans_are_copied_here(cfg: CopyConfiguration, files: list[CopyableFile],
                                     kept: int, catalog: bool, here_: bool | str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # no caller's session: a session an earlier test left active (the session-scoped
    # ``spark`` fixture, local) would say where tasks run instead of ``cfg.master``
    if "pyspark.sql" in sys.modules:
        monkeypatch.setattr(sys.modules["pyspark.sql"].SparkSession, "getActiveSession",
                            classmethod(lambda cls: None))
    splits = here_ == "splits"
    assert (copies_here(cfg, files, kept, catalog, splits) is not None) is (here_ is True)


@pytest.mark.parametrize(("master", "parallelism", "threads"), [
    ("local[3]", None, 3), ("local", None, 1), ("local[2]", 5, 5), ("local[2,3]", None, 2)])
def test_one_thread_per_core_of_the_local_master(master: str, parallelism: int | None,
                                                 threads: int) -> None:
    assert here.cores_here(_cfg(master=master, parallelism=parallelism)) == threads


def test_a_unit_whose_code_raised_fails_its_files_and_the_others_are_copied(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    files = _files(4)
    units = [WorkUnit(0, tuple(files[:2])), WorkUnit(1, tuple(files[2:]))]

    def fake(unit: WorkUnit, spec: TaskSpec, attempt: str) -> Iterator[TaskResult]:
        if unit.unit_id == 0:
            raise RuntimeError("disk on fire\nsecond line")
        for f in unit.files:
            yield TaskResult(guid=f.guid, unit_id=unit.unit_id, attempt=attempt,
                             origin=f.origin.url, destination=f.destination,
                             dataset_urn=f.dataset_urn, file_set=f.file_set, status="ok")

    monkeypatch.setattr(here, "stream_work_unit", fake)
    spec = TaskSpec(job_id="j", staging_root=str(tmp_path / "s"),
                    progress_root=str(tmp_path / "p"), state_root=str(tmp_path))
    results = here.run_here(units, spec, 2)
    assert [(r.origin, r.status) for r in results] == [
        ("/src/f0", "failed"), ("/src/f1", "failed"), ("/src/f2", "ok"), ("/src/f3", "ok")]
    assert results[0].message == "/src/f0: copy failed: disk on fire"
    assert results[0].error_type == "RuntimeError"
    assert results[2].attempt.startswith("here")
