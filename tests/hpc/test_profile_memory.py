"""eugo.hpc.profile and memory, on a real Ray with a small (200 MiB) object store of its own.

A profile must free what an unprofiled run frees (it once pinned every future it sized), and
it says when one get fetches more than the memory it lands in can hold.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo

np = pytest.importorskip("numpy")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MiB = 1 << 20


@eugo.hpc.distribute
def first_of(blocks: list) -> float:  # type: ignore[type-arg]
    # The future arrives inside a list, so the task fetches it itself.
    return float(eugo.hpc.get(blocks[0])[0])


@eugo.hpc.distribute
def block(i: int):  # type: ignore[no-untyped-def]
    return np.full(2 * MiB, i, dtype=np.float64)  # 16 MiB


@pytest.fixture(scope="module", autouse=True)
def _ray():  # type: ignore[no-untyped-def]
    eugo.hpc.shutdown()
    eugo.hpc.init(num_cpus=2, object_store_memory=200 * MiB)
    yield
    eugo.hpc.shutdown()


def store_used_mib() -> int:
    """The object store's usage as Ray's `ray memory --stats-only` reports it."""
    import ray
    from ray._private.internal_api import memory_summary

    summary = memory_summary(ray.get_runtime_context().gcs_address, stats_only=True)
    match = re.search(r"Plasma memory usage (\d+) MiB", summary)
    assert match, summary
    return int(match.group(1))


def freed_after(profiled: bool) -> bool:
    """Put 32 MiB, hand its future to a task inside a list, drop it: is the store back?"""
    before = store_used_mib()
    ref = eugo.hpc.put(np.ones(4 * MiB))  # 32 MiB
    recording = eugo.hpc.profile() if profiled else contextlib.nullcontext()
    with recording:
        assert eugo.hpc.get(first_of([ref])) == 1.0
    assert store_used_mib() >= before + 30  # it was there
    del ref
    for _ in range(100):  # Ray frees asynchronously: wait for it, boundedly
        if store_used_mib() < before + 30:
            return True
        time.sleep(0.1)
    return False


def test_a_profiled_run_frees_what_an_unprofiled_run_frees() -> None:
    assert freed_after(profiled=False)
    assert freed_after(profiled=True)


def test_one_get_on_more_results_than_fit_is_found() -> None:
    with eugo.hpc.profile() as run:
        futures = [block(i) for i in range(8)]  # 128 MiB into a 200 MiB store
        values = eugo.hpc.get(futures)
    assert [v[0] for v in values] == list(range(8))
    del values, futures
    (finding,) = [f for f in run.report().findings if f["kind"] == "get_too_large"]
    assert finding["function"] == "block"
    assert "8 results" in finding["message"] and "chunks" in finding["fix"]


def test_fetching_in_chunks_is_silent() -> None:
    with eugo.hpc.profile() as run:
        futures = [block(i) for i in range(8)]
        firsts = []
        for i in range(0, len(futures), 2):
            firsts += [v[0] for v in eugo.hpc.get(futures[i : i + 2])]
    assert firsts == list(range(8))
    assert "get_too_large" not in run.report().kinds()
