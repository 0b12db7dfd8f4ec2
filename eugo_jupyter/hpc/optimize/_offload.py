"""GPU offload: the function's NumPy bound to CuPy, arrays moved to the device and back.

:func:`namespace` finds CuPy and a visible device, or says why not ("no GPU visible in this
process"). :func:`trial` runs the function both ways on copies of one call's arguments: on the
CPU, and with every global name bound to the ``numpy`` module rebound to the array namespace,
array arguments moved to the device and the result moved back, each part timed. The GPU is
kept only when its answer equals the CPU's (the comparison of :mod:`._verify`) and the whole
trip, transfers included, is faster ("moving the data takes 12 ms, this CPU computes it in
3 ms: kept CPU"). The namespace is a parameter, so the rewriting and the verification are
tested with a stand-in where CuPy cannot run.
"""

from __future__ import annotations

import os
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._units import format_seconds as _fmt
from . import _compile, _verify

__all__ = ["ArrayNamespace", "Runner", "Trial", "namespace", "numpy_names", "rebind", "trial"]


@dataclass
class ArrayNamespace:
    """An array module (CuPy) and how arrays cross to its device and back."""

    module: Any
    to_device: Callable[[Any], Any]
    to_host: Callable[[Any], Any]
    synchronize: Callable[[], None] = lambda: None
    name: str = "cupy"


def namespace() -> tuple[ArrayNamespace | None, str]:
    """CuPy with a visible GPU, or None and the reason offload was not tried."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed in this worker (pip install cupy-cuda12x)"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - no driver, no device: the reason is the answer
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        return None, f"no GPU visible in this process (CUDA_VISIBLE_DEVICES={visible}): {exc}"
    if count == 0:
        return None, "no GPU visible in this process"

    def sync() -> None:
        cupy.cuda.Stream.null.synchronize()

    return ArrayNamespace(cupy, cupy.asarray, cupy.asnumpy, sync), ""


def numpy_names(fn: types.FunctionType) -> list[str]:
    """The global names of ``fn`` bound to the ``numpy`` module (``np``, ``numpy``)."""
    np = sys.modules.get("numpy")
    return [k for k, v in fn.__globals__.items() if v is np and np is not None]


def rebind(fn: types.FunctionType, module: Any) -> types.FunctionType:
    """``fn`` with its ``numpy`` names bound to ``module`` (nothing else changes)."""
    return _compile.rebind(fn, dict.fromkeys(numpy_names(fn), module))


@dataclass
class Trial:
    kept: bool
    text: str
    cpu_s: float
    gpu_s: float
    transfer_s: float
    difference: str = ""


def _move(value: Any, to: Callable[[Any], Any], np: Any) -> Any:
    if isinstance(value, np.ndarray):
        return to(value)
    if isinstance(value, tuple):
        return tuple(_move(v, to, np) for v in value)
    if isinstance(value, list):
        return [_move(v, to, np) for v in value]
    return value


def _back(value: Any, xp: ArrayNamespace, np: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_back(v, xp, np) for v in value)
    if isinstance(value, np.ndarray) or hasattr(value, "__array__") and not np.isscalar(value):
        return np.asarray(xp.to_host(value))
    return value.item() if hasattr(value, "item") and not isinstance(value, np.ndarray) else value


def trial(fn: types.FunctionType, args: tuple, xp: ArrayNamespace) -> Trial:
    """Run ``fn(*args)`` on the CPU and through ``xp``; keep the GPU only if equal and faster."""
    import numpy as np

    if not numpy_names(fn):
        return Trial(False, "the function does not use numpy: nothing to offload", 0, 0, 0)
    cpu_args = _verify.copy_args(args)
    began = time.perf_counter()
    expected = fn(*cpu_args)
    cpu_s = time.perf_counter() - began
    on_device = rebind(fn, xp.module)
    began = time.perf_counter()
    moved = _move(_verify.copy_args(args), xp.to_device, np)
    xp.synchronize()
    there = time.perf_counter() - began
    began = time.perf_counter()
    result = on_device(*moved)
    xp.synchronize()
    gpu_s = time.perf_counter() - began
    began = time.perf_counter()
    host = _back(result, xp, np)
    transfer_s = there + time.perf_counter() - began
    found, _ = _verify.compare(expected, host)
    if found is not None:
        return Trial(False, f"the {xp.name} result differs ({found.text()}): kept CPU", cpu_s,
                     gpu_s, transfer_s, found.text())  # fmt: skip
    if gpu_s + transfer_s >= cpu_s:
        return Trial(
            False,
            f"moving the data takes {_fmt(transfer_s)} and computing on the GPU {_fmt(gpu_s)}, "
            f"this CPU computes it in {_fmt(cpu_s)}: kept CPU",
            cpu_s,
            gpu_s,
            transfer_s,
        )
    return Trial(
        True,
        f"offloaded with {xp.name}: {_fmt(gpu_s + transfer_s)} per call with the transfers, "
        f"CPU {_fmt(cpu_s)}",
        cpu_s,
        gpu_s,
        transfer_s,
    )


class Runner:
    """The offloaded version, called like a compiled one: arrays in, host values out."""

    def __init__(self, fn: types.FunctionType, xp: ArrayNamespace) -> None:
        self.fn, self.xp = fn, xp
        self.overloads: dict[Any, Any] = {}  # the compiled call path reads these
        self.signatures: list[Any] = []

    def __call__(self, *args: Any) -> Any:
        import numpy as np

        result = self.fn(*_move(args, self.xp.to_device, np))
        self.xp.synchronize()
        return _back(result, self.xp, np)
