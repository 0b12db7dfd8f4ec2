"""Worker side of ``eugo.hpc.profile()``: run one task body (or actor method) and describe it.

A profiled call runs through :func:`timed_call` (tasks) or :func:`timed_method` (actor methods,
through Ray's ``__ray_call__``), which return the value plus a small timing dict: when the body
ran and where, whether it returned a future it ``put`` itself, and the ``get`` calls it made
on futures that came inside its arguments. Imported on workers: Ray and the standard library
only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypedDict

__all__ = ["Timing", "timed_call", "timed_method"]


class Timing(TypedDict, total=False):
    """What the worker measured for one call (times are epoch seconds on the worker)."""

    start: float
    end: float
    pid: int
    node: str | None
    returned_put: bool
    nested_gets: int
    nested_get_s: float
    failed: bool
    cpu_s: float  #: CPU seconds the process spent in the body (all its threads)
    optimizations: list[Any]  #: this process's optimizer stats (``optimize._state.Stats``)


class _TaskProbe:
    """Stands in for the driver's recorder while a body runs, to see its own ``get`` calls.

    Calls it submits pass straight through (one Ray handle per function, cached per process).
    """

    _remotes: dict[int, tuple[Callable[..., Any], Any]] = {}

    def __init__(self, argument_refs: set[bytes]) -> None:
        self.argument_refs = argument_refs
        self.submitted: set[bytes] = set()
        self.gets = 0
        self.waited = 0.0

    def submit(self, label: str, fn: Callable[..., Any], options: Any, request: Any,
               args: tuple, kwargs: dict) -> Any:  # fmt: skip
        import ray

        cached = self._remotes.get(id(fn))
        if cached is None or cached[0] is not fn:
            cached = self._remotes[id(fn)] = (fn, ray.remote(fn))
        remote = cached[1].options(**options) if options else cached[1]
        return self._note(remote.remote(*args, **kwargs))

    def _note(self, refs: Any) -> Any:
        for ref in refs if isinstance(refs, list) else [refs]:
            if hasattr(ref, "binary"):
                self.submitted.add(ref.binary())
        return refs

    def submit_method(self, cls: Any, handle: Any, method: str, label: str, plain: Any,
                      timed: bool, args: tuple, kwargs: dict) -> Any:  # fmt: skip
        return self._note(plain.remote(*args, **kwargs))

    def got(self, refs: Any, began: float, ended: float) -> None:
        if any(getattr(r, "binary", None) and r.binary() in self.argument_refs for r in refs):
            self.gets += 1
            self.waited += ended - began

    def returned(self, refs: Any, values: Any) -> None:
        pass

    def resumed(self, label: str, path: str, from_journal: int, ran: int) -> None:
        pass  # a journaled map inside a task: the kernel's report does not see it


def _nested_refs(values: Any) -> set[bytes]:
    """Ids of futures one container deep in the arguments (Ray resolves only top-level ones)."""
    import ray

    found: set[bytes] = set()
    for value in values:
        inner = value.values() if isinstance(value, dict) else value
        if isinstance(inner, (list, tuple, set, frozenset, type({}.values()))):
            found.update(v.binary() for v in inner if isinstance(v, ray.ObjectRef))
    return found


def _run(body: Callable[[], Any], args: tuple, kwargs: dict) -> tuple[Any, Timing]:
    import ray

    from ... import _hooks

    probe = _TaskProbe(_nested_refs((*args, *kwargs.values())))
    # Threaded actors may run calls at once: only the first installs the probe.
    installed = _hooks.recorder is None
    if installed:
        _hooks.set_recorder(probe)
    start = time.time()
    cpu_start = time.process_time()
    try:
        value = body()
    finally:
        end = time.time()
        cpu_s = time.process_time() - cpu_start
        if installed:
            _hooks.set_recorder(None)
    context = ray.get_runtime_context()
    try:
        node = context.get_node_id()
    except Exception:  # noqa: BLE001 - timing must never fail a task
        node = None
    # A future that is neither a call this body submitted nor one it was given: a put().
    returned_put = isinstance(value, ray.ObjectRef) and value.binary() not in (
        probe.submitted | probe.argument_refs
    )
    timing: Timing = {
        "start": start,
        "end": end,
        "pid": os.getpid(),
        "node": node,
        "returned_put": returned_put,
        "nested_gets": probe.gets,
        "nested_get_s": probe.waited,
        "cpu_s": cpu_s,
    }
    optimizer = sys.modules.get("eugo_jupyter.hpc.optimize._state")  # loaded only if used
    if optimizer is not None:
        timing["optimizations"] = optimizer.snapshot()
    return value, timing


def timed_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, Timing]:
    """Run a task body; returns its value and its :class:`Timing`."""
    return _run(lambda: fn(*args, **kwargs), args, kwargs)


def timed_method(actor: Any, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Timing]:
    """Run ``actor.method(*args, **kwargs)`` inside the actor (through ``__ray_call__``)."""
    bound = getattr(actor, method)
    return _run(lambda: bound(*args, **kwargs), args, kwargs)
