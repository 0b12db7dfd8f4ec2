"""eugo.check() on a real two-node Ray cluster whose worker only *declares* one GPU: Ray places the
probe there and assigns GPU 0, but no device exists, so the report must fail and say so."""

from __future__ import annotations

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import OptionsError

SAW_NONE = "a GPU was requested but the task saw none"


def _worker_id() -> str:
    return next(n.node_id for n in eugo.hpc.cluster().nodes if n.total.get("GPU"))


def test_declared_gpu_never_passes(gpu_cluster: object) -> None:
    report = eugo.check(num_gpus=1)
    assert not report.ok
    assert report.verdict == (
        f"{SAW_NONE}: Ray assigned GPU 0, yet torch.cuda.is_available() is False "
        "and NVML found no driver"
    )
    assert report["node_id"] == _worker_id()
    assert report["gpu_ids"] == ["0"] and report["cuda_visible_devices"] == "0"
    assert report["cuda"] is False and report["device"] is None
    assert report["torch_version"] is not None and report["request"] == {"num_gpus": 1}
    assert "FAIL" in report._repr_html_()


def test_fraction_lands_on_the_same_declared_gpu(gpu_cluster: object) -> None:
    report = eugo.check(num_gpus=0.25)
    assert not report.ok and report.verdict.startswith(SAW_NONE)
    assert report["gpu_ids"] == ["0"] and report["requested_gpus"] == 0.25


def test_more_gpus_than_any_node_is_answered_without_running(gpu_cluster: object) -> None:
    report = eugo.check(num_gpus=2)
    assert not report.ok
    assert (
        report.verdict
        == "no node can run this probe: needs 2 GPUs and 1 CPU; the largest node has 1 GPU"
    )
    assert report["fix"] == "ask for at most num_gpus=1, or add a larger GPU node"
    assert report["hostname"] is None  # no probe ran


def test_pinned_to_the_gpu_less_head_it_says_that_node_has_none(gpu_cluster: object) -> None:
    head = next(n.node_id for n in eugo.hpc.cluster().nodes if n.is_head)
    report = eugo.check(num_gpus=1, node=head[:12])
    assert report.verdict == (
        f"node {head[:8]} cannot run this probe (needs 1 GPU and 1 CPU): it has no GPU"
    )


def test_no_gpu_request_gets_no_gpu(gpu_cluster: object) -> None:
    report = eugo.check(num_gpus=0)
    assert not report.ok and report.verdict.startswith(
        "no GPU was requested, so Ray gave the task none"
    )


def test_every_gpu_node_gets_one_probe(gpu_cluster: object) -> None:
    reports = eugo.gpu.check_nodes(0.5)
    assert [r["node_id"] for r in reports] == [_worker_id()]
    assert not reports[0].ok and reports[0].verdict.startswith(SAW_NONE)


def test_busy_gpu_is_reported_after_the_timeout_not_waited_on_forever(gpu_cluster: object) -> None:
    import ray

    @ray.remote(num_gpus=1)
    class Holder:
        def ready(self) -> bool:
            return True

    holder = Holder.remote()
    ray.get(holder.ready.remote())
    try:
        report = eugo.check(num_gpus=1, timeout=3)
    finally:
        ray.kill(holder)
    assert not report.ok
    assert (
        report.verdict
        == "the probe did not finish within 3 s: the GPUs exist but are busy, so it was cancelled"
    )


def test_bad_request_raises_with_the_fix(gpu_cluster: object) -> None:
    with pytest.raises(
        OptionsError, match=r"num_gpus=1.5 is not allowed.*num_gpus=1 or num_gpus=2"
    ):
        eugo.check(num_gpus=1.5)


def test_gpu_memory_cannot_be_sized_without_nvml_on_the_gpu_node(gpu_cluster: object) -> None:
    with pytest.raises(
        OptionsError,
        match=(
            r"gpu_memory='6GB' cannot be sized: no GPU node reported its GPU memory "
            r"\(node .{8}: NVML could not start"
        ),
    ):
        eugo.gpu.gpu_fraction_for("6GB")

    @eugo.hpc.distribute
    def f() -> int:
        return 1

    with pytest.raises(OptionsError, match="Give num_gpus= directly"):
        f.options(gpu_memory="6GB")
    with pytest.raises(OptionsError, match=r"gpu_memory='six' is not allowed"):
        f.options(gpu_memory="six")
    with pytest.raises(OptionsError, match="cannot be sized"):
        eugo.check(None, gpu_memory="6GB")
