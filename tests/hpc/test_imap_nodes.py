"""A node killed in the middle of an ``imap`` on a real two-node Ray: Ray runs the batches that
were on it again elsewhere, and the stream yields every item once: nothing lost, nothing twice."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import eugo_jupyter as eugo
from tests.conftest import two_node_cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with two_node_cluster(worker_cpus=1, worker_gpus=0, head_cpus=1) as pair:
        yield pair


def slow_where(x: int) -> tuple[int, str]:
    import ray

    time.sleep(0.05)
    return x, ray.get_runtime_context().get_node_id()


@pytest.mark.parametrize("ordered", [True, False])
def test_a_node_killed_mid_imap_loses_nothing_and_repeats_nothing(
    cluster: Any, ordered: bool
) -> None:
    ray_cluster, worker = cluster
    if ordered is False:  # the second round: a fresh worker node to kill
        worker = ray_cluster.add_node(num_cpus=1, num_gpus=0)
        ray_cluster.wait_for_nodes()
    seen: list[int] = []
    from_worker = 0
    killed = False
    stream = eugo.hpc.imap(slow_where, range(300), batch_size=5, ordered=ordered, progress=False)
    for got in stream:
        index, (x, node) = (got[0], got) if ordered else got
        assert index == x
        seen.append(x)
        from_worker += node == worker.node_id
        if not killed and from_worker >= 10:
            ray_cluster.remove_node(worker)  # batches are running on it right now
            killed = True
    assert killed, "no batch ever ran on the worker node"
    assert sorted(seen) == list(range(300))  # nothing lost, nothing twice
    if ordered:
        assert seen == list(range(300))
