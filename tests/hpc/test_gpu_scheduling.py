"""GPU requests on a two-node cluster: a head without GPU and a worker declaring one GPU.

The GPU is declared, not real: Ray schedules against it and sets CUDA_VISIBLE_DEVICES, which is
what these tests check. Whether a GPU was really used is eugo.check()'s job.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import GetTimeoutError, InfeasibleRequestWarning
from tests.fixtures.waiting import until


@eugo.hpc.distribute(num_cpus=0)
class Gate:
    """Tasks check in and wait until the test opens the gate."""

    def __init__(self) -> None:
        self.arrived: list[str] = []
        self.open = False

    def arrive(self, who: str) -> bool:
        self.arrived.append(who)
        return self.open

    def is_open(self) -> bool:
        return self.open

    def release(self) -> None:
        self.open = True

    def who(self) -> list[str]:
        return list(self.arrived)


@eugo.hpc.distribute
def infer(gate: Any, name: str) -> dict[str, Any]:
    start = time.time()
    eugo.hpc.get(gate.arrive(name))
    while not eugo.hpc.get(gate.is_open()):
        time.sleep(0.05)
    return {
        "name": name,
        "start": start,
        "end": time.time(),
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


@eugo.hpc.distribute
def cpu_work(x: int) -> int:
    return x + 1


def test_four_quarter_gpu_tasks_share_one_gpu_while_a_fifth_waits(gpu_cluster: Any) -> None:
    gate = Gate()
    futures = [infer.options(num_gpus=0.25)(gate, f"t{i}") for i in range(5)]
    arrived = until(lambda: (w := eugo.hpc.get(gate.who())) and len(w) >= 4 and w, "four tasks")
    assert len(arrived) == 4  # the fifth is held back: one GPU, four quarters

    # CPU-only work is not queued behind the GPU: it runs on the head while the GPU is full.
    assert eugo.hpc.get([cpu_work(i) for i in range(4)], timeout=120) == [1, 2, 3, 4]

    # The fifth waits because the GPU is busy, not because it can never run.
    queued = until(
        lambda: [w for w in eugo.hpc.waiting() if w.request.get("GPU") == 0.25],
        "the fifth in waiting()",
    )
    assert (
        not queued[0].infeasible and "busy" in queued[0].reason and "infer" in queued[0].functions
    )

    eugo.hpc.get(gate.release())
    results = eugo.hpc.get(futures, timeout=120)
    first_four = [r for r in results if r["name"] in arrived]
    fifth = next(r for r in results if r["name"] not in arrived)
    # Overlapping execution intervals: each of the four started before any of them ended.
    assert max(r["start"] for r in first_four) < min(r["end"] for r in first_four)
    assert fifth["start"] >= min(r["end"] for r in first_four) - 0.5
    assert {r["cuda"] for r in results} == {"0"}  # the same device id for every share


def test_infeasible_gpu_request_warns_at_the_call_site(gpu_cluster: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        future = cpu_work.options(num_gpus=2)(1)
    [warning] = [w for w in caught if w.category is InfeasibleRequestWarning]
    message = str(warning.message)
    assert warning.filename == __file__  # points at the user's line, not at eugo's internals
    assert message.startswith("cpu_work needs 2 GPUs and 1 CPU; the largest node has 1 GPU.")
    assert "Fix: ask for at most num_gpus=1, or add a larger GPU node." in message

    listed = until(lambda: [w for w in eugo.hpc.waiting() if w.infeasible], "the infeasible demand")
    assert listed[0].request == {"CPU": 1.0, "GPU": 2.0} and listed[0].count == 1
    assert "the largest node has 1 GPU" in listed[0].reason
    assert "NEVER RUNS" in str(eugo.hpc.waiting())

    with pytest.raises(GetTimeoutError) as caught_timeout:
        eugo.hpc.get([future, cpu_work(1)], timeout=2)
    text = str(caught_timeout.value)
    assert text.startswith("1 of 2 futures not ready after 2 s:")
    assert "1 call of cpu_work (2 GPUs and 1 CPU): will never start: needs 2 GPUs" in text
    assert isinstance(caught_timeout.value, TimeoutError)
    eugo.hpc.cancel(future)


def test_too_many_cpus_names_the_largest_node(gpu_cluster: Any) -> None:
    with pytest.warns(InfeasibleRequestWarning, match="the largest node has 4 CPUs"):
        future = cpu_work.options(num_cpus=64)(1)
    eugo.hpc.cancel(future)


def test_feasible_requests_do_not_warn(gpu_cluster: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert eugo.hpc.get(cpu_work.options(num_gpus=1, num_cpus=4)(1), timeout=120) == 2


def test_cluster_summary_counts_the_declared_gpu(gpu_cluster: Any) -> None:
    info = eugo.hpc.cluster()
    assert len(info.nodes) == 2 and info.total("GPU") == 1 and info.total("CPU") == 6
    assert not info.embedded
