"""A task process builds Arrow arrays without importing pandas, and still converts to
pandas when asked (``distcp.spark.pandasprobe``); checked in fresh interpreters, since
the test process has pandas already."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PROBE = (
    "import sys\n"
    "import pyarrow as pa\n"
    "from distcp.spark.pandasprobe import skip_pandas_probe\n"
    "{before}\n"
    "pa.array([1, 2]); pa.array([b'x'], pa.binary())\n"
    "print('pandas' in sys.modules)\n"
    "import pandas\n"
    "print(pa.table({{'a': [1, 2]}}).to_pandas()['a'].tolist(), "
    "pa.array(pandas.Series([3])).to_pylist())\n")


def _run(before: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(before=before)], check=False,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_arrays_are_built_without_importing_pandas_and_pandas_still_works() -> None:
    assert _run("skip_pandas_probe(); skip_pandas_probe()") == ["False", "[1, 2] [3]"]


def test_without_it_pyarrow_imports_pandas_for_its_first_array() -> None:
    # the cost this spares: if pyarrow stops probing, this test says so
    assert _run("") == ["True", "[1, 2] [3]"]


def test_a_process_that_has_pandas_keeps_it_untouched() -> None:
    assert _run("import pandas; skip_pandas_probe()") == ["True", "[1, 2] [3]"]


_TASK = (
    "import pickle, sys\n"
    "import pyarrow as pa\n"
    "from distcp.spark.arrow import map_pickled\n"
    "with open(sys.argv[1], 'rb') as f:\n"
    "    batches = list(pa.ipc.open_stream(f))  # no array built from Python objects\n"
    "def runner(attempt):\n"
    "    return lambda items: (iter([item * 2]) for item in items)\n"
    "out = list(map_pickled(runner, iter(batches)))\n"
    "print('pandas' in sys.modules, pickle.loads(out[0].column('results')[0].as_py()))\n")


def test_the_executor_side_of_every_job_skips_the_probe(tmp_path: Path) -> None:
    import pickle

    import pyarrow as pa

    batch = pa.RecordBatch.from_arrays(
        [pa.array([7], pa.int64()), pa.array([pickle.dumps(21)], pa.binary())],
        names=["unit_id", "payload"])
    stream = tmp_path / "items.arrow"
    with pa.OSFile(str(stream), "wb") as f, pa.ipc.new_stream(f, batch.schema) as w:
        w.write_batch(batch)
    out = subprocess.run([sys.executable, "-c", _TASK, str(stream)], check=False,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "42"]
