"""Without ``--split-size``: which runs cut a big file into ranges for the idle cores."""

from __future__ import annotations

import pytest

from distcp.planning.splitting import idle_core_split

GiB, MiB = 1 << 30, 1 << 20


@pytest.mark.parametrize("sizes, cores, expected", [
    ([2 * GiB], 2, 512 * MiB),                    # one big file, one core idle: 4 ranges
    ([2 * GiB] + [64 << 10] * 1_000, 2, (2 * GiB + (64_000 << 10)) // 4),  # bench_s3 skew
    ([256 * MiB] * 8, 2, None),                   # 8 files keep 2 cores busy
    ([256 * MiB] * 4, 2, None),                   # 1 GiB in 4 files as well
    ([300 * MiB], 2, 128 * MiB),                  # ranges no smaller than half the minimum
    ([200 * MiB], 2, None),                       # below the minimum: not worth a task
    ([2 * GiB], 1, None),                         # one core: nothing is idle
    ([10 * GiB] + [GiB] * 100, 16, None),         # the big one holds < 1.5 shares
    ([], 2, None),
])
def test_idle_cores_get_ranges_of_a_file_bigger_than_its_share(
        sizes: list[int], cores: int, expected: int | None) -> None:
    assert idle_core_split(sizes, cores) == expected
