"""%%distribute on a two-node cluster whose worker *declares* one GPU (no GPU exists here:
declared resources are scheduling bookkeeping, so these tests check scheduling, not GPU use)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tests.fixtures.waiting import until

pytestmark = pytest.mark.usefixtures("gpu_cluster")


def test_more_gpus_than_any_node_fails_at_once(run: Any) -> None:
    from eugo_jupyter.exceptions import InfeasibleRequestError

    ran = run("%%distribute --num-gpus 2\nnever_bound = 1\n")
    assert isinstance(ran.result.error_in_exec, InfeasibleRequestError)
    assert "needs 2 GPUs" in ran.text and "the largest node has 1 GPU" in ran.text
    assert "num_gpus=1" in ran.text  # the fix


def test_a_fraction_of_the_declared_gpu_runs_on_the_gpu_node(shell: Any, run: Any) -> None:
    ran = run(
        "%%distribute --num-gpus 0.5\nimport os, ray\n"
        "gpu_ids = ray.get_gpu_ids()\nvisible = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
    )
    assert ran.result.success, ran.text
    assert len(shell.user_ns["gpu_ids"]) == 1 and shell.user_ns["visible"] is not None


def test_options_widget_warns_live_about_the_cluster() -> None:
    import eugo_jupyter as eugo

    w = eugo.widgets.ResourceOptions(num_gpus=1)
    assert w.warning == ""
    w.num_gpus = 2
    assert "needs 2 GPUs" in w.warning and "largest node has 1 GPU" in w.warning
    w._gpu_buttons[0].click()  # 0.25, one click away
    assert w.value["num_gpus"] == 0.25 and w.warning == ""


def test_no_block_submits_anyway_and_warns(shell: Any, run: Any) -> None:
    from eugo_jupyter import hpc
    from eugo_jupyter.exceptions import InfeasibleRequestWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ran = run("%%distribute --no-block --out waiting_fut --num-gpus 2\nwaited = 1\n")
    assert ran.result.success, ran.text
    assert any(issubclass(w.category, InfeasibleRequestWarning) for w in caught) or (
        "InfeasibleRequestWarning" in ran.text
    )
    fut = shell.user_ns["waiting_fut"]
    done, pending = hpc.wait([fut], timeout=1)
    assert pending == [fut]
    # The waiting list names it as never running, with the largest node, as the card does.
    never = until(lambda: [w for w in hpc.waiting() if w.infeasible], "the waiting GPU request")
    assert "2 GPU" in never[0].reason and "1 GPU" in never[0].reason, never[0].reason
    hpc.cancel(fut, force=True)
