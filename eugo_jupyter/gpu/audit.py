"""The GPU-use audit: did each task that reserved a GPU use it, and did it stay within its share?

Opt in with a context manager; every call of a ``@distribute`` function that requests GPUs
inside the block runs wrapped, and reports one record when it ends::

    with eugo.gpu.audit() as audit:
        futures = [embed.options(num_gpus=0.25)(batch) for batch in batches]
        eugo.hpc.get(futures)
    audit.summary()          # functions that reserved a GPU and never touched it;
                             # tasks over their share

How use is judged, on the worker, after the function returns (or raises):

- **used**: torch initialised CUDA in the process, or NVML lists the process on its device.
  **not used**: neither, and NVML could be read; or NVML could not be read and no GPU library
  (torch with CUDA, cupy, jax, tensorflow, numba.cuda, pycuda) was even loaded. Otherwise
  ``used`` is ``None`` (cannot tell), never a guess.
- **peak**: ``torch.cuda.max_memory_allocated`` over the call (its counter is reset first, since a
  reused worker remembers earlier calls), else the process's memory in NVML. **share**: the
  request's fraction of the device's total memory; a peak above it is the out-of-memory risk of
  fractional GPUs, which divide scheduling but not memory.
- Records reach the kernel through a small actor (no CPU reserved) that lives as long as the
  audit object. Actors' methods are not audited; only task calls are.

Records are plain dicts (:func:`audit_records`), so other tools can consume them.
"""

from __future__ import annotations

import html
import os
import sys
import time
import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import Any, cast

from .. import _nvml
from .._gpu_use import RECORD_KEYS, AuditRecord
from .._units import format_bytes
from ..hpc._internal import ensure, hooks, on_disconnect
from .probe import GPU_LIBRARIES

__all__ = [
    "RECORD_KEYS",
    "AuditRecord",
    "AuditSummary",
    "GPUAudit",
    "audit",
    "audit_records",
    "measure",
]

_latest: GPUAudit | None = None


class _Collector:
    """The actor that gathers records from the workers."""

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        self._records.append(record)

    def records(self) -> list[dict[str, Any]]:
        return list(self._records)


