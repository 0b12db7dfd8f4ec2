"""partitions="auto": the counting rules, without a cluster (pure functions)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from eugo_jupyter.pandas._plan import (
    MAX_PART_BYTES,
    pack_groups,
    plan,
    runs_here_below,
    sample_cost,
)
from eugo_jupyter.pandas._run import _nbytes


def no_cluster() -> int:
    raise AssertionError("a call too small to split must not ask the cluster for its slots")


def test_work_too_small_for_any_number_of_slots_stays_here_without_asking() -> None:
    decided = plan(2_000, 3e-6, 48_000, no_cluster, "auto")
    assert not decided.distribute
    message = decided.fallback_message("apply(f)")
    assert message.startswith("apply(f) ran in pandas here: 2,000 rows x 3.0 µs = 6.0 ms;")
    assert "splitting would cost about 100 ms" in message and "partitions=N" in message


def test_long_work_gets_three_partitions_per_slot() -> None:
    decided = plan(2_000_000, 20e-6, 64_000_000, lambda: 2, "auto")
    assert decided.distribute and decided.partitions == 6


def test_work_that_would_give_tiny_partitions_gets_fewer() -> None:
    # 0.5 s of work on 16 slots: 48 partitions would run 10 ms each; ten of 50 ms pay better.
    decided = plan(25_000, 20e-6, 100_000, lambda: 16, "auto")
    assert decided.distribute and decided.partitions == 10


def test_no_partition_is_larger_than_100_mb() -> None:
    decided = plan(10_000_000, 20e-6, 40 * MAX_PART_BYTES, lambda: 2, "auto")
    assert decided.partitions == 40
    # Without a timed sample (a call whose rows could not be timed here) too.
    unsampled = plan(10_000_000, None, 40 * MAX_PART_BYTES, lambda: 2, "auto")
    assert unsampled.distribute and unsampled.partitions == 40


def test_one_slot_never_splits_on_auto_but_an_explicit_count_does() -> None:
    assert not plan(100_000, 1e-3, 1_000_000, lambda: 1, "auto").distribute
    forced = plan(100_000, None, 1_000_000, lambda: 1, 5)
    assert forced.distribute and forced.partitions == 5


@pytest.mark.parametrize("partitions", [2, 3, 7])
def test_groups_are_packed_largest_first_and_never_split(partitions: int) -> None:
    sizes = [5_000] + [10] * 300
    packed = pack_groups(sizes, partitions)
    assert sorted(c for part in packed for c in part) == list(range(len(sizes)))
    assert packed[0] == [0]  # the huge group alone, and first: the longest task starts first
    loads = [sum(sizes[c] for c in part) for part in packed[1:]]
    assert max(loads) - min(loads) <= 11  # the small groups spread evenly


def simulated_rounds(
    seconds: list[float],
) -> tuple[Callable[[], float], Callable[[int], int], list[int]]:
    """A clock whose round i lasts ``seconds[i]``, a ``run`` doing every row asked for, and the
    list of rows asked: sample_cost on simulated rounds, so no clock makes it flaky."""
    ticks: list[float] = []
    now = 0.0
    for duration in seconds:
        ticks.extend([now, now + duration])
        now += duration
    clock = iter(ticks)
    asked: list[int] = []

    def run(k: int) -> int:
        asked.append(k)
        return k

    return (lambda: next(clock)), run, asked


def test_a_cold_first_sample_round_does_not_inflate_the_cost_per_row() -> None:
    """The first pandas call in a process pays for imports and caches (13 ms for 8 rows, seen on
    2,000,000 rows of a 28 µs function); taken as row work it made the function look like 100 µs
    or more a row, and the plan said "about 376 s in all" for 50 s of work. The rounds' times are
    simulated (each round: 0.2 ms of fixed cost plus the rows), so no clock makes this flaky."""
    per_row, warmup = 28e-6, 13e-3
    clock, run, asked = simulated_rounds(
        [8 * 2**i * per_row + 2e-4 + (warmup if i == 0 else 0.0) for i in range(20)]
    )
    estimate = sample_cost(run, 2_000_000, clock=clock)
    assert estimate == pytest.approx(per_row, rel=0.25)
    assert sum(asked) <= 2_000_000 * 0.05


def test_a_preempted_last_sample_round_does_not_inflate_the_cost_per_row() -> None:
    """On a busy machine one round can lose a few milliseconds to other processes. Seen: the
    last round, 64 rows of a 5 µs function, took 5.5 ms; the estimate said 86 µs a row, and a
    10,000-row frame that pandas runs in 55 ms was sent to the cluster. Simulated here with
    the last of five rounds losing 5 ms."""
    per_row, fixed = 5e-6, 3e-4
    costs = [8, 16, 32, 64, 128]
    clock, run, _ = simulated_rounds(
        [k * per_row + fixed + (5e-3 if i == len(costs) - 1 else 0.0) for i, k in enumerate(costs)]
    )
    estimate = sample_cost(run, 10_000, clock=clock)
    assert estimate < 3 * per_row


def test_a_small_frame_stops_sampling_once_running_here_is_certain() -> None:
    """10,000 rows of a 5 µs function (pandas: about 55 ms). The sample's rounds went on to 5 ms
    of row work, most of what the fallback added to pandas (1.19x, against 1.15 at most). A
    round's average only overstates the row cost, so once one is under the break-even figure the
    answer is known. Simulated rounds: 0.3 ms of fixed cost plus the rows."""
    per_row, fixed, rows, nbytes = 5e-6, 3e-4, 10_000, 320_000

    def sampled(settled_below: float) -> tuple[float, list[int]]:
        clock, run, asked = simulated_rounds([8 * 2**i * per_row + fixed for i in range(20)])
        estimate = sample_cost(run, rows, clock=clock, settled_below=settled_below)
        return estimate, asked

    estimate, asked = sampled(runs_here_below(rows, nbytes))
    assert asked == [8, 16, 32]  # 32 rows in 0.46 ms: 14 µs a row at most, under 16.7 µs
    result = plan(rows, estimate, nbytes, no_cluster, "auto")
    assert not result.distribute
    _, unbounded = sampled(0.0)
    assert len(unbounded) > len(asked)  # the full sample, as before


def test_the_byte_count_of_a_numeric_frame_is_pandas_own_deep_count() -> None:
    index = pd.date_range("2026-01-01", periods=5_000, freq="min")
    numeric = pd.DataFrame(
        {"a": np.arange(5_000), "b": np.ones(5_000, dtype="float32"), "c": True}, index=index
    )
    assert _nbytes(numeric) == int(numeric.memory_usage(deep=True, index=True).sum())
    assert _nbytes(numeric["b"]) == int(numeric["b"].memory_usage(deep=True, index=True))
    words = pd.DataFrame({"w": ["word" * (i % 7) for i in range(5_000)], "n": 1.0})
    deep = int(words.memory_usage(deep=True, index=True).sum())
    assert 0.8 * deep <= _nbytes(words) <= 1.2 * deep  # strings: from a deep look at a sample
