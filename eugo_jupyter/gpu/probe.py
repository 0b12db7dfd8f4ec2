"""The probe: facts about the GPU one process can see, gathered through torch and NVML.

:func:`probe` runs inside a Ray task (or, for ``check(local=True)``, in the kernel itself) and
returns plain data; :mod:`.verdict` turns those facts into a pass or fail. Nothing here decides.

The traps it handles, and how:

- A task that asks for no GPU gets ``CUDA_VISIBLE_DEVICES=""`` from Ray on a GPU node: the
  facts record the variable exactly (``None`` when unset, ``""`` when empty) and the request, so
  the verdict can say "no GPU was requested" instead of "no GPU exists".
- In containers NVML lists *host* process ids, which never equal ``os.getpid()``: when the pid is
  not among the device's compute processes, the probe matches the device by UUID (torch's UUID of
  ``cuda:0`` against NVML's) and looks at the device's used memory before and after its kernel;
  a rise at least as large as what the kernel allocated counts as seen ("memory change").
- MIG instances have no per-process utilisation in NVML and often no per-process memory: the
  facts say ``mig: True`` and use is judged from torch's own allocation on the device.
- A worker reused between calls keeps its CUDA context and memory: the check runs the probe with
  ``max_calls=1`` so its worker exits afterwards (see :mod:`.check`), and the probe resets torch's
  peak-memory counter before its kernel so an earlier call's peak is not reported as its own.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from .. import _nvml

__all__ = ["GPU_LIBRARIES", "probe"]

#: Modules whose presence in a process means it may have used a GPU without torch.
GPU_LIBRARIES = ("torch", "cupy", "jax", "tensorflow", "numba.cuda", "pycuda")

_KERNEL_SIZE = 1024  # a 1024x1024 float32 matmul: 4 MiB per operand, milliseconds on any GPU


def _visible_handle(nvml: Any, torch_uuid: str | None) -> Any:
    """NVML's handle for the device this process calls ``cuda:0``."""
    if torch_uuid:
        for prefix in ("GPU-", "MIG-", ""):
            try:
                return nvml.nvmlDeviceGetHandleByUUID(f"{prefix}{torch_uuid}")
            except Exception:  # noqa: BLE001
                continue
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return nvml.nvmlDeviceGetHandleByUUID(first)
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "" or (first and not first.isdigit()):
        return None
    return nvml.nvmlDeviceGetHandleByIndex(int(first or 0))


