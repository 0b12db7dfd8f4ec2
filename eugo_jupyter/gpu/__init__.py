"""``eugo.gpu`` and ``eugo.check()``: prove a call ran on a GPU, audit GPU use, size fractions
by memory.

>>> import eugo_jupyter as eugo
>>> report = eugo.check(num_gpus=1)                   # doctest: +SKIP
>>> report.ok, report.verdict                         # doctest: +SKIP
(True, 'ran on NVIDIA H200 (GPU 0)')
>>> with eugo.gpu.audit() as a:                       # doctest: +SKIP
...     eugo.hpc.get([step.options(num_gpus=0.25)(x) for x in items])
>>> eugo.gpu.gpu_fraction_for("6GB")                  # doctest: +SKIP
0.04

Nothing here imports torch, NVML or Ray until it is used.
"""

from .audit import AuditSummary, GPUAudit, audit, audit_records
from .check import GPUReport, check, check_nodes
from .probe import probe
from .sizing import cluster_gpu_memory, gpu_fraction_for

__all__ = [
    "AuditSummary",
    "GPUAudit",
    "GPUReport",
    "audit",
    "audit_records",
    "check",
    "check_nodes",
    "cluster_gpu_memory",
    "gpu_fraction_for",
    "probe",
]
