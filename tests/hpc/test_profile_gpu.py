"""The cpu_behind_gpu finding on a real two-node Ray whose worker node declares one GPU.

No GPU exists here; the declared GPU is Ray's scheduling bookkeeping, which is all this finding
is about (tasks queued for a device), so the queueing it detects is real.
"""

from __future__ import annotations

import sys
import time

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@eugo.hpc.distribute(num_gpus=1)
def infer(x: int) -> int:
    time.sleep(0.6)
    return x


@eugo.hpc.distribute
def post(x: int) -> int:
    time.sleep(0.05)
    return x + 1


@pytest.fixture(scope="module", autouse=True)
def _cluster(gpu_cluster):  # type: ignore[no-untyped-def]
    eugo.hpc.get([post(0) for _ in range(4)] + [infer(0)])  # workers up on both nodes
    yield


def test_cpu_work_chained_behind_queued_gpu_tasks_is_found() -> None:
    with eugo.hpc.profile() as run:
        outputs = [post(infer(i)) for i in range(3)]  # one GPU: the infers run one by one
        assert eugo.hpc.get(outputs) == [1, 2, 3]
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "cpu_behind_gpu"]
    assert finding["function"] == "post"
    assert "infer" in finding["message"] and "CPUs sat free" in finding["message"]


def test_cpu_work_beside_gpu_tasks_is_not_flagged() -> None:
    with eugo.hpc.profile() as run:
        gpu = [infer(i) for i in range(3)]
        cpu = [post(i) for i in range(6)]
        eugo.hpc.get(gpu + cpu)
    assert "cpu_behind_gpu" not in run.report().kinds()


def test_an_audited_gpu_call_that_never_touches_the_device_is_in_the_report() -> None:
    # End to end: the audit measures each call on the worker (here none touches a device, and
    # no GPU library is loaded), and run.report() reads the audit's own records.
    with eugo.gpu.audit() as audit, eugo.hpc.profile() as run:
        assert eugo.hpc.get([infer(i) for i in range(2)]) == [0, 1]
        eugo.hpc.get([post(i) for i in range(2)])
    audit.wait()
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "gpu_unused"]
    assert finding["function"] == "infer"
    assert "2 of 2 calls of infer asked for 1 GPU but never used the device" in finding["message"]
    assert "infer.options(num_gpus=0)" in finding["fix"]
