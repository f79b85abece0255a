"""The fork's pure parts: the tee's back pressure, detaching, stall timeout and read
failures (real threads, real bytes), the operators' decisions, --fork-convert parsing
and the branches' checks."""

from __future__ import annotations

import io
import threading
import time

import pytest

from distcp.configuration import CopyConfiguration
from distcp.errors import ConfigurationError, PluginError, SourceReadError
from distcp.fork.branches import Branch, Route, branches_of, check_branches, fork_chains
from distcp.fork.operators import FORKS, ForkOperator, decide, operator_for
from distcp.fork.tee import BranchStalled, QueueStats, Tee
from distcp.model import CopyableFile, FileStatus


def consume(tee: Tee, index: int, out: dict[int, bytes], delay: float = 0.0,
            size: int = 7) -> threading.Thread:
    def run() -> None:
        stream, parts = tee.stream(index), []
        try:
            while True:
                part = stream.read(size)
                if not part:
                    break
                parts.append(part)
                time.sleep(delay)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[index] = exc  # type: ignore[assignment]
            return
        finally:
            stream.close()
        out[index] = b"".join(parts)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_every_branch_gets_every_byte_of_one_read() -> None:
    data = bytes(range(256)) * 1000
    source = io.BytesIO(data)
    tee = Tee(source, ["a", "b", "c"], capacity=2, chunk=1000)
    out: dict[int, bytes] = {}
    threads = [consume(tee, i, out, size=333) for i in range(3)]
    tee.pump()
    for t in threads:
        t.join()
    assert out == {0: data, 1: data, 2: data}
    assert source.tell() == len(data)
    stats = tee.stats()
    assert [s.bytes for s in stats] == [len(data)] * 3
    assert all(s.puts == 257 and s.gets == 257 and s.max_fill <= 2 for s in stats)


def test_a_slow_branch_holds_the_read_back_within_its_queue() -> None:
    """Back pressure: the reader is never more than capacity chunks ahead of the slowest."""
    source = io.BytesIO(b"z" * 40_000)
    tee = Tee(source, ["fast", "slow"], capacity=2, chunk=1000)
    out: dict[int, bytes] = {}
    ahead: list[int] = []
    fast = consume(tee, 0, out, size=1000)
    slow_stream = tee.stream(1)

    def slow() -> None:
        got = 0
        while True:
            part = slow_stream.read(1000)
            if not part:
                break
            got += len(part)
            ahead.append(source.tell() - got)
            time.sleep(0.002)
        out[1] = b"z" * got

    t = threading.Thread(target=slow)
    t.start()
    tee.pump()
    fast.join()
    t.join()
    assert out[0] == out[1] == b"z" * 40_000
    assert max(ahead) <= 3 * 1000  # its queue (2 chunks) plus the chunk being put
    assert tee.stats()[1].full_waits > 0


def test_a_detached_branch_is_drained_and_the_others_finish() -> None:
    data = b"q" * 50_000
    tee = Tee(io.BytesIO(data), ["keeps", "stops"], capacity=1, chunk=100)
    out: dict[int, bytes] = {}
    keeper = consume(tee, 0, out)
    first: list[bytes] = []

    def stopper() -> None:  # as a branch whose converter fails after its first bytes
        first.append(tee.stream(1).read(10))
        tee.detach(1)

    stops = threading.Thread(target=stopper)
    stops.start()
    tee.pump()
    keeper.join()
    stops.join()
    assert out[0] == data and first == [b"q" * 10]
    assert tee.stats()[1].puts < 500


def test_a_branch_that_takes_nothing_is_failed_after_the_timeout() -> None:
    tee = Tee(io.BytesIO(b"w" * 10_000), ["ok", "stuck"], capacity=1, timeout=0.5, chunk=100)
    out: dict[int, bytes] = {}
    ok = consume(tee, 0, out)
    started = time.monotonic()
    tee.pump()  # "stuck" never reads
    ok.join()
    assert time.monotonic() - started < 5
    assert out[0] == b"w" * 10_000
    with pytest.raises(BranchStalled, match="fork branch 'stuck' took no data for 0.5 s"):
        tee.stream(1).read(1)


