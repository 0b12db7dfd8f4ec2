"""The plain sentences that say why a request can never run (pure logic over node facts)."""

from __future__ import annotations

from eugo_jupyter._feasibility import describe_request, fix_for, infeasible_reason, waiting_from
from eugo_jupyter._raystate import NodeFacts, Snapshot


def node(cpus: float, gpus: float = 0, alive: bool = True, **extra: float) -> NodeFacts:
    total = {"CPU": cpus, "memory": 8 * 2**30, **({"GPU": gpus} if gpus else {}), **extra}
    return NodeFacts(f"n{cpus}{gpus}", "10.0.0.1", alive, False, total, dict(total))


def test_describe_request_puts_gpus_first() -> None:
    assert describe_request({"CPU": 4, "GPU": 1}) == "1 GPU and 4 CPUs"
    assert describe_request({"CPU": 1}) == "1 CPU"
    assert describe_request({"memory": 2 * 2**30}) == "2 GiB of memory"


def test_gpu_request_on_a_cluster_without_gpus() -> None:
    nodes = [node(8), node(8)]
    assert infeasible_reason({"GPU": 1}, nodes) == "needs 1 GPU; no node in this cluster has a GPU"
    assert (
        fix_for({"GPU": 1}, nodes)
        == "launch or connect a cluster with a GPU node, or drop num_gpus"
    )


def test_too_many_cpus_names_the_largest_node() -> None:
    reason = infeasible_reason({"CPU": 64}, [node(8), node(4)])
    assert reason == "needs 64 CPUs; the largest node has 8 CPUs"
    assert "num_cpus=8" in fix_for({"CPU": 64}, [node(8)])


def test_parts_on_different_nodes_are_still_infeasible() -> None:
    reason = infeasible_reason({"CPU": 4, "GPU": 1}, [node(8), node(1, gpus=1)])
    assert reason is not None and "no single node has all of it" in reason


def test_feasible_requests_and_dead_nodes() -> None:
    assert infeasible_reason({"CPU": 2, "GPU": 0.25}, [node(2, gpus=1)]) is None
    assert infeasible_reason({"GPU": 1}, [node(2, gpus=1, alive=False), node(2)]) is not None
    assert infeasible_reason({"CPU": 1}, []) == "needs 1 CPU; the cluster has no alive node"


def test_custom_resources() -> None:
    reason = infeasible_reason({"CPU": 1, "TPU": 1}, [node(2)])
    assert reason == "needs 1 CPU and 1 TPU; no node in this cluster has a TPU"
    assert "declares TPU" in fix_for({"TPU": 1}, [node(2)])


def test_waiting_separates_never_from_busy_and_names_functions() -> None:
    snap = Snapshot(nodes=[node(2)], demands=[({"CPU": 1.0}, 3), ({"CPU": 1.0, "GPU": 1.0}, 2)])
    listing = waiting_from(snap, {(("CPU", 1.0), ("GPU", 1.0)): {"heavy_math"}})
    assert [(w.count, w.infeasible) for w in listing] == [(2, True), (3, False)]
    assert listing[0].functions == ("heavy_math",)
    assert "no node in this cluster has a GPU" in listing[0].reason
    assert "busy" in listing[1].reason
    assert "NEVER RUNS" in str(listing) and "<table>" in listing._repr_html_()
    assert listing[0].to_model()["request"] == {"CPU": 1.0, "GPU": 1.0}
