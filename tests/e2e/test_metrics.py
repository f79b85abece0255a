"""``--metrics-file`` on real runs (the API on the shared Spark session): the file parsed
back with prometheus-client after a copy, a no-op rerun and a failing run, and written
while a (throttled) copy still runs."""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import pytest

import distcp
from distcp import metrics
from distcp.callbacks import Callback
from tests.unit.test_metrics_file import samples

pytestmark = pytest.mark.e2e


def test_copy_rerun_and_failure_each_leave_exact_metrics(spark: Any, tmp_path: Path) -> None:
    src, dst, prom = tmp_path / "src", tmp_path / "dst", tmp_path / "textfile" / "pydistcp.prom"
    for table, files in (("orders", {"a.csv": b"1,2\n", "b.csv": b"3,4,5\n"}),
                         ("users", {"u.csv": b"ann\n"})):
        for name, data in files.items():
            (src / "tables" / table / name).parent.mkdir(parents=True, exist_ok=True)
            (src / "tables" / table / name).write_bytes(data)
    orders, users = (f"{(src / 'tables' / t).as_uri().replace('file:///', 'file:/')}"
                     for t in ("orders", "users"))

    with pytest.raises(distcp.ConfigurationError, match="--metrics-file: .*no such directory"):
        distcp.copy(str(src), str(dst), metrics_file=str(prom), progress=False)
    assert not prom.parent.exists()
    prom.parent.mkdir()
    before = time.time()
    s = distcp.copy(str(src), str(dst), dataset_glob="tables/*", metrics_file=str(prom),
                    progress=False)
    assert s.ok and s.files_copied == 3
    got = samples(prom)
    assert got[("pydistcp_files_transferred_total", ())] == 3
    assert got[("pydistcp_bytes_transferred_total", ())] == 4 + 6 + 4
    assert got[("pydistcp_errors_total", ())] == 0
    per_dataset = {labels[0][1]: value for (name, labels), value in got.items()
                   if name == "pydistcp_dataset_files_transferred_total"}
    assert sorted(per_dataset.values()) == [1, 2] and len(per_dataset) == 2, per_dataset
    assert {k.rsplit("/", 1)[-1] for k in per_dataset} == {"orders", "users"}, (orders, users)
    assert got[("pydistcp_run_success", ())] == 1 and got[("pydistcp_run_finished", ())] == 1
    first_success = got[("pydistcp_last_success_timestamp_seconds", ())]
    assert before <= first_success <= time.time()

    s = distcp.copy(str(src), str(dst), dataset_glob="tables/*", metrics_file=str(prom),
                    progress=False)  # nothing new
    got = samples(prom)
    assert got[("pydistcp_files_transferred_total", ())] == 0
    assert got[("pydistcp_files_skipped_total", ())] == 3
    assert got[("pydistcp_last_success_timestamp_seconds", ())] > first_success
    second_success = got[("pydistcp_last_success_timestamp_seconds", ())]

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "good.gz").write_bytes(gzip.compress(b"fine"))
    (bad / "broken.gz").write_bytes(b"not gzip at all")
    s = distcp.copy(str(bad), str(tmp_path / "dst2"), convert=["gunzip"],
                    metrics_file=str(prom), progress=False)
    assert not s.ok
    got = samples(prom)
    assert got[("pydistcp_errors_total", ())] == 1
    assert got[("pydistcp_run_success", ())] == 0
    assert got[("pydistcp_last_success_timestamp_seconds", ())] == second_success


class _ReadsTheFile(Callback):
    """Reads the metrics file on every progress update of a running copy."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: list[dict[Any, float]] = []

    def update(self, files: int, nbytes: int) -> None:
        if self.path.exists():
            self.seen.append(samples(self.path))


def test_the_file_is_written_while_the_copy_runs(spark: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "TICK_INTERVAL", 0.0)  # every tick writes
    src, prom = tmp_path / "src", tmp_path / "pydistcp.prom"
    src.mkdir()
    (src / "big.bin").write_bytes(b"x" * (3 << 20))
    reader = _ReadsTheFile(prom)
    s = distcp.copy(str(src), str(tmp_path / "dst"), bwlimit="1M", metrics_file=str(prom),
                    callback=reader, progress=False)  # about 3 s: several ticks
    assert s.ok
    assert reader.seen, "no progress tick wrote the file before the end"
    assert all(m[("pydistcp_run_finished", ())] == 0 for m in reader.seen)
    assert samples(prom)[("pydistcp_run_finished", ())] == 1