def _processes(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    found = []
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            for proc in getattr(nvml, getter)(handle):
                used = proc.usedGpuMemory
                found.append({"pid": int(proc.pid), "used_memory": int(used) if used else None})
        except Exception:  # noqa: BLE001 - unsupported (MIG, old drivers)
            continue
    return found


def _ray_facts() -> dict[str, Any]:
    try:
        import ray

        if not ray.is_initialized():
            return {"node_id": None, "gpu_ids": None}
        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
    except Exception:  # noqa: BLE001 - the facts are best effort
        return {"node_id": None, "gpu_ids": None}


def probe(
    requested_gpus: float = 1, scope: str = "task", run_kernel: bool = True
) -> dict[str, Any]:
    """Facts about the GPU this process can use; ``scope`` is ``"task"`` or ``"kernel"``.

    Runs a small real matmul on ``cuda:0`` when torch sees CUDA, and reports what torch and NVML
    saw before and after it. Every key is always present; what could not be checked is ``None``
    with the reason in ``torch_error`` / ``nvml_error``.

    >>> facts = probe(requested_gpus=0, scope="kernel")
    >>> facts["scope"], "cuda" in facts
    ('kernel', True)
    """
    facts: dict[str, Any] = {
        "scope": scope,
        "requested_gpus": requested_gpus,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        **_ray_facts(),
        "torch_version": None,
        "torch_cuda_version": None,
        "torch_error": None,
        "cuda": False,
        "device_count": 0,
        "device": None,
        "device_uuid": None,
        "kernel_ok": None,
        "kernel_error": None,
        "max_memory_allocated": None,
        "nvml_error": None,
        "nvml_reason": None,
        "nvml_driver": None,
        "nvml_devices": [],
        "nvml_device": None,
        "memory_total": None,
        "memory_used": None,
        "mig": None,
        "process_seen": None,
        "seen_by": None,
    }
    try:
        import torch
    except ImportError as exc:
        torch = None  # type: ignore[assignment]
        facts["torch_error"] = f"torch is not installed ({exc.name or exc})"
    nvml_view = _nvml.devices()
    facts["nvml_error"] = nvml_view["error"]
    facts["nvml_reason"] = nvml_view["reason"]
    facts["nvml_driver"] = nvml_view["driver"]
    facts["nvml_devices"] = [
        {k: d[k] for k in ("index", "name", "uuid", "memory_total", "mig")}
        for d in nvml_view["devices"]
    ]
    if torch is not None:
        facts["torch_version"] = torch.__version__
        facts["torch_cuda_version"] = torch.version.cuda
        try:
            facts["cuda"] = bool(torch.cuda.is_available())
            facts["device_count"] = torch.cuda.device_count() if facts["cuda"] else 0
        except Exception as exc:  # noqa: BLE001 - a broken driver raises here
            facts["torch_error"] = f"torch.cuda failed: {exc}"
    if facts["cuda"]:
        props = torch.cuda.get_device_properties(0)
        facts["device"] = torch.cuda.get_device_name(0)
        uuid = getattr(props, "uuid", None)
        facts["device_uuid"] = str(uuid) if uuid is not None else None
    nvml, _ = _nvml.start() if nvml_view["error"] is None else (None, None)
    handle = None
    before = None
    try:
        if nvml is not None:
            try:
                handle = _visible_handle(nvml, facts["device_uuid"])
            except Exception as exc:  # noqa: BLE001
                facts["nvml_error"] = f"NVML could not find the task's device: {exc}"
                facts["nvml_reason"] = "failed"
            if handle is not None:
                device = _nvml.device_facts(nvml, handle)
                facts["nvml_device"] = device["name"]
                facts["mig"] = device["mig"] or _nvml.text(
                    nvml.nvmlDeviceGetUUID(handle)
                ).startswith("MIG-")
                facts["memory_total"] = device["memory_total"]
                before = device["memory_used"]
                if facts["device"] is None:
                    facts["device_uuid"] = device["uuid"]
        if facts["cuda"] and run_kernel:
            _run_kernel(torch, facts, nvml, handle, before, reset_peak=scope == "task")
        elif handle is not None:
            facts["memory_used"] = before
    finally:
        if nvml is not None:
            _nvml.stop(nvml)
    return facts


def _run_kernel(
    torch: Any, facts: dict[str, Any], nvml: Any, handle: Any, before: int | None, reset_peak: bool
) -> None:
    try:
        if reset_peak:
            torch.cuda.reset_peak_memory_stats(0)
        a = torch.randn(_KERNEL_SIZE, _KERNEL_SIZE, device="cuda:0")
        b = a @ a.T
        torch.cuda.synchronize(0)
        # The trace of a a^T is the squared Frobenius norm: a cheap check that the result is real.
        expected = float((a * a).sum())
        got = float(torch.trace(b))
        facts["kernel_ok"] = abs(got - expected) <= 1e-3 * max(1.0, abs(expected))
        if not facts["kernel_ok"]:
            facts["kernel_error"] = f"wrong result: trace {got:g}, expected {expected:g}"
        facts["max_memory_allocated"] = int(torch.cuda.max_memory_allocated(0))
        if handle is not None:
            time.sleep(0.05)  # NVML's process list lags the context creation slightly
            facts["memory_used"] = int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
            pids = {p["pid"] for p in _processes(nvml, handle)}
            if os.getpid() in pids:
                facts["process_seen"], facts["seen_by"] = True, "pid"
            elif (
                before is not None
                and facts["memory_used"] - before >= facts["max_memory_allocated"]
            ):
                facts["process_seen"], facts["seen_by"] = True, "memory change"
            else:
                facts["process_seen"] = False
        del a, b
    except Exception as exc:  # noqa: BLE001 - the failure is the fact
        facts["kernel_ok"] = False
        facts["kernel_error"] = f"{type(exc).__name__}: {exc}"
