"""eugo.hpc.map on a real 2-CPU Ray: order, batching, laziness, errors naming the item, shared
args."""

from __future__ import annotations

import os
import sys
import time

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import MapItemError, OptionsError, SerializationError

# Workers cannot import this test module: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def square(x: int) -> int:
    return x * x


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def fails_on_37(x: int) -> int:
    if x == 37:
        raise ValueError(f"cannot handle {x}")
    return x


def where(x: int, model) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    return os.getpid(), id(model), int(model[x])


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_local):  # type: ignore[no-untyped-def]
    eugo.hpc.map(square, range(4), batch_size=1)  # start both workers before any test
    yield


def test_results_come_back_in_input_order() -> None:
    assert eugo.hpc.map(square, range(1000)) == [x * x for x in range(1000)]


def test_empty_input_gives_an_empty_list() -> None:
    assert eugo.hpc.map(square, []) == []
    assert eugo.hpc.map(square, iter(())) == []


def test_one_item() -> None:
    assert eugo.hpc.map(square, [7]) == [49]


def test_unordered_returns_results_as_they_finish() -> None:
    # The first item sleeps long; with two workers every other item finishes before it.
    delays = [4.0] + [0.01] * 20
    results = eugo.hpc.map(nap, delays, batch_size=1, ordered=False)
    assert sorted(results) == sorted(delays)
    assert results[-1] == 4.0
    assert eugo.hpc.map(nap, delays, batch_size=1)[0] == 4.0


def test_a_generator_is_consumed_lazily() -> None:
    pulled = 0

    def items():  # type: ignore[no-untyped-def]
        nonlocal pulled
        for x in range(100_000):
            pulled += 1
            yield x

    assert eugo.hpc.map(square, (x for x in range(300))) == [x * x for x in range(300)]
    with pytest.raises(MapItemError):
        eugo.hpc.map(fails_on_37, items(), batch_size=1)
    # It stopped at the failure: only a window of items beyond #37 was ever read.
    assert 38 <= pulled < 1000


def test_an_exception_names_the_item_that_failed() -> None:
    with pytest.raises(MapItemError) as info:
        eugo.hpc.map(fails_on_37, range(100))
    error = info.value
    assert error.index == 37
    assert error.item_repr == "37"
    assert "item #37" in str(error) and "cannot handle 37" in str(error)
    assert isinstance(error.__cause__, ValueError)


def test_distributed_function_and_options() -> None:
    distributed = eugo.hpc.distribute(num_cpus=2)(square)
    assert eugo.hpc.map(distributed, range(50)) == [x * x for x in range(50)]
    assert eugo.hpc.map(distributed.options(num_cpus=1), range(5), num_cpus=0.5) == [0, 1, 4, 9, 16]


def test_bad_input_is_refused_with_the_fix() -> None:
    # An option error like every other: OptionsError (still a ValueError for old handlers).
    for bad in (0, -1, 2.5, True, "big"):
        with pytest.raises(OptionsError, match="batch_size"):
            eugo.hpc.map(square, range(3), batch_size=bad)
    with pytest.raises(OptionsError, match="num_gpus"):
        eugo.hpc.map(square, range(3), num_gpus=1.5)
    with pytest.raises(TypeError, match="iterable"):
        eugo.hpc.map(square, 5)
    with pytest.raises(TypeError, match="shared="):
        eugo.hpc.map(square, range(3), shared=[1, 2])
    import ray

    with pytest.raises(TypeError, match="plain function"):
        eugo.hpc.map(ray.remote(square), range(3))
    import threading

    with pytest.raises(SerializationError, match="Item #2"):
        eugo.hpc.map(str, [1, 2, threading.Lock()], batch_size=5)


def test_tiny_items_are_batched_into_few_tasks() -> None:
    with eugo.hpc.profile() as run:
        results = eugo.hpc.map(square, range(20_000))
    assert results == [x * x for x in range(20_000)]
    report = run.report()
    (row,) = report.functions
    assert row["function"] == "map(square)"
    assert row["tasks"] < 200  # one task per item would be 20,000
    assert "tiny_tasks" not in report.kinds()


def test_a_large_shared_argument_is_stored_once() -> None:
    np = pytest.importorskip("numpy")
    model = np.arange(2_000_000, dtype=np.float64)  # 16 MB
    with eugo.hpc.profile() as run:
        results = eugo.hpc.map(where, range(200), batch_size=5, shared={"model": model})
    assert [value for _, _, value in results] == list(range(200))
    # Every batch in a worker process saw the very same deserialized object.
    by_pid: dict[int, set[int]] = {}
    for pid, ident, _ in results:
        by_pid.setdefault(pid, set()).add(ident)
    assert all(len(idents) == 1 for idents in by_pid.values())
    # And no batch carried the array: 40 tasks, each with a few hundred bytes of arguments.
    report = run.report()
    (row,) = report.functions
    assert row["tasks"] == 40
    assert row["arg_bytes_max"] < 10_000
    assert "large_argument" not in report.kinds()


def niceness(_: int) -> int:
    return os.nice(0)


def test_workers_run_at_the_kernels_priority() -> None:
    # Ray's default (nice 15) would let every other process on a shared machine take the CPU
    # from the map's workers, while a multiprocessing.Pool of the same work runs at nice 0.
    assert set(eugo.hpc.map(niceness, range(8), batch_size=1)) == {os.nice(0)}