def _torch_cuda() -> Any:
    """torch, if this process imported it and initialised CUDA with it; else None."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return torch
    except Exception:  # noqa: BLE001 - a half-imported torch
        pass
    return None


def _nvml_view(gpu_ids: list[str]) -> dict[str, Any]:
    """NVML's view of this process on its devices: seen, its memory, the devices' total memory."""
    with _nvml.session() as (nvml, error):
        if nvml is None:
            return {"error": error}
        try:
            visible = [
                v.strip()
                for v in (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")
                if v.strip()
            ]
            handles = []
            for ident in visible or gpu_ids:
                handles.append(
                    nvml.nvmlDeviceGetHandleByUUID(ident) if ident.startswith(("GPU-", "MIG-"))
                    else nvml.nvmlDeviceGetHandleByIndex(int(ident))
                )  # fmt: skip
            seen, used, total = False, 0, 0
            for handle in handles:
                total = max(total, int(nvml.nvmlDeviceGetMemoryInfo(handle).total))
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if proc.pid == os.getpid():
                        seen = True
                        used = max(used, int(proc.usedGpuMemory or 0))
            return {"error": None, "seen": seen, "used": used, "total": total or None}
        except Exception as exc:  # noqa: BLE001
            return {"error": str(exc)}


def measure(
    name: str, num_gpus: float, started: float, duration: float, error: str | None
) -> AuditRecord:
    """Judge, inside the worker and after the call, whether this process used its GPU share."""
    import ray

    context = ray.get_runtime_context()
    gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    torch = _torch_cuda()
    libraries = [m for m in GPU_LIBRARIES if m in sys.modules]
    peak = peak_source = total = None
    if torch is not None:
        peak = max(
            int(torch.cuda.max_memory_allocated(i)) for i in range(torch.cuda.device_count())
        )
        peak_source = "torch.cuda.max_memory_allocated"
        total = int(torch.cuda.get_device_properties(0).total_memory)
    nvml = _nvml_view(gpu_ids)
    if nvml["error"] is None:
        total = total or nvml["total"]
        if peak is None and nvml["seen"]:
            peak, peak_source = nvml["used"], "NVML process memory"
    if torch is not None:
        used, evidence = True, "torch initialised CUDA in the task's process"
    elif nvml.get("seen"):
        used, evidence = True, "NVML lists the task's process on its GPU"
    elif nvml["error"] is None:
        used, evidence = False, "CUDA was never initialised and NVML does not list the process"
    elif not [m for m in libraries if m != "torch"]:
        used = False
        evidence = (
            "no GPU library initialised CUDA in the process"
            + (" (torch was imported but stayed on the CPU)" if "torch" in libraries else "")
            + f"; NVML unavailable: {nvml['error']}"
        )
    else:
        used = None
        evidence = (
            f"{', '.join(libraries)} loaded but NVML unavailable ({nvml['error']}): cannot tell"
        )
    share = int(num_gpus * total) if total else None
    return {
        "function": name,
        "task_id": context.get_task_id(),
        "node_id": context.get_node_id(),
        "gpu_ids": gpu_ids,
        "num_gpus": num_gpus,
        "started_at": started,
        "duration_s": duration,
        "gpu_seconds": num_gpus * duration,
        "used": used,
        "evidence": evidence,
        "peak_memory": peak,
        "peak_source": peak_source,
        "device_memory_total": total,
        "share_memory": share,
        "exceeded_share": bool(peak is not None and share is not None and peak > share),
        "gpu_libraries": libraries,
        "error": error,
    }


def _run_audited(
    collector: Any, fn: Callable[..., Any], name: str, num_gpus: float, *args: Any, **kwargs: Any
) -> Any:
    """Runs on the worker in place of ``fn``: calls it, then reports one record."""
    import ray

    torch = _torch_cuda()
    if torch is not None:  # a reused worker: the counter still holds an earlier call's peak
        for index in range(torch.cuda.device_count()):
            torch.cuda.reset_peak_memory_stats(index)
    started, clock = time.time(), time.perf_counter()
    error = None
    try:
        return fn(*args, **kwargs)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        try:
            record = measure(name, num_gpus, started, time.perf_counter() - clock, error)
            ray.get(collector.add.remote(record), timeout=30)
        except Exception:  # noqa: BLE001 - the audit must never fail the user's task
            pass


class AuditSummary:
    """What an audit found: GPU reservations never used, and tasks that outgrew their share.

    ``unused``: one dict per function whose calls requested a GPU and never touched it
    (``function``, ``calls``, ``gpu_seconds``); ``over_share``: the records whose peak device
    memory exceeded their fraction of the device; ``unknown``: records where use could not be told.
    """

    def __init__(self, records: list[AuditRecord], pending: int = 0) -> None:
        self.records = records
        self.pending = pending
        by_function: dict[str, list[AuditRecord]] = defaultdict(list)
        for record in records:
            by_function[record["function"]].append(record)
        self.unused = [
            {
                "function": name,
                "calls": len(calls),
                "gpu_seconds": sum(r["gpu_seconds"] for r in calls),
            }
            for name, calls in sorted(by_function.items())
            if all(r["used"] is False for r in calls)
        ]
        self.over_share = [r for r in records if r["exceeded_share"]]
        self.unknown = [r for r in records if r["used"] is None]

    def _lines(self) -> list[str]:
        lines = [f"GPU-use audit: {len(self.records)} GPU call(s) recorded"
                 + (f", {self.pending} still running" if self.pending else "")]  # fmt: skip
        for item in self.unused:
            lines.append(
                f"- {item['function']}: requested a GPU in {item['calls']} call(s) and never "
                f"touched it ({item['gpu_seconds']:.2f} GPU-seconds reserved for nothing)"
            )
        for r in self.over_share:
            # exceeded_share is only set when both the peak and the share were measured
            peak, share = cast(int, r["peak_memory"]), cast(int, r["share_memory"])
            lines.append(
                f"- {r['function']} (task {str(r['task_id'])[:12]}): "
                f"peak {format_bytes(peak)} exceeds its share {format_bytes(share)} "
                f"(num_gpus={r['num_gpus']:g}): out-of-memory risk when tasks share the GPU"
            )
        if self.unknown:
            lines.append(
                f"- {len(self.unknown)} call(s): use could not be told "
                f"({self.unknown[0]['evidence']})"
            )
        if len(lines) == 1 and self.records:
            lines.append("- every GPU call used its GPU and stayed within its share")
        return lines

    def __str__(self) -> str:
        return "\n".join(self._lines())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head, *items = self._lines()
        body = "".join(f"<li>{html.escape(line[2:])}</li>" for line in items)
        return f"<div class='eugo-gpu-audit'><b>{html.escape(head)}</b><ul>{body}</ul></div>"


class GPUAudit:
    """An audit in progress or finished; use :func:`audit` to make one."""

    def __init__(self) -> None:
        self._collector: Any = None
        self._remote: Any = None
        self._fn_refs: dict[int, Any] = {}
        self._refs: list[Any] = []
        self.active = False

    def start(self) -> GPUAudit:
        """Begin auditing calls that request GPUs (what ``with`` does on entry)."""
        global _latest
        import ray

        if hooks.audit is not None:  # checked first: nothing is started for a refused audit
            hooks.set_audit(self._submit)  # raises ConflictError
        ensure()
        self._collector = ray.remote(num_cpus=0)(_Collector).remote()
        _started.add(self)
        self._remote = ray.remote(_run_audited)
        hooks.set_audit(self._submit)
        self.active = True
        _latest = self
        return self

    def stop(self) -> None:
        """Stop auditing new calls; calls already running still report."""
        if self.active:
            hooks.set_audit(None)
            self.active = False

    def __enter__(self) -> GPUAudit:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _submit(self, fn: Callable[..., Any], submitter: Any, args: tuple, kwargs: dict) -> Any:
        import ray

        fn_ref = self._fn_refs.get(id(fn))
        if fn_ref is None:
            fn_ref = self._fn_refs[id(fn)] = ray.put(fn)
        options = {"name": submitter.name, **submitter.options}
        num_gpus = float(submitter.request.get("GPU", 0))
        refs = self._remote.options(**options).remote(
            self._collector, fn_ref, submitter.name, num_gpus, *args, **kwargs
        )
        self._refs.extend(refs if isinstance(refs, list) else [refs])
        return refs

    def wait(self, timeout: float | None = None) -> None:
        """Block until every audited call has finished (or ``timeout`` seconds pass)."""
        import ray

        if self._refs:
            ray.wait(self._refs, num_returns=len(self._refs), timeout=timeout, fetch_local=False)

    def records(self) -> list[AuditRecord]:
        """One plain dict per finished GPU call (keys: :data:`RECORD_KEYS`)."""
        import ray

        if self._collector is None:
            return []  # never started, or its cluster (and so its records) is gone
        return sorted(ray.get(self._collector.records.remote()), key=lambda r: r["started_at"])

    def summary(self) -> AuditSummary:
        """Functions that reserved GPUs for nothing, and tasks whose peak exceeded their share."""
        import ray

        pending = (
            len(ray.wait(self._refs, num_returns=len(self._refs), timeout=0)[1])
            if self._refs
            else 0
        )
        return AuditSummary(self.records(), pending)

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"<GPU-use audit {state}, {len(self._refs)} GPU call(s)>"


#: The audits started on the cluster connected now: their collector actors die with it.
_started: weakref.WeakSet[GPUAudit] = weakref.WeakSet()


@on_disconnect
def _cluster_gone(reason: str) -> None:
    """An audit's records lived in an actor of the cluster that is gone: it has none now."""
    for audit in list(_started):
        audit._collector = None
    _started.clear()


