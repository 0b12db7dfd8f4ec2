"""The worker side of a call's printed lines, for a notebook: captured per call, sent to the hub.

When the driver is a notebook kernel, the function a task runs is wrapped (:func:`wrap`): for
the call's duration ``sys.stdout``/``sys.stderr`` are a buffer that a thread sends to the
session's output hub every :data:`~.cells.worker.FLUSH_INTERVAL` seconds, keyed by the call's
task id, so the kernel can put each line under the cell that made *that* call (Ray's own log
stream only names the function, and folds repeated lines). A call that printed sends what is
left, and waits for the hub to have it, before it returns: when ``get`` has the value, the hub
has the lines. A call that prints nothing sends nothing. Nothing here imports IPython.

Output written straight to the file descriptors (C code, subprocesses) bypasses ``sys.stdout``
and goes to Ray's log as before; where the worker's descriptors are Ray's log files (they are,
on Ray's workers), what a call added to them while it ran is read back and sent as its own
stream (``"fd:stdout"``, ``"fd:stderr"``): the notebook says in one line where it went, and
``eugo.hpc.logs(fut)`` returns it with the rest.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Callable
from typing import Any

from .cells.worker import Chunks, _Sink, _Stream

__all__ = ["FD_BYTES", "call_printing", "fd_marks", "fd_written", "wrap", "wrap_class"]

#: At most this much of what a call wrote straight to a descriptor is read back (the rest stays
#: in Ray's log file).
FD_BYTES = 1 << 20

_FDS = ((1, "stdout"), (2, "stderr"))


_paths: dict[tuple[int, int], str] = {}  # (descriptor, inode) -> its file, read once


def fd_marks() -> dict[int, tuple[str, int]]:
    """Where stdout and stderr's descriptors write, and how far, when they are plain files
    (two ``fstat`` calls per call once the files are known)."""
    marks = {}
    for fd, _ in _FDS:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                continue
            key = (fd, info.st_ino)
            path = _paths.get(key)
            if path is None:
                path = _paths[key] = os.readlink(f"/proc/self/fd/{fd}")
            marks[fd] = (path, info.st_size)
        except OSError:
            continue
    return marks


def fd_written(marks: dict[int, tuple[str, int]]) -> list[tuple[str, str]]:
    """What was written to each marked descriptor since ``marks``: ``[(stream, text), ...]``."""
    out = []
    for fd, name in _FDS:
        if fd not in marks:
            continue
        path, before = marks[fd]
        try:
            after = os.fstat(fd).st_size
            if after <= before:
                continue
            with open(path, "rb") as f:
                f.seek(before)
                data = f.read(min(after - before, FD_BYTES))
        except OSError:
            continue
        out.append((f"fd:{name}", data.decode(errors="replace")))
    return out


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
    for stream in saved:
        try:
            stream.flush()  # what was printed before this call is not this call's
        except (AttributeError, OSError, ValueError):
            pass
    marks = fd_marks()
    sys.stdout, sys.stderr = _Stream(sink, "stdout"), _Stream(sink, "stderr")
    try:
        return fn(*args, **kwargs)
    finally:
        sys.stdout, sys.stderr = saved
        for stream, text in fd_written(marks):
            sink.add(stream, text)
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
