#!/usr/bin/env python
"""Where pydistcp's time goes, per stage and per file, in-process (no Spark) and in Spark.

    python benchmarks/profile_copy.py [--only A|B] [--workdir DIR] [--repeat N] [--spark]
                                      [--cprofile]

Uses the data sets made by bench_copy.py (run it once first). Each stage is timed on
its own, median of --repeat runs:

- listing: distcp's plan_all (fsspec ``find(detail=True)`` + FileStatus/CopyableFile per
  entry) against a bare ``os.scandir`` walk;
- copy: ``distcp.copying.task.run_work_unit`` on one WorkUnit holding the whole data set, with
  --verify digest and size, against stripped-down loops that add one per-file step at a
  time (open/readinto/write, + xxh3, + chmod/utime, + verify re-read, + source re-stat,
  + fsspec ``url_to_fs`` calls) so each step's cost per file can be read off;
- publish: ``distcp.commit.publish.publish_plan`` (mkdirs + one rename per file) on those results;
- --spark: the same units through ``run_units`` in one SparkSession, cold (first job) and
  warm (second job), to separate Spark's first-job cost from the copy.

Prints a table and writes benchmarks/results/profile.json.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import json
import os
import pickle
import pstats
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from distcp.callbacks import Callback  # noqa: E402
from distcp.commit.publish import publish_plan  # noqa: E402
from distcp.configuration import CopyConfiguration  # noqa: E402
from distcp.copying.task import TaskSpec, run_work_unit  # noqa: E402
from distcp.planning.listing import plan_all, state_root  # noqa: E402
from distcp.planning.packing import pack, unit_count  # noqa: E402
from distcp.storage import filesystems as fsutil  # noqa: E402
from distcp.summary import Summary  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None,
          teardown: Callable[[], Any] | None = None) -> tuple[float, list[float], Any]:
    times, value = [], None
    for _ in range(repeat):
        if setup:
            setup()
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
        if teardown:
            teardown()
    return statistics.median(times), times, value


def rm(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


def scandir_walk(root: str) -> int:
    n, stack = 0, [root]
    while stack:
        for e in os.scandir(stack.pop()):
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            e.stat(follow_symlinks=False)
            n += 1
    return n


# ------------------------------------------------------------------ stripped copy loops


def loop_copy(files: list[Any], out: Path, buf: bytearray, *, digest: bool = False,
              attrs: bool = False, reread: bool = False, restat: bool = False,
              fsspec_calls: int = 0) -> None:
    import xxhash

    view = memoryview(buf)
    for i, f in enumerate(files):
        src = f.origin.url
        dst = str(out / f"{i}-0")
        for _ in range(fsspec_calls):
            fsutil.filesystem(src, {})
        h = xxhash.xxh3_128() if digest else None
        with open(src, "rb", buffering=0) as r, open(dst, "wb", buffering=0) as w:
            while n := r.readinto(view):
                if h is not None:
                    h.update(view[:n])
                w.write(view[:n])
        if reread:
            os.stat(dst)
            h2 = xxhash.xxh3_128()
            with open(dst, "rb", buffering=0) as r:
                while n := r.readinto(view):
                    h2.update(view[:n])
        if attrs:
            os.chmod(dst, f.mode & 0o7777)
            os.utime(dst, (f.origin.mtime, f.origin.mtime))
        if restat:
            os.stat(src)


def publishing(cfg: CopyConfiguration, spec: TaskSpec, root: str) -> Any:
    """What ``publish_plan`` takes in the code under test (its signature has changed)."""
    try:
        from distcp.run import branch as job
    except ImportError:  # before the run's order moved to distcp.run
        from distcp.spark import job  # type: ignore[no-redef]

    make = getattr(job, "publishing", None) or getattr(job, "_publishing", None)
    return make(cfg, spec.job_id, root) if make else spec


class Stages(dict):  # type: ignore[type-arg]
    """Results that print as they arrive and survive a failing stage."""

    def __init__(self, n_files: Callable[[], int]) -> None:
        super().__init__()
        self.n_files = n_files

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if isinstance(value, float) and key.endswith("_s") and self.n_files():
            print(f"  {key:<38} {value:9.3f}  {value / self.n_files() * 1e6:9.1f} µs/file",
                  flush=True)
        elif not isinstance(value, str):
            print(f"  {key:<38} {value}", flush=True)


def micro_ops(files: list[Any], work: Path, rounds: int = 5) -> dict[str, float]:
    """µs per call of each per-file step of the executor and publisher, min over rounds.

    Minimum of several runs of a batch is robust on a shared, noisy machine; the steps
    are the ones ``copy_file``/``write_staged``/``apply_attributes``/``_check_unchanged``/
    ``Progress.advance`` and ``PublishFiles`` perform for one local file.
    """
    import dataclasses
    import json as _json

    import xxhash

    from distcp.model import TaskResult

    batch = files[:2000]
    n = len(batch)
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    srcs = [f.origin.url for f in batch]
    res: dict[str, list[float]] = {}

    def add(key: str, seconds: float) -> None:
        res.setdefault(key, []).append(seconds / n * 1e6)

    def clock(key: str, fn: Callable[[], Any]) -> None:
        t = time.perf_counter()
        fn()
        add(key, time.perf_counter() - t)

    result = TaskResult(guid="0" * 40, unit_id=0, attempt="s1p0a0", origin=srcs[0],
                        destination=srcs[0] + ".dst", dataset_urn=srcs[0], file_set="all",
                        status="ok", staging=srcs[0] + ".stg", bytes_read=1, bytes_written=1,
                        checksum="xxh3_128:" + "0" * 32)
    for r in range(rounds):
        d = work / f"micro{r}"
        rm(d)
        d.mkdir(parents=True)
        dsts = [str(d / f"{i}-0") for i in range(n)]
        clock("open_read_close_source", lambda: [_read(p, view) for p in srcs])
        clock("create_write_close_staged", lambda: [_write(p, view[:32768]) for p in dsts])
        clock("xxh3_32KiB", lambda: [xxhash.xxh3_128(view[:32768]).hexdigest() for _ in srcs])
        clock("verify_stat+reread+xxh3", lambda: [_reread(p, view) for p in dsts])
        clock("chmod+utime", lambda: [(os.chmod(p, 0o644), os.utime(p, (1.0, 1.0)))
                                      for p in dsts])
        clock("url_to_fs", lambda: [fsutil.filesystem(p, {}) for p in srcs])
        fs, _ = fsutil.filesystem(srcs[0])
        clock("fsspec_info_source", lambda: [fs.info(p) for p in srcs])
        infos = [fs.info(p) for p in srcs[:50]] * (n // 50)
        clock("fsutil.status(info)", lambda: [fsutil.status(fs, i) for i in infos])
        clock("os.stat_source", lambda: [os.stat(p) for p in srcs])
        clock("guid_sha1", lambda: [f.guid for f in batch])
        clock("TaskResult+replace", lambda: [dataclasses.replace(
            TaskResult(**{k: getattr(result, k) for k in ("guid", "unit_id", "attempt",
                                                          "origin", "destination",
                                                          "dataset_urn", "file_set",
                                                          "status")}), bytes_read=2)
            for _ in srcs])
        entries: list[Any] = []
        clock("journal_asdict", lambda: entries.extend(
            {"planned": result.destination, "results": [dataclasses.asdict(result)]}
            for _ in srcs))
        clock("journal_json_dumps", lambda: _json.dumps(entries))
        clock("result_pickle_dumps+loads", lambda: pickle.loads(pickle.dumps([result] * n)))
        moved = [p + ".moved" for p in dsts]
        clock("publish_os.replace", lambda: [os.replace(a, b) for a, b in zip(dsts, moved)])
        clock("publish_lexists+getsize", lambda: [(os.path.lexists(a), os.path.getsize(b))
                                                  for a, b in zip(dsts, moved)])
        clock("unlink_staged", lambda: [os.unlink(p) for p in moved])
        rm(d)
    return {k: round(min(v), 2) for k, v in res.items()}


def _read(path: str, view: memoryview) -> None:
    with open(path, "rb", buffering=0) as f:
        while f.readinto(view):
            pass


def _write(path: str, data: memoryview) -> None:
    with open(path, "wb", buffering=0) as f:
        f.write(data)


def _reread(path: str, view: memoryview) -> None:
    import xxhash

    os.stat(path)
    h = xxhash.xxh3_128()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            h.update(view[:n])


# ------------------------------------------------------------------ main


def profile_dataset(name: str, src: Path, work: Path, repeat: int, use_spark: bool,
                    use_cprofile: bool, micro: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = Stages(lambda: out.get("files", 0))
    dst = work / f"dst-{name}"
    rm(dst)
    cfg = CopyConfiguration.build([str(src)], str(dst), progress=False)

    if micro:
        planned = plan_all(cfg, lambda m: None)
        out["files"] = len(planned.plan.files_to_copy)
        for key, us in micro_ops(planned.plan.files_to_copy, work).items():
            out[f"micro_{key}_us"] = us
            print(f"  {key:<38} {us:9.2f} µs/call", flush=True)
        rm(work)
        return out

    # ---- listing
    med, times, planned = timed(lambda: plan_all(cfg, lambda m: None), repeat)
    files = planned.plan.files_to_copy
    n, nbytes = len(files), sum(f.origin.size for f in files)
    out["files"], out["bytes"] = n, nbytes
    out["plan_all_s"] = med
    fs, root = fsutil.filesystem(str(src))
    out["fsspec_find_detail_s"] = timed(lambda: fs.find(root, withdirs=True, detail=True),
                                        repeat)[0]
    out["scandir_walk_s"] = timed(lambda: scandir_walk(str(src)), repeat)[0]
    infos = fs.find(root, withdirs=True, detail=True)
    out["status_per_entry_s"] = timed(lambda: [fsutil.status(fs, i) for i in infos.values()],
                                      repeat)[0]
    out["guid_all_s"] = timed(lambda: [f.guid for f in files], repeat)[0]

    # ---- pack + pickle sizes
    units = pack(files, unit_count(n, os.cpu_count() or 2), cfg.file_cost)
    out["units"] = len(units)
    out["unit_pickle_bytes"] = sum(len(pickle.dumps(u)) for u in units)
    out["unit_pickle_s"] = timed(lambda: [pickle.loads(pickle.dumps(u)) for u in units],
                                 repeat)[0]
    one = pack(files, 1, cfg.file_cost)[0]

    # ---- run_work_unit, in this process, whole data set as one unit
    root_state = state_root(cfg, planned.datasets)

    counter = iter(range(10**6))

    def spec_for(verify: str) -> TaskSpec:
        # a fresh staging dir per run, deleted only at the end: ext4 allocates inodes
        # slowly right after mass deletes (see bench_copy.keep_outputs)
        jid = f"prof-{verify}-{next(counter)}"
        return TaskSpec(job_id=jid, staging_root=fsutil.join(root_state, "staging", jid),
                        progress_root=fsutil.join(root_state, "progress", jid), verify=verify)

    def reset() -> None:
        os.sync()

    results = None
    for verify in ("digest", "size"):
        med, times, results = timed(lambda: run_work_unit(one, spec_for(verify), "a0"),
                                    repeat, reset)
        bad = [r for r in results if not r.ok]
        assert not bad, bad[:3]
        out[f"run_work_unit_{verify}_s"] = med
    if use_cprofile:
        reset()
        prof = cProfile.Profile()
        prof.enable()
        run_work_unit(one, spec_for("digest"), "a0")
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
        out["cprofile_run_work_unit"] = s.getvalue()

    # ---- stripped loops (each adds one per-file step)
    stage = work / f"loop-{name}"
    buf = bytearray(8 << 20)
    variants = {
        "loop_open_readinto_write": {},
        "loop_+xxh3": {"digest": True},
        "loop_+xxh3+chmod+utime": {"digest": True, "attrs": True},
        "loop_+xxh3+attrs+verify_reread": {"digest": True, "attrs": True, "reread": True},
        "loop_+..+source_restat": {"digest": True, "attrs": True, "reread": True,
                                    "restat": True},
        "loop_+..+6_url_to_fs": {"digest": True, "attrs": True, "reread": True,
                                 "restat": True, "fsspec_calls": 6},
    }
    for label, kw in variants.items():
        stages: list[Path] = []

        def setup() -> None:
            stages.append(work / f"loop-{name}-{next(counter)}")
            stages[-1].mkdir(parents=True)
            os.sync()
        out[label + "_s"] = timed(lambda: loop_copy(files, stages[-1], buf, **kw), repeat,
                                  setup)[0]
    out["url_to_fs_us"] = timed(lambda: [fsutil.filesystem(files[0].origin.url, {})
                                         for _ in range(10000)], repeat)[0] / 10000 * 1e6
    out["fs_info_us"] = timed(lambda: [fs.info(files[0].origin.url) for _ in range(10000)],
                              repeat)[0] / 10000 * 1e6
    out["os_stat_us"] = timed(lambda: [os.stat(files[0].origin.url) for _ in range(10000)],
                              repeat)[0] / 10000 * 1e6

    # ---- publish (renames) of the last staged results
    spec = spec_for("size")

    def stage_all() -> None:
        reset()
        nonlocal results
        results = run_work_unit(one, spec, "a0")

    def do_publish() -> Summary:
        summary = Summary()
        if "summary" in inspect.signature(publish_plan).parameters:  # before issue 10
            publish_plan(planned.plan, results, publishing(cfg, spec, root_state), summary)
        else:  # it returns what it did (a Tally)
            summary.add(publish_plan(planned.plan, results, publishing(cfg, spec, root_state)))
        return summary

    med, times, summary = timed(do_publish, 1, stage_all)
    assert summary.files_copied == n, summary
    out["publish_plan_s"] = med
    if use_cprofile:
        stage_all()
        prof = cProfile.Profile()
        prof.enable()
        do_publish()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(15)
        out["cprofile_publish"] = s.getvalue()

    # ---- Spark: cold first job vs warm job, same session
    if use_spark:
        from distcp.spark.job import run_units
        from distcp.spark.session import spark_session

        log = str(work / "spark-profile.log")
        t = time.perf_counter()
        with spark_session("local[*]", {}, log) as spark:
            out["spark_session_start_s"] = time.perf_counter() - t
            for k in range(3):
                reset()
                spec = spec_for("digest")
                fsutil.filesystem(spec.staging_root)[0].makedirs(
                    fsutil.filesystem(spec.staging_root)[1], exist_ok=True)
                fsutil.filesystem(spec.progress_root)[0].makedirs(
                    fsutil.filesystem(spec.progress_root)[1], exist_ok=True)
                t = time.perf_counter()
                res = run_units(spark, units, spec, Callback())
                out[f"spark_run_units_job{k + 1}_s"] = time.perf_counter() - t
                assert sum(r.ok for r in res) == n, [r for r in res if not r.ok][:2]
            t = time.perf_counter()
        out["spark_stop_s"] = time.perf_counter() - t
    rm(dst)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["A", "B"])
    ap.add_argument("--workdir", type=Path, default=HERE / "data")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--micro", action="store_true",
                    help="only the per-call cost of each per-file step (min of 5 batches)")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args()
    work = args.workdir.resolve()
    report: dict[str, Any] = {}
    for name in [args.only] if args.only else ["A", "B"]:
        src = work / "src" / name
        if not src.is_dir():
            print(f"no data set {name} under {work}/src: run bench_copy.py first")
            return 2
        print(f"\n== {name}", flush=True)
        res = profile_dataset(name, src, work / "profile-out", args.repeat, args.spark,
                              args.cprofile, args.micro)
        report[name] = dict(res)
        for k, v in res.items():
            if isinstance(v, str):
                print(f"\n-- {k}\n{v}")
    shutil.rmtree(work / "profile-out", ignore_errors=True)
    args.results.mkdir(parents=True, exist_ok=True)
    path = args.results / "profile.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    old.update(report)
    path.write_text(json.dumps(old, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
