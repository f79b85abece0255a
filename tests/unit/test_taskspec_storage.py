"""A TaskSpec resolves its destination's storage once where it lands, never per file,
and travels (pickle, cloudpickle) without it."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from pyspark import cloudpickle

from distcp.copying.taskspec import TaskSpec
from distcp.errors import DestinationNameError
from distcp.storage import StorageSpec


def test_refuse_protected_resolves_the_storage_once_for_every_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = TaskSpec(job_id="j", staging_root=str(tmp_path / "s"),
                    progress_root=str(tmp_path / "p"), dst=StorageSpec(str(tmp_path), "local"))
    opened = []
    real = StorageSpec.open
    monkeypatch.setattr(StorageSpec, "open", lambda self: opened.append(1) or real(self))
    for i in range(50):
        spec.refuse_protected(f"/src/{i}", str(tmp_path / f"out/{i}"))
    with pytest.raises(DestinationNameError):
        spec.refuse_protected("/src/long", str(tmp_path / ("x" * 300)))
    assert len(opened) == 1


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_a_spec_travels_without_the_storage_it_resolved(tmp_path: Path, dumps: object) -> None:
    spec = TaskSpec(job_id="j", staging_root="s", progress_root="p",
                    dst=StorageSpec(str(tmp_path), "local"))
    spec.refuse_protected("/src/a", str(tmp_path / "a"))
    assert "dst_storage" in spec.__dict__
    back = pickle.loads(dumps(spec))  # type: ignore[operator]
    assert back == spec and "dst_storage" not in back.__dict__
    back.refuse_protected("/src/a", str(tmp_path / "a"))
