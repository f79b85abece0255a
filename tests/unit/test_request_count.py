"""The S3 request counters: per file across threads, summed on the driver."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from distcp import request_count as rc


def test_nothing_is_counted_outside_a_tally() -> None:
    rc.count("put")  # no tally open: a no-op, not an error
    with rc.counting() as tally:
        pass
    assert tally.items() == ()


def test_methods_are_counted_by_short_kind_and_unknown_ones_by_name() -> None:
    with rc.counting() as tally:
        rc.count_method("put_object")
        rc.count_method("upload_part")
        rc.count_method("upload_part")
        rc.count_method("delete_object")
        rc.count_method("delete_objects")
        rc.count_method("get_bucket_location")
    assert tally.items() == (("delete", 2), ("get_bucket_location", 1), ("part", 2),
                             ("put", 1))


def test_nested_tallies_count_apart_and_the_outer_one_resumes() -> None:
    with rc.counting() as task:
        rc.count("progress")
        with rc.counting() as file:
            rc.count("put")
        rc.count("progress")
    assert file.items() == (("put", 1),)
    assert task.items() == (("progress", 2),)


def test_pool_threads_count_into_the_submitters_tally_only_when_carried() -> None:
    with rc.counting() as tally, ThreadPoolExecutor(4) as pool:
        list(pool.map(rc.carry(lambda _: rc.count("part")), range(100)))
        pool.submit(rc.count, "lost").result()  # not carried: a pool thread has no tally
    assert tally.items() == (("part", 100),)


def test_each_file_thread_keeps_its_own_count() -> None:
    """A task copies files in threads; each file's parts go out from a pool of its own."""
    barrier = threading.Barrier(8)

    def one_file(n: int) -> tuple[tuple[str, int], ...]:
        with rc.counting() as tally, ThreadPoolExecutor(2) as parts:
            barrier.wait()  # all eight files counting at once
            list(parts.map(rc.carry(lambda _: rc.count("part")), range(n)))
            rc.count("create")
        return tally.items()

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(one_file, range(1, 9)))
    assert got == [(("create", 1), ("part", n)) for n in range(1, 9)]


def test_driver_sums_results_and_divides_only_per_file_kinds() -> None:
    totals = rc.total([(("put", 1),), (("put", 1), ("progress", 2)), (("list_uploads", 1),),
                       (("delete", 3),), ()])
    assert totals == {"put": 2, "progress": 2, "list_uploads": 1, "delete": 3}
    assert rc.per_file(totals, 2) == 1.0
    assert rc.per_file(totals, 0) == 0.0
    assert rc.merge((("a", 1),), (("a", 2), ("b", 1))) == (("a", 3), ("b", 1))
