"""``map`` and the pandas partitions use every node of a cluster, not just the head.

Right after a burst of tasks, Ray's default (hybrid) policy kept whole runs on the head node of
a two-node cluster: the head's view of the other node still showed it busy, so every batch
queued behind the head's own CPUs. Seen as ``readiness`` predicting 1.1 s for a map that then
took the serial 2.2 s. The units are independent and meant for every slot, so they ask Ray to
spread them (unless the caller gave a scheduling strategy of their own).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import eugo_jupyter as eugo
from tests.conftest import two_node_cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with two_node_cluster(worker_cpus=1, worker_gpus=0, head_cpus=1) as pair:
        yield pair


def busy_where(_: Any) -> str:
    import ray

    end = time.perf_counter() + 0.01
    while time.perf_counter() < end:
        pass
    return ray.get_runtime_context().get_node_id()


@pytest.mark.parametrize("round_", range(3))
def test_a_map_right_after_readiness_runs_on_both_nodes(cluster: Any, round_: int) -> None:
    items = list(range(200))
    eugo.hpc.readiness(busy_where, items)  # a burst of short tasks, as a user's session has
    ran_on = Counter(eugo.hpc.map(busy_where, items, progress=False))
    assert len(ran_on) == 2, f"every item ran on one node: {ran_on}"
    assert min(ran_on.values()) >= len(items) // 10, f"one node got almost nothing: {ran_on}"


def test_a_caller_scheduling_strategy_is_kept(cluster: Any) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    _, worker = cluster
    pinned = NodeAffinitySchedulingStrategy(worker.node_id, soft=False)
    ran_on = set(eugo.hpc.map(busy_where, range(40), progress=False, scheduling_strategy=pinned))
    assert ran_on == {worker.node_id}


def test_dataframe_partitions_run_on_both_nodes(cluster: Any) -> None:
    df = pd.DataFrame({"x": range(600)})
    df.eugo.apply(busy_where, axis=1, partitions=6)  # a burst first
    ran_on = Counter(df.eugo.apply(busy_where, axis=1, partitions=6))
    assert len(ran_on) == 2, f"every partition ran on one node: {ran_on}"


def test_a_journal_written_by_the_kernel_reads_the_same_on_the_other_node(
    cluster: Any, tmp_path: Any
) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    journal = tmp_path / "shared" / "j"
    eugo.hpc.map(lambda x: x * 2, range(50), journal=journal, errors="collect", progress=False)
    _, worker = cluster

    def read_there(path: str) -> tuple[str, int, int, list[Any]]:
        import ray

        held = eugo.hpc.journal(path)
        node = ray.get_runtime_context().get_node_id()
        return node, held.done, held.failed, sorted(v for _, v in held.results())

    pinned = NodeAffinitySchedulingStrategy(worker.node_id, soft=False)
    fn = eugo.hpc.distribute(read_there)
    node, done, failed, values = eugo.hpc.get(fn.options(scheduling_strategy=pinned)(str(journal)))
    assert (node, done, failed) == (worker.node_id, 50, 0)
    assert values == [x * 2 for x in range(50)]
