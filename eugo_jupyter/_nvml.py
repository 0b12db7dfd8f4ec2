"""NVIDIA devices as NVML sees them: the one place that starts NVML and lists devices.

Used by the GPU probe (inside a task), the GPU-use audit (on a worker), the GPU sizing (one task
per GPU node) and the server's monitor (this machine). NVML ignores ``CUDA_VISIBLE_DEVICES``: a
listing is the node's devices, whatever a task was given. Without the ``nvidia-ml-py`` package
or an NVIDIA driver, the listing is empty, ``error`` says why and ``reason`` says which case it
is (for code to test; the sentence is for people); nothing raises.

>>> view = devices()
>>> sorted(view)
['devices', 'driver', 'error', 'reason']
>>> view["devices"] == [] or "memory_total" in view["devices"][0]
True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypedDict

__all__ = ["Device", "DeviceList", "Reason", "devices", "session", "start", "stop", "text"]

#: Why a listing is empty: the package is missing, no driver is loaded, or NVML failed later.
Reason = Literal["not_installed", "no_driver", "failed"]


class Device(TypedDict, total=False):
    """One device: always ``index``, ``name``, ``uuid``, ``memory_total``, ``memory_used``,
    ``mig``; ``utilization`` (percent) when asked for."""

    index: int
    name: str
    uuid: str
    memory_total: int
    memory_used: int
    mig: bool
    utilization: float


class DeviceList(TypedDict):
    """A node's devices, its driver version, and why the list is empty when it is."""

    devices: list[Device]
    driver: str | None
    error: str | None
    reason: Reason | None  #: None when NVML answered


def text(value: Any) -> str:
    """NVML returns bytes on some versions and str on others."""
    return value.decode() if isinstance(value, bytes) else str(value)


_NOT_INSTALLED = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"


def start() -> tuple[Any, str | None]:
    """The initialised ``pynvml`` module, or None and why not (pair with :func:`stop`)."""
    try:
        import pynvml
    except ImportError:
        return None, _NOT_INSTALLED
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError subclasses, OSError on odd systems
        return None, f"NVML could not start ({exc}); no NVIDIA driver is loaded on this node"
    return pynvml, None


def stop(nvml: Any) -> None:
    """Shut NVML down; errors on the way out are of no interest."""
    try:
        nvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
        pass


@contextmanager
def session() -> Iterator[tuple[Any, str | None]]:
    """``with session() as (nvml, error):`` NVML started for the block, or None and why."""
    nvml, error = start()
    try:
        yield nvml, error
    finally:
        if nvml is not None:
            stop(nvml)


def device_facts(nvml: Any, handle: Any) -> Device:
    """Name, UUID, memory and MIG mode of one device handle."""
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    try:
        mig = bool(nvml.nvmlDeviceGetMigMode(handle)[0])
    except Exception:  # noqa: BLE001 - not supported on this device, or a MIG handle itself
        mig = False
    return {
        "name": text(nvml.nvmlDeviceGetName(handle)),
        "uuid": text(nvml.nvmlDeviceGetUUID(handle)),
        "memory_total": int(memory.total),
        "memory_used": int(memory.used),
        "mig": mig,
    }


def devices(utilization: bool = False) -> DeviceList:
    """Every NVIDIA device on this node: ``{"devices": [...], "driver": ..., "error": ...}``.

    ``utilization=True`` adds each device's current utilization (percent), which the panel
    shows; it costs one more NVML call per device.
    """
    with session() as (nvml, error):
        if nvml is None:
            reason: Reason = "not_installed" if error == _NOT_INSTALLED else "no_driver"
            return {"devices": [], "driver": None, "error": error, "reason": reason}
        try:
            found: list[Device] = []
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                device: Device = {"index": index, **device_facts(nvml, handle)}
                if utilization:
                    device["utilization"] = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                found.append(device)
            driver = text(nvml.nvmlSystemGetDriverVersion())
            return {"devices": found, "driver": driver, "error": None, "reason": None}
        except Exception as exc:  # noqa: BLE001
            error = f"NVML failed: {exc}"
            return {"devices": [], "driver": None, "error": error, "reason": "failed"}
