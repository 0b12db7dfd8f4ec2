"""A request that was feasible becomes infeasible when the only GPU node leaves the cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import GetTimeoutError
from tests.conftest import two_node_cluster


@pytest.fixture(scope="module")
def shrinking_cluster() -> Iterator[Any]:
    with two_node_cluster(worker_cpus=1, worker_gpus=1) as pair:
        yield pair


@eugo.hpc.distribute
def hold_gpu(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_waiting_notices_the_gpu_node_leaving(shrinking_cluster: Any) -> None:
    cluster, gpu_node = shrinking_cluster
    running = hold_gpu.options(num_gpus=1)(600)
    queued = hold_gpu.options(num_gpus=1)(0)

    def gpu_waits(infeasible: bool) -> list[Any]:
        return [
            w for w in eugo.hpc.waiting() if w.request.get("GPU") and w.infeasible == infeasible
        ]

    deadline = time.monotonic() + 120
    while not gpu_waits(False):
        assert time.monotonic() < deadline, "the queued GPU call never showed up as busy"
        time.sleep(0.2)

    cluster.remove_node(gpu_node)
    deadline = time.monotonic() + 120
    while not (found := gpu_waits(True)):
        assert time.monotonic() < deadline, "waiting() never noticed the GPU node left"
        time.sleep(0.5)
    assert "no node in this cluster has a GPU" in found[0].reason

    with pytest.raises(GetTimeoutError, match="will never start: needs 1 GPU"):
        eugo.hpc.get(queued, timeout=1)
    eugo.hpc.cancel([running, queued])
