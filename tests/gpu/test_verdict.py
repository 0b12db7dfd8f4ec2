"""The decision logic, fed with recorded probe facts (no GPU exists here, so these are inputs
captured from or modelled on real machines and named as recorded; the probe itself is tested for
real in test_check.py)."""

from __future__ import annotations

import json

import pytest

from eugo_jupyter.gpu.check import GPUReport, infeasible_facts
from eugo_jupyter.gpu.verdict import decide
from eugo_jupyter.hpc._internal import NodeFacts

# Nodes as the GCS describes them: a CPU-only node, and a node with one GPU.
CPU_NODE = NodeFacts("a1b2c3d4e5f6", "192.0.2.2", True, True, {"CPU": 2.0}, {})
ONE_GPU_NODE = NodeFacts("f6e5d4c3b2a1", "192.0.2.3", True, False, {"CPU": 2.0, "GPU": 1.0}, {})

# Facts recorded from a probe task with num_gpus=1 on a node with one NVIDIA H200.
RECORDED_H200 = {
    "scope": "task",
    "requested_gpus": 1.0,
    "hostname": "gpu-node-1",
    "pid": 4711,
    "cuda_visible_devices": "0",
    "node_id": "5e0c1a3b9f2d4c7e8a6b0d1f2e3c4b5a6d7e8f9012345678abcdef01",
    "gpu_ids": ["0"],
    "torch_version": "2.13.0+cu128",
    "torch_cuda_version": "12.8",
    "torch_error": None,
    "cuda": True,
    "device_count": 1,
    "device": "NVIDIA H200",
    "device_uuid": "4b1f2c3d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
    "kernel_ok": True,
    "kernel_error": None,
    "max_memory_allocated": 12582912,
    "nvml_error": None,
    "nvml_reason": None,
    "nvml_driver": "570.133.20",
    "nvml_devices": [
        {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-4b1f2c3d-5e6f-7a8b-9c0d-1e2f3a4b5c6d",
         "memory_total": 150754820096, "mig": False}
    ],
    "nvml_device": "NVIDIA H200",
    "memory_total": 150754820096,
    "memory_used": 1069547520,
    "mig": False,
    "process_seen": True,
    "seen_by": "pid",
}  # fmt: skip

# Recorded on this project's CI machines: a worker node that only *declares* a GPU to Ray,
# torch 2.13.0 CPU build, no NVIDIA driver.
RECORDED_DECLARED_ONLY = {
    **RECORDED_H200,
    "torch_version": "2.13.0+cpu",
    "torch_cuda_version": None,
    "cuda": False,
    "device_count": 0,
    "device": None,
    "device_uuid": None,
    "kernel_ok": None,
    "max_memory_allocated": None,
    "nvml_error": (
        "NVML could not start (NVML Shared Library Not Found); "
        "no NVIDIA driver is loaded on this node"
    ),
    "nvml_reason": "no_driver",
    "nvml_driver": None,
    "nvml_devices": [],
    "nvml_device": None,
    "memory_total": None,
    "memory_used": None,
    "mig": None,
    "process_seen": None,
    "seen_by": None,
}


def recorded(base: dict, **changes: object) -> dict:
    return {**base, **changes}


