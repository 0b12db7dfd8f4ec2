"""The GPU-use audit on real Ray: the worker node declares a GPU that does not exist, so a task
that requests it can never use it, and the audit must say so."""

from __future__ import annotations

import json

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.gpu.audit import RECORD_KEYS, AuditSummary


@eugo.hpc.distribute
def parse(text: str) -> int:
    return len(text.split())


@eugo.hpc.distribute
def cpu_torch(n: int) -> float:
    import torch

    return float(torch.ones(n).sum())


@eugo.hpc.distribute
def broken() -> None:
    raise ValueError("bad row")


def test_a_gpu_request_that_never_touched_the_gpu_is_flagged(gpu_cluster: object) -> None:
    with eugo.gpu.audit() as audit:
        futures = [parse.options(num_gpus=0.5)("a b c") for _ in range(2)]
        torch_future = cpu_torch.options(num_gpus=1)(4)
        cpu_only = parse("not audited")  # no GPU requested: not a GPU reservation
        assert eugo.hpc.get(futures) == [3, 3] and eugo.hpc.get(torch_future) == 4.0
        assert eugo.hpc.get(cpu_only) == 2
    after = parse.options(num_gpus=0.5)("after the audit")
    eugo.hpc.get(after)

    records = audit.records()
    assert sorted(r["function"] for r in records) == ["cpu_torch", "parse", "parse"]
    assert all(r["used"] is False for r in records)
    torch_record = next(r for r in records if r["function"] == "cpu_torch")
    assert "torch was imported but stayed on the CPU" in torch_record["evidence"]
    assert torch_record["gpu_ids"] == ["0"] and torch_record["num_gpus"] == 1.0
    assert all(r["gpu_seconds"] == pytest.approx(r["num_gpus"] * r["duration_s"]) for r in records)

    summary = audit.summary()
    assert [u["function"] for u in summary.unused] == ["cpu_torch", "parse"]
    assert next(u for u in summary.unused if u["function"] == "parse")["calls"] == 2
    text = str(summary)
    assert "- parse: requested a GPU in 2 call(s) and never touched it" in text
    assert "GPU-seconds reserved for nothing" in text and "cpu_torch" in audit._repr_html_()


def test_records_are_plain_dicts_for_other_tools(gpu_cluster: object) -> None:
    with eugo.gpu.audit():
        eugo.hpc.get(parse.options(num_gpus=0.25)("x"))
    records = eugo.gpu.audit_records()
    assert len(records) == 1 and tuple(records[0]) == RECORD_KEYS
    json.dumps(records)


def test_a_failing_task_still_raises_and_is_recorded(gpu_cluster: object) -> None:
    with eugo.gpu.audit() as audit:
        future = broken.options(num_gpus=0.25)()
        with pytest.raises(Exception, match="bad row"):
            eugo.hpc.get(future)
    (record,) = audit.records()
    assert record["error"] == "ValueError: bad row" and record["used"] is False


def test_audits_do_not_nest(gpu_cluster: object) -> None:
    with eugo.gpu.audit():
        with pytest.raises(RuntimeError, match="do not nest"):
            eugo.gpu.audit().start()


# Records as a GPU machine produces them (recorded shape; no GPU exists here to make them).
RECORDED_OVER_SHARE = {
    "function": "infer", "task_id": "a1b2c3d4e5f6a7b8", "node_id": "5e0c1a3b", "gpu_ids": ["0"],
    "num_gpus": 0.25, "started_at": 1.0, "duration_s": 10.0, "gpu_seconds": 2.5, "used": True,
    "evidence": "torch initialised CUDA in the task's process", "peak_memory": 60 * 2**30,
    "peak_source": "torch.cuda.max_memory_allocated", "device_memory_total": 150754820096,
    "share_memory": 37688705024, "exceeded_share": True, "gpu_libraries": ["torch"], "error": None,
}  # fmt: skip


def test_summary_names_tasks_whose_peak_exceeded_their_share() -> None:
    within = {**RECORDED_OVER_SHARE, "task_id": "ffff", "peak_memory": 2**30, "exceeded_share": False}
    summary = AuditSummary([RECORDED_OVER_SHARE, within])
    assert summary.unused == [] and summary.over_share == [RECORDED_OVER_SHARE]
    assert "- infer (task a1b2c3d4e5f6): peak 60 GiB exceeds its share 35.1 GiB (num_gpus=0.25)" in str(summary)
