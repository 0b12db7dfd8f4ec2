"""A request that was feasible becomes infeasible when the only GPU node leaves the cluster."""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import GetTimeoutError


@pytest.fixture(scope="module")
def shrinking_cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    eugo.hpc.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 0})
    gpu_node = cluster.add_node(num_cpus=1, num_gpus=1)
    cluster.wait_for_nodes()
    eugo.hpc.init(address=cluster.address)
    yield cluster, gpu_node
    eugo.hpc.shutdown()
    cluster.shutdown()


@eugo.hpc.distribute
def hold_gpu(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_waiting_notices_the_gpu_node_leaving(shrinking_cluster: Any) -> None:
    cluster, gpu_node = shrinking_cluster
    running = hold_gpu.options(num_gpus=1)(600)
    queued = hold_gpu.options(num_gpus=1)(0)

    def gpu_waits(infeasible: bool) -> list[Any]:
        return [w for w in eugo.hpc.waiting() if w.request.get("GPU") and w.infeasible == infeasible]

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