CASES = [
    ("pass, process seen by pid", RECORDED_H200, True, "ran on NVIDIA H200 (GPU 0)"),
    (
        "pass in a container: matched by memory change",
        recorded(RECORDED_H200, seen_by="memory change"),
        True,
        "ran on NVIDIA H200 (GPU 0); NVML lists host process ids (a container), so the task was "
        "matched by the device's UUID and memory change",
    ),
    (
        "pass on a MIG instance",
        recorded(
            RECORDED_H200,
            mig=True,
            device="NVIDIA H200 MIG 1g.18gb",
            process_seen=False,
            seen_by=None,
        ),
        True,
        "ran on NVIDIA H200 MIG 1g.18gb (GPU 0); a MIG instance has no per-process utilisation in "
        "NVML, so torch's allocation on it is the evidence",
    ),
    (
        "pass, NVML missing on the node",
        recorded(
            RECORDED_H200,
            nvml_error="nvidia-ml-py is not installed (pip install nvidia-ml-py)",
            nvml_reason="not_installed",
        ),
        True,
        "ran on NVIDIA H200 (GPU 0); NVML could not confirm it (nvidia-ml-py is not installed "
        "(pip install nvidia-ml-py))",
    ),
    (
        "pass, NVML did not list the process",
        recorded(RECORDED_H200, process_seen=False, seen_by=None),
        True,
        "ran on NVIDIA H200 (GPU 0); NVML did not list its process, "
        "so torch's allocation on it is the evidence",
    ),
    (
        "kernel failed",
        recorded(
            RECORDED_H200, kernel_ok=False, kernel_error="RuntimeError: CUDA error: out of memory"
        ),
        False,
        "torch sees NVIDIA H200 (GPU 0) but a small kernel failed on it: "
        "RuntimeError: CUDA error: out of memory",
    ),
    (
        "declared GPU, nothing behind it",
        RECORDED_DECLARED_ONLY,
        False,
        "a GPU was requested but the task saw none: Ray assigned GPU 0, yet "
        "torch.cuda.is_available() is False and NVML found no driver",
    ),
    (
        "CPU-only torch on a GPU node",
        recorded(
            RECORDED_DECLARED_ONLY,
            nvml_error=None,
            nvml_driver="570.133.20",
            nvml_devices=RECORDED_H200["nvml_devices"],
        ),  # fmt: skip
        False,
        "NVML sees NVIDIA H200, but torch 2.13.0+cpu is a CPU-only build, "
        "so the task cannot use it",
    ),
    (
        "CUDA_VISIBLE_DEVICES emptied",
        recorded(
            RECORDED_DECLARED_ONLY,
            torch_cuda_version="12.8",
            cuda_visible_devices="",
            nvml_error=None,
            nvml_devices=RECORDED_H200["nvml_devices"],
        ),  # fmt: skip
        False,
        "NVML sees NVIDIA H200, but CUDA_VISIBLE_DEVICES is empty, so the task may use none",
    ),
    (
        "torch missing, NVML sees the GPU",
        recorded(
            RECORDED_H200,
            torch_version=None,
            torch_error="torch is not installed (torch)",
            cuda=False,
            device=None,
            kernel_ok=None,
        ),  # fmt: skip
        False,
        "torch is not installed on the worker; NVML sees NVIDIA H200 (driver 570.133.20), but "
        "nothing ran on it to prove use",
    ),
    (
        "torch missing, no NVML",
        recorded(
            RECORDED_DECLARED_ONLY, torch_version=None, torch_error="torch is not installed (torch)"
        ),
        False,
        "torch is not installed on the worker and NVML found no driver, "
        "so nothing could look for a GPU",
    ),
    (
        "no GPU requested on a GPU node (Ray empties CUDA_VISIBLE_DEVICES)",
        recorded(RECORDED_DECLARED_ONLY, requested_gpus=0, gpu_ids=[], cuda_visible_devices=""),
        False,
        "no GPU was requested, so Ray gave the task none (CUDA_VISIBLE_DEVICES is empty); ask for "
        "num_gpus=1 or a fraction",
    ),
    (
        "GPU used without a request",
        recorded(RECORDED_H200, requested_gpus=0, gpu_ids=[], cuda_visible_devices=None),
        False,
        "the task used NVIDIA H200 without requesting a GPU, so Ray does not count it; ask for "
        "num_gpus=1 or a fraction",
    ),
    (
        "the kernel's own process, no GPU",
        recorded(RECORDED_DECLARED_ONLY, scope="kernel", gpu_ids=None, cuda_visible_devices=None),
        False,
        "this kernel sees no GPU: torch.cuda.is_available() is False and NVML found no driver",
    ),
    # The infeasible cases: facts as the check builds them from the feasibility verdict.
    (
        "no GPU node at all",
        infeasible_facts({"CPU": 1.0, "GPU": 1.0}, [CPU_NODE]),
        False,
        "no node in this cluster has a GPU",
    ),
    (
        "more GPUs than any node has",
        infeasible_facts({"CPU": 1.0, "GPU": 2.0}, [CPU_NODE, ONE_GPU_NODE]),
        False,
        "no node can run this probe: needs 2 GPUs and 1 CPU; the largest node has 1 GPU",
    ),
    (
        "pinned to a node without a GPU",
        infeasible_facts({"CPU": 1.0, "GPU": 1.0}, [CPU_NODE], "a1b2c3d4e5f6"),
        False,
        "node a1b2c3d4 cannot run this probe (needs 1 GPU and 1 CPU): it has no GPU",
    ),
    (
        "pinned to a GPU node too small for the request",
        infeasible_facts({"CPU": 1.0, "GPU": 2.0}, [ONE_GPU_NODE], "f6e5d4c3b2a1"),
        False,
        "node f6e5d4c3 cannot run this probe (needs 2 GPUs and 1 CPU): it has 1 GPU",
    ),
    (
        "busy past the timeout",
        {"timeout": 60.0},
        False,
        "the probe did not finish within 60 s: the GPUs exist but are busy, so it was cancelled",
    ),
    (
        "probe task crashed",
        {"probe_error": "WorkerCrashedError: The worker died unexpectedly"},
        False,
        "the probe task failed: WorkerCrashedError: The worker died unexpectedly",
    ),
]


@pytest.mark.parametrize(("label", "facts", "ok", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_each_verdict_sentence_from_recorded_facts(
    label: str, facts: dict, ok: bool, sentence: str
) -> None:
    assert decide(facts) == (ok, sentence)


def test_every_sentence_is_distinct() -> None:
    sentences = [decide(facts).verdict for _, facts, _, _ in CASES]
    assert len(set(sentences)) == len(sentences)


def test_report_is_a_mapping_with_the_course_keys_and_a_clear_html_verdict() -> None:
    report = GPUReport(RECORDED_H200, {"num_gpus": 1})
    assert report["cuda"] is True and report["device"] == "NVIDIA H200"
    assert (
        report.ok
        and report["ok"]
        and report.verdict == report["verdict"] == "ran on NVIDIA H200 (GPU 0)"
    )
    for key in ("node_id", "gpu_ids", "cuda_visible_devices", "torch_version", "device_uuid",
                "nvml_driver", "memory_total", "memory_used", "process_seen",
                "max_memory_allocated"):  # fmt: skip
        assert key in report
    page = report._repr_html_()
    assert "PASS" in page and "FAIL" not in page and "NVIDIA H200" in page and "140.4 GiB" in page
    assert repr(report) == "GPU check PASS: ran on NVIDIA H200 (GPU 0)"
    json.dumps(report.as_dict())  # plain data
    with pytest.raises(TypeError):
        report["ok"] = False  # type: ignore[index]


def test_failed_report_html_says_fail_and_the_fix() -> None:
    report = GPUReport(
        {
            "infeasible": "needs 1 GPU and 1 CPU; no node in this cluster has a GPU",
            "fix": "launch or connect a cluster with a GPU node, or drop num_gpus",
        }  # fmt: skip
    )
    page = report._repr_html_()
    assert "FAIL" in page and "PASS" not in page
    assert "launch or connect a cluster with a GPU node" in page
    assert report["cuda"] is False and report["device"] is None