def audit() -> GPUAudit:
    """An opt-in GPU-use audit of the ``@distribute`` calls that request GPUs.

    >>> import eugo_jupyter as eugo
    >>> with eugo.gpu.audit() as a:                          # doctest: +SKIP
    ...     eugo.hpc.get(parse.options(num_gpus=1)("x.csv"))
    >>> print(a.summary())                                   # doctest: +SKIP
    GPU-use audit: 1 GPU call(s) recorded
    - parse: requested a GPU in 1 call(s) and never touched it (0.01 GPU-seconds reserved ...
    """
    return GPUAudit()


def audit_records(audit: GPUAudit | None = None) -> list[AuditRecord]:
    """The records of ``audit`` (default: the latest one started), as plain JSON-ready dicts.

    Each record has the keys in :data:`RECORD_KEYS`: ``function``, ``task_id``, ``node_id``,
    ``gpu_ids``, ``num_gpus``, ``started_at`` (epoch seconds), ``duration_s``, ``gpu_seconds``
    (``num_gpus x duration_s``), ``used`` (True, False, or None when it cannot be told),
    ``evidence`` (why), ``peak_memory`` and ``peak_source``, ``device_memory_total``,
    ``share_memory`` (``num_gpus x device_memory_total``), ``exceeded_share``, ``gpu_libraries``,
    ``error`` (the exception text if the call raised).

    >>> eugo.gpu.audit_records()[0]["used"]                  # doctest: +SKIP
    False
    """
    target = audit or _latest
    return target.records() if target is not None else []
