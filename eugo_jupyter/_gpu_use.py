"""The record of one audited GPU call: the shape that the GPU audit writes and hpc's reports read.

A leaf (it imports nothing of the package), so ``hpc`` can type what ``gpu`` measures without
importing ``gpu``: the measuring itself is plugged in through ``_hooks.py``.

>>> RECORD_KEYS[:3]
('function', 'task_id', 'node_id')
"""

from __future__ import annotations

from typing import TypedDict

__all__ = ["RECORD_KEYS", "AuditRecord"]


class AuditRecord(TypedDict):
    """One audited GPU call, as the worker reports it (see ``eugo.gpu.audit_records``)."""

    function: str
    task_id: str | None
    node_id: str | None
    gpu_ids: list[str]
    num_gpus: float  #: the GPUs the call requested
    started_at: float  #: epoch seconds
    duration_s: float
    gpu_seconds: float  #: num_gpus x duration_s
    used: bool | None  #: None when it cannot be told
    evidence: str
    peak_memory: int | None
    peak_source: str | None
    device_memory_total: int | None
    share_memory: int | None
    exceeded_share: bool
    gpu_libraries: list[str]
    error: str | None


#: The keys every record has, in order.
RECORD_KEYS = tuple(AuditRecord.__annotations__)
