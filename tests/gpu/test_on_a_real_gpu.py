"""Checks that need a real NVIDIA GPU (run with scripts/gpu_checks.sh); skipped elsewhere with
the reason."""

from __future__ import annotations

import pytest

import eugo_jupyter as eugo

pytestmark = pytest.mark.gpu


@eugo.hpc.distribute
def matmul(n: int) -> float:
    import torch

    a = torch.ones(n, n, device="cuda")
    return float((a @ a).sum())


@eugo.hpc.distribute
def idle(x: int) -> int:
    return x


@eugo.hpc.distribute
def hog(gib: int) -> int:
    import torch

    block = torch.empty(gib * 2**30, dtype=torch.uint8, device="cuda")
    return int(block.numel())


def test_probe_task_passes_on_the_gpu(ray_local: object) -> None:
    report = eugo.check(num_gpus=1)
    print(report)
    assert report.ok, report.verdict
    assert report.verdict.startswith(f"ran on {report['device']}")
    assert report["kernel_ok"] and report["max_memory_allocated"] > 0
    assert report["memory_total"] and report["nvml_driver"]


def test_fractional_probe_passes(ray_local: object) -> None:
    report = eugo.check(num_gpus=0.25)
    assert report.ok, report.verdict


def test_local_check_passes_in_this_process() -> None:
    report = eugo.check(local=True)
    assert report.ok, report.verdict


def test_audit_tells_used_from_unused_and_flags_a_peak_over_its_share(ray_local: object) -> None:
    total = eugo.check(num_gpus=1)["memory_total"]
    share_gib = 0.01 * total / 2**30
    with eugo.gpu.audit() as audit:
        eugo.hpc.get([matmul.options(num_gpus=0.5)(256), idle.options(num_gpus=0.5)(1)])
        eugo.hpc.get(hog.options(num_gpus=0.01)(int(share_gib) + 1))
    by_name = {r["function"]: r for r in audit.records()}
    assert by_name["matmul"]["used"] is True and by_name["matmul"]["peak_memory"] > 0
    assert by_name["idle"]["used"] is False
    assert by_name["hog"]["exceeded_share"] is True
    summary = audit.summary()
    assert [u["function"] for u in summary.unused] == ["idle"]
    assert [r["function"] for r in summary.over_share] == ["hog"]
    print(summary)


def test_gpu_memory_sizes_from_nvml(ray_local: object) -> None:
    fraction = eugo.gpu.gpu_fraction_for("6GB")
    total = eugo.gpu.cluster_gpu_memory()[0]["memory_total"]
    assert 0 < fraction <= 1 and int(1 / fraction + 1e-9) * 6 * 10**9 <= total
