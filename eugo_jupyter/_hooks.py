"""Where other parts plug into hpc's call path: a profile, a GPU audit, after-get callbacks, sizing.

hpc never imports the parts that observe it (``gpu``, ``magics``, ``profile``): they register
here, and the call path reads one module attribute per call (``None`` when nothing is plugged
in, so an unobserved call pays one lookup).

- :func:`set_recorder`: the active ``eugo.hpc.profile()`` run submits calls and times ``get``.
- :func:`set_audit`: the active ``eugo.gpu.audit()`` submits the calls that request GPUs.
- :func:`on_get`: called with the futures after ``eugo.hpc.get`` returned their values (the
  magics bind a finished ``--no-block`` cell's names there).
- ``optimize_default``: the notebook-wide ``optimize=`` (``eugo.hpc.set_optimize``).
- :func:`set_optimizer`: what a call with ``optimize=`` ships instead of the plain function
  (registered by the package root, implemented in ``hpc/optimize/``): the call sites of hpc
  never import the optimizer, which loads numba only when a call asks for it.
- :func:`set_gpu_memory_sizer`: turns ``gpu_memory="6GB"`` into ``num_gpus`` on this cluster's
  GPUs (registered by the package root, implemented in ``gpu/sizing.py``).
- :func:`set_gpu_use`: how a worker judges whether a call used its GPU, and the records of the
  latest GPU-use audit (registered by the package root, implemented in ``gpu/audit.py``);
  readiness and ``run.report()`` read them through :func:`measure_gpu_use` and
  :func:`latest_audit_records`, which answer ``None`` and ``[]`` when nothing is plugged in.
- :func:`set_launcher`: what ``eugo.hpc.launch`` and ``eugo.hpc.clusters`` call (registered by
  the package root, implemented in ``server/from_code.py``: the Manager's backends and REST API
  sit above hpc).

>>> calls = []
>>> on_get(calls.append)
>>> run_after_get(["ref"])
>>> calls
[['ref']]
>>> remove_on_get(calls.append)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ._gpu_use import AuditRecord
from .exceptions import ConflictError, OptionsError

__all__ = [
    "AuditHook",
    "GpuUse",
    "Launcher",
    "Optimizer",
    "Recorder",
    "audit",
    "latest_audit_records",
    "measure_gpu_use",
    "on_get",
    "recorder",
    "remove_on_get",
    "run_after_get",
    "set_audit",
    "set_gpu_memory_sizer",
    "set_gpu_use",
    "set_launcher",
    "set_optimizer",
    "set_recorder",
    "size_gpu_memory",
    "the_optimizer",
]


class Recorder(Protocol):
    """What a profile run offers the call path (see ``hpc/_profile.py``)."""

    def submit(
        self,
        name: str,
        fn: Callable[..., Any],
        options: Mapping[str, Any],
        request: Mapping[str, float],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any: ...

    def submit_method(
        self,
        cls: type | None,
        handle: Any,
        method: str,
        label: str,
        plain: Any,
        timed: bool,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any: ...

    def got(self, refs: Iterable[Any], began: float, ended: float) -> None: ...

    def resumed(self, label: str, path: str, from_journal: int, ran: int) -> None: ...

    def returned(self, refs: list[Any], values: list[Any]) -> None: ...


#: Submits one GPU-requesting call in the audit's place: ``(fn, submitter, args, kwargs) -> refs``.
AuditHook = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]
GpuMemorySizer = Callable[[Mapping[str, Any]], dict[str, Any]]


class GpuUse(Protocol):
    """What the GPU audit offers hpc (see ``gpu/audit.py``)."""

    def measure(
        self, name: str, num_gpus: float, started: float, duration: float, error: str | None
    ) -> AuditRecord:
        """Judge, in the worker after a call, whether it used its GPU share."""
        ...

    def latest_records(self) -> list[AuditRecord]:
        """The records of the latest GPU-use audit started in this kernel."""
        ...


class Launcher(Protocol):
    """What the cluster launcher offers hpc (see ``server/from_code.py``)."""

    def launch(self, kind: str, **fields: Any) -> Any: ...

    def clusters(self) -> Any: ...


class Optimizer(Protocol):
    """What the optimizer offers the call sites (see ``hpc/optimize/_calls.py``)."""

    def for_task(
        self, fn: Any, mode: Any, options: Mapping[str, Any], label: str
    ) -> tuple[Callable[..., Any], Any]:
        """``(function to submit, its Ray handle with options)`` for an optimized task call."""
        ...

    def wrap(
        self, fn: Any, mode: Any, options: Mapping[str, Any], expected_calls: int | None = None
    ) -> Any:
        """``fn`` run through the optimizer (a map's items, the pandas accessors, a cell's
        functions); ``expected_calls``: the calls each worker makes (a map's share), else None."""
        ...

    def declared(self) -> None:
        """A function was declared with ``optimize=``, ahead of its calls."""
        ...


#: The active run recorder (``eugo.hpc.profile()``), else None.
recorder: Recorder | None = None
#: Set only while ``eugo.gpu.audit()`` is active, else None.
audit: AuditHook | None = None
_after_get: list[Callable[[list[Any]], None]] = []
_gpu_memory_sizer: GpuMemorySizer | None = None
_gpu_use: GpuUse | None = None
#: What ``eugo.hpc.launch`` / ``eugo.hpc.clusters`` call (the package root registers it).
launcher: Launcher | None = None
#: What ships in a function's place when a call asks for ``optimize=`` (the package root).
optimizer: Optimizer | None = None
#: ``optimize=`` for calls that do not say (``eugo.hpc.set_optimize``, ``%eugo optimize on``).
optimize_default: bool | str = False


def set_recorder(new: Recorder | None) -> None:
    """Start (``new``) or stop (``None``) routing calls through a profile; profiles do not nest."""
    global recorder
    if new is not None and recorder is not None and recorder is not new:
        raise ConflictError(
            "A profile is already recording; end that `with eugo.hpc.profile()` block "
            "before starting another."
        )
    recorder = new


def set_audit(new: AuditHook | None) -> None:
    """Start (``new``) or stop (``None``) the GPU-use audit; audits do not nest."""
    global audit
    if new is not None and audit is not None:
        raise ConflictError(
            "A GPU-use audit is already active; audits do not nest. End the first "
            "`with eugo.gpu.audit()` block (or call its .stop()) before starting another."
        )
    audit = new


def on_get(callback: Callable[[list[Any]], None]) -> None:
    """Call ``callback(futures)`` after each successful ``eugo.hpc.get`` (added once)."""
    if callback not in _after_get:
        _after_get.append(callback)


def remove_on_get(callback: Callable[[list[Any]], None]) -> None:
    """Stop calling ``callback`` after ``get``; unknown callbacks are ignored."""
    if callback in _after_get:
        _after_get.remove(callback)


def run_after_get(refs: list[Any]) -> None:
    """Run the after-get callbacks (the call path does this)."""
    for callback in list(_after_get):
        callback(refs)


def set_gpu_memory_sizer(sizer: GpuMemorySizer | None) -> None:
    """Register what turns ``gpu_memory=`` into ``num_gpus=`` (the package root registers one)."""
    global _gpu_memory_sizer
    _gpu_memory_sizer = sizer


def size_gpu_memory(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``gpu_memory`` replaced by a ``num_gpus`` sized on the cluster's GPUs."""
    if _gpu_memory_sizer is None:
        raise OptionsError(
            "gpu_memory= cannot be sized here: import eugo_jupyter (which loads the GPU sizing) "
            "or give num_gpus= directly (such as num_gpus=0.25)."
        )
    return _gpu_memory_sizer(options)


def set_gpu_use(gpu_use: GpuUse | None) -> None:
    """Register how GPU use is judged and where audit records are (the package root does)."""
    global _gpu_use
    _gpu_use = gpu_use


def measure_gpu_use(
    name: str, num_gpus: float, started: float, duration: float, error: str | None = None
) -> AuditRecord | None:
    """The GPU-use record of a call that just ran in this worker; None when no audit is plugged."""
    if _gpu_use is None:
        return None
    return _gpu_use.measure(name, num_gpus, started, duration, error)


def latest_audit_records() -> list[AuditRecord]:
    """The latest GPU-use audit's records (``[]`` when there was none or none is plugged in)."""
    return _gpu_use.latest_records() if _gpu_use is not None else []


def set_launcher(new: Launcher | None) -> None:
    """Register what launches clusters from code (the package root does)."""
    global launcher
    launcher = new


def set_optimizer(new: Optimizer | None) -> None:
    """Register the optimizer the call sites hand ``optimize=`` calls to (the package root does)."""
    global optimizer
    optimizer = new


def the_optimizer() -> Optimizer:
    """The registered optimizer; an error that says so when none is (a bare hpc import)."""
    if optimizer is None:
        raise RuntimeError("optimize= needs the optimizer: import eugo_jupyter first.")
    return optimizer
