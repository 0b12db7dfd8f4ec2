"""The worker side of a call's printed lines, for a notebook: captured per call, sent to the hub.

When the driver is a notebook kernel, the function a task runs is wrapped (:func:`wrap`): for
the call's duration ``sys.stdout``/``sys.stderr`` are a buffer that a thread sends to the
session's output hub every :data:`~.cells.worker.FLUSH_INTERVAL` seconds, keyed by the call's
task id, so the kernel can put each line under the cell that made *that* call (Ray's own log
stream only names the function, and folds repeated lines). A call that printed sends what is
left, and waits for the hub to have it, before it returns: when ``get`` has the value, the hub
has the lines. A call that prints nothing sends nothing. Nothing here imports IPython.

Output written straight to the file descriptors (C code, subprocesses) bypasses ``sys.stdout``
and goes to Ray's log as before.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from .cells.worker import Chunks, _Sink, _Stream

__all__ = ["call_printing", "wrap", "wrap_class"]


class _CallSink(_Sink):
    """A cell's sink, keyed by the running task's id, that names its node in its first batch."""

    def __init__(self, hub_name: str) -> None:
        super().__init__(hub_name, "")
        self.started = False

    def add(self, stream: str, text: str) -> None:
        if not self.started:
            self.started = True
            import ray

            context = ray.get_runtime_context()
            self._cell_id = context.get_task_id() or ""
            super().add("node", context.get_node_id()[:8])
        super().add(stream, text)

    def finish(self) -> None:
        """Send the rest and wait until the hub holds every batch (only if anything printed)."""
        tail: Chunks = self.close()
        if not self.started or self.lost:
            return
        import ray

        if tail:
            ray.get(self._hub.write.remote(self._cell_id, self.sent, tail))
            self.sent += 1
        ray.get(self._hub.done.remote(self._cell_id, self.sent))


def call_printing(fn: Callable[..., Any], hub_name: str, args: tuple, kwargs: dict) -> Any:
    """Run ``fn(*args, **kwargs)`` with its prints sent to the hub ``hub_name``."""
    sink = _CallSink(hub_name)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(sink, "stdout"), _Stream(sink, "stderr")
    try:
        return fn(*args, **kwargs)
    finally:
        sys.stdout, sys.stderr = saved
        sink.finish()


def wrap(fn: Callable[..., Any], hub_name: str) -> Callable[..., Any]:
    """``fn`` as a task body whose prints go to the hub; Ray names the task after ``fn``."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return call_printing(fn, hub_name, args, kwargs)

    return run


def wrap_class(cls: type, hub_name: str) -> type:
    """``cls`` as an actor class whose plain methods send their prints to the hub.

    A subclass named as ``cls``: the actor's state and methods are the class's own. Coroutine
    methods (async actors) are left as they are and print through Ray's stream. Calls running
    at once in a threaded actor (``max_concurrency`` > 1) share ``sys.stdout``, so their lines
    may be told apart wrongly.
    """
    import inspect
    import types

    namespace: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, member in vars(klass).items():
            if name.startswith("__") or not isinstance(member, types.FunctionType):
                continue
            if inspect.iscoroutinefunction(member) or inspect.isgeneratorfunction(member):
                continue
            namespace[name] = _method(member, hub_name)
    wrapped = type(cls.__name__, (cls,), namespace)
    wrapped.__qualname__ = cls.__qualname__
    wrapped.__module__ = cls.__module__
    wrapped.__doc__ = cls.__doc__
    return wrapped


def _method(fn: Callable[..., Any], hub_name: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call_printing(fn, hub_name, (self, *args), kwargs)

    return run
