"""Lines of one cell's calls name their node once more than one node printed into the cell
(issue 22): a real kernel on a head plus one worker node on this machine.

The worker node declares a custom resource, so a call can be sent to it; the other runs on the
head. Nodes are named by the first characters of Ray's node id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.conftest import two_node_cluster

from ._kernel import Kernel, kernel_for


@pytest.fixture(scope="module")
def kernel() -> Iterator[Kernel]:
    with two_node_cluster(worker_cpus=1, worker_gpus=0) as (cluster, _):
        cluster.add_node(num_cpus=1, resources={"far": 1})
        cluster.wait_for_nodes()
        with kernel_for(cluster.address) as ran:
            ran.run(
                """
                @eugo.hpc.distribute
                def where(tag):
                    print('from', tag)
                """
            )
            yield ran


def test_one_node_no_name_two_nodes_both_named(kernel: Kernel) -> None:
    alone = kernel.run("eugo.hpc.get(where.options(resources={'far': 1})('far'))")
    assert "[where] from far" in kernel.under(alone)
    both = kernel.run(
        "eugo.hpc.get([where.options(resources={'far': 1})('far'), "
        "where.options(num_cpus=2)('head')])"
    )
    shown = kernel.under(both)
    far = re.search(r"\[where @(\w+)\] from far", shown)
    head = re.search(r"\[where @(\w+)\] from head", shown)
    assert far and head and far.group(1) != head.group(1), shown