class Broken(io.RawIOBase):
    def __init__(self) -> None:
        self.calls = 0

    def read(self, size: int = -1) -> bytes:
        self.calls += 1
        if self.calls > 2:
            raise SourceReadError("cannot read s3://b/k: connection reset")
        return b"a" * 10


def test_a_read_failure_reaches_every_branch_as_the_sources_error() -> None:
    tee = Tee(Broken(), ["a", "b"], capacity=4, chunk=10)
    out: dict[int, bytes] = {}
    threads = [consume(tee, i, out) for i in range(2)]
    tee.pump()
    for t in threads:
        t.join()
    assert all(isinstance(out[i], SourceReadError) for i in range(2))
    assert "connection reset" in str(out[0])


def test_queue_stats_add_up_and_report() -> None:
    a = QueueStats(capacity=4, puts=10, gets=10, fill_sum=20, max_fill=3, bytes=100,
                   seconds=2.0)
    b = QueueStats.of_pairs((a + a).as_pairs())
    assert b.puts == 20 and b.max_fill == 3 and b.capacity == 4 and b.seconds == 4.0
    assert b.report()["fill_ratio"] == 0.5 and b.report()["put_rate"] == 5.0


def cfg(destination: str = "dst", **kw: object) -> CopyConfiguration:
    return CopyConfiguration.build(["src"], destination, **kw)


def file(url: str = "file:///s/a/b.gz", size: int = 10, urn: str = "file:///s"
         ) -> CopyableFile:
    return CopyableFile(FileStatus(url, size, 0.0), "dst/b.gz", urn, "all")


def test_fork_flags_make_branches_with_their_own_chains() -> None:
    branches = branches_of(cfg(fork=("d2", "s3://bkt/d3"), fork_convert=("2=gunzip,untar",),
                               converters=("decrypt",), dst_options={"auto_mkdir": True}))
    assert [b.name for b in branches] == ["fork_0", "fork_1", "fork_2"]
    assert [b.cfg.destination for b in branches] == ["dst", "d2", "s3://bkt/d3"]
    assert [b.cfg.converters for b in branches] == [("decrypt",), (), ("gunzip", "untar")]
    assert [dict(b.cfg.dst_options) for b in branches] == [{"auto_mkdir": True}] * 2 + [{}]
    assert all(not b.cfg.fork for b in branches)


@pytest.mark.parametrize(("spec", "message"), [
    ("gunzip", "expected N=CHAIN"), ("3=gunzip", "there is no --fork number 3"),
    ("0=gunzip", "there is no --fork number 0")])
def test_bad_fork_convert_is_named(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        fork_chains((spec,), 2)


def test_fork_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="--fork-convert needs a --fork"):
        cfg(fork_convert=("1=gunzip",))
    with pytest.raises(ConfigurationError, match="--fork-policy must be all or independent"):
        cfg(fork=("x",), fork_policy="some")


def test_overlapping_or_unsupported_branches_are_refused(tmp_path: object) -> None:
    with pytest.raises(ConfigurationError, match="overlapping destinations"):
        check_branches(branches_of(cfg(fork=("dst/inner",))))
    with pytest.raises(ConfigurationError, match="--split-size does not work with --fork"):
        check_branches(branches_of(cfg(fork=("other",), split_size=1 << 30)))
    with pytest.raises(ConfigurationError, match="used twice"):
        check_branches((Branch("x", cfg()), Branch("x", cfg(destination="o"))))


def test_rules_route_by_glob_size_and_dataset() -> None:
    branches = [Branch("gz", cfg(), Route(globs=("*.gz",))),
                Branch("big", cfg(), Route(min_size=100)),
                Branch("deep", cfg(), Route(globs=("a/*",), datasets=("file:///s*",))),
                Branch("all", cfg())]
    op = operator_for("", branches)
    assert decide(op, "rules", file(), "a/b.gz") == (True, False, True, True)
    assert decide(op, "rules", file(size=500, urn="file:///t"), "c.txt") == (
        False, True, False, True)
    assert decide(operator_for("", branches[-1:]), "identity", file(), "x") == (True,)


