"""The executor side of ``distcp.spark.arrow``, fed real Arrow batches (no Spark)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pyarrow as pa

from distcp.copying.join import joiner
from distcp.copying.task import TaskSpec, unit_runner
from distcp.spark.arrow import attempt_id, map_pickled, unpickled


def _batch(ids: list[int], items: list[object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.int64()), pa.array([pickle.dumps(i) for i in items], pa.binary())],
        names=["unit_id", "payload"])


def test_each_item_comes_back_under_its_id_with_the_attempt_the_factory_got() -> None:
    attempts: list[str] = []

    def factory(attempt: str):  # type: ignore[no-untyped-def]
        attempts.append(attempt)
        return lambda items: [[(attempt, item * 2)] for item in items]

    out = list(map_pickled(factory, iter([_batch([7, 9], [1, 2]), _batch([11], [5])])))
    assert attempts == [f"local{os.getpid()}"]  # once per task attempt, not per batch
    assert [b.column("unit_id").to_pylist() for b in out] == [[7, 9], [11]]
    results = [list(unpickled(p)) for b in out for p in b.column("results").to_pylist()]
    assert results == [[(attempts[0], 2)], [(attempts[0], 4)], [(attempts[0], 10)]]
    assert out[0].schema.names == ["unit_id", "results"]


def test_outside_spark_the_attempt_is_named_after_the_process() -> None:
    assert attempt_id() == f"local{os.getpid()}"


def test_copy_runner_yields_the_results_of_each_unit_in_order(tmp_path: Path) -> None:
    from distcp.configuration import CopyConfiguration
    from distcp.model import WorkUnit
    from distcp.planning.listing import plan_all

    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"alpha")
    (src / "b").write_bytes(b"bravo!")
    dst = tmp_path / "dst"
    files = sorted(plan_all(CopyConfiguration.build([str(src)], str(dst)),
                            lambda m: None).plan.files_to_copy, key=lambda f: f.destination)
    spec = TaskSpec("job", str(dst / ".pydistcp/staging/job"), str(dst / ".pydistcp/progress/job"))
    units = [WorkUnit(n, (f,)) for n, f in enumerate(files)]
    results = [list(rs) for rs in unit_runner(spec, "s0p0a0")(units)]
    assert [[Path(r.destination).name for r in rs] for rs in results] == [["a"], ["b"]]
    assert [Path(rs[0].staging).read_bytes() for rs in results] == [b"alpha", b"bravo!"]
    assert all(rs[0].attempt == "s0p0a0" for rs in results)


def test_join_runner_fails_a_join_whose_records_are_missing_as_data(tmp_path: Path) -> None:
    from distcp.copying.join import Join
    from distcp.model import TaskResult

    r = TaskResult(guid="g", unit_id=-1, attempt="split", origin=str(tmp_path / "src"),
                   destination=str(tmp_path / "dst"), dataset_urn="d", file_set="",
                   status="ok", staging=str(tmp_path / "data"), records=str(tmp_path / "recs"))
    (tmp_path / "recs").mkdir()
    [[out]] = joiner({}, 1 << 16, "digest", None, "s1p0a0")([Join(r, str(tmp_path / "recs"), 2, 10)])
    assert out.status == "failed" and out.attempt == "s1p0a0"
    assert out.staging == "" and out.records == ""
    assert "the record of range 0 vanished" in out.message
