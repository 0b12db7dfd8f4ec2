"""GPUCheck against a real cluster whose worker declares one GPU: the rows must fail honestly."""

from __future__ import annotations

import eugo_jupyter as eugo
from eugo_jupyter.widgets import GPUCheck
from eugo_jupyter.widgets.gpu_check import ALL_GPU_NODES
from tests.fixtures.waiting import until


def test_traits_and_node_menu(gpu_cluster: object) -> None:
    eugo.hpc.cluster()
    worker = next(n.node_id for n in eugo.hpc.cluster().nodes if n.total.get("GPU"))
    w = eugo.widgets.GPUCheck(num_gpus=0.25)
    assert w.num_gpus == 0.25 and w.node == ALL_GPU_NODES and not w.running and w.results == []
    assert [v for _, v in w._nodes.options] == [ALL_GPU_NODES, worker]
    w._gpus.value = 0.5
    assert w.num_gpus == 0.5
    w.node = worker
    assert w._nodes.value == worker


def test_verify_fills_one_failing_row_per_gpu_node(gpu_cluster: object) -> None:
    w = GPUCheck(num_gpus=0.5)
    w._button.click()
    assert w.running and w._button.disabled and w._button.description == "Verifying..."
    until(lambda: not w.running, "the check to finish", every_s=0.1)
    assert not w._button.disabled and w.error == ""
    assert len(w.results) == 1
    row = w.results[0]
    assert row["ok"] is False and row["verdict"].startswith(
        "a GPU was requested but the task saw none"
    )
    assert "0 of 1 probe(s) passed" in w._status.value
    assert (
        "FAIL" in w._table.value and "a GPU was requested but the task saw none" in w._table.value
    )


def test_a_second_click_while_running_starts_nothing(gpu_cluster: object) -> None:
    w = GPUCheck(num_gpus=1)
    w._button.click()
    first = w._thread
    w._button.click()
    assert w._thread is first
    assert w.wait(240) and len(w.results) == 1


def test_errors_show_in_the_widget(gpu_cluster: object) -> None:
    w = GPUCheck(num_gpus=1.5)
    w._button.click()
    until(lambda: not w.running, "the check to finish", every_s=0.1)
    assert "num_gpus=1.5 is not allowed" in w.error
    assert "Error:" in w._status.value and "num_gpus=1.5 is not allowed" in w._status.value
    assert w.results == [] and not w._button.disabled