class WrongCount(ForkOperator):
    def branches_for(self, file: CopyableFile, relative: str) -> list[bool]:
        return [True]


def test_an_operator_answering_the_wrong_number_is_named() -> None:
    FORKS.register("wrong-count", WrongCount, clobber=True)
    op = operator_for("wrong-count", [Branch("a", cfg()), Branch("b", cfg())])
    with pytest.raises(PluginError, match="fork operator 'wrong-count' returned 1 decisions "
                                          "for 2 branches"):
        decide(op, "wrong-count", file(), "b.gz")
    with pytest.raises(PluginError, match="unknown forks plugin 'nope'"):
        operator_for("nope", [])


def test_a_job_files_branches_each_get_their_own_settings(tmp_path: object) -> None:
    """Each [[branches]] table is a whole configuration: converters, checks, routing."""
    from pathlib import Path

    from distcp.cli import job_keys
    from distcp.jobs import load_job
    from distcp.run.forkjob import _branch

    folder = Path(str(tmp_path))
    (folder / "in").mkdir()
    job = folder / "job.toml"
    job.write_text('commit_policy = "full"\nfork_policy = "independent"\n'
                   '[[datasets]]\nsource = "in"\n'
                   '[[branches]]\nname = "raw"\ndestination = "raw"\ncheck = ["not-empty"]\n'
                   '[[branches]]\nname = "lake"\ndestination = "lake"\n'
                   'convert = ["gunzip"]\ncheck = ["gzip"]\nroute_glob = ["*.gz"]\n')
    loaded = load_job(str(job), job_keys())
    raw, lake = (_branch(loaded, n) for n in range(2))
    assert (raw.name, lake.name) == ("raw", "lake")
    assert raw.cfg.destination == str(folder / "raw") and raw.cfg.check == ("not-empty",)
    assert lake.cfg.converters == ("gunzip",) and lake.cfg.check == ("gzip",)
    assert raw.route.empty and lake.route.globs == ("*.gz",)
    assert raw.cfg.commit_policy == lake.cfg.commit_policy == "full"
    assert lake.cfg.fork_policy == "independent"


def _read_all(tee: Tee, index: int) -> bytes | BaseException:
    stream, parts = tee.stream(index), []
    try:
        while part := stream.read(7):
            parts.append(part)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc
    return b"".join(parts)


@pytest.mark.parametrize(("size", "whole"), [(0, True), (29, True), (30, True),
                                             (31, False), (5_000, False)])
def test_a_source_that_fits_every_queue_is_read_ahead_and_its_branches_read_in_turn(
        size: int, whole: bool) -> None:
    """Capacity 4, chunks of 10: three chunks and the end (b"") fit; the branches then read
    one after the other in this thread, with nothing waiting. A longer source is read
    ahead as far as that and the rest pumped to the branches' threads: every byte once."""
    data = bytes(range(256)) * 20
    data = data[:size]
    tee = Tee(io.BytesIO(data), ["a", "b", "c"], capacity=4, chunk=10)
    assert tee.read_ahead() is whole
    if whole:
        tee.pump()  # would wait forever on a full queue: nobody reads yet
        assert [_read_all(tee, i) for i in range(3)] == [data] * 3
        assert [s.puts for s in tee.stats()] == [-(-size // 10) + 1] * 3  # chunks, the end
        return
    out: dict[int, bytes] = {}
    threads = [consume(tee, i, out) for i in range(3)]
    tee.pump()
    for t in threads:
        t.join()
    assert [out[i] for i in range(3)] == [data] * 3


def test_a_read_failure_while_reading_ahead_reaches_every_branch() -> None:
    tee = Tee(Broken(), ["a", "b"], capacity=4, chunk=10)
    assert tee.read_ahead()  # two chunks, then the failure: all of it fits
    tee.pump()
    got = [_read_all(tee, i) for i in range(2)]
    assert all(isinstance(g, SourceReadError) and "connection reset" in str(g) for g in got)
