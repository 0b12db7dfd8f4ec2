"""The worker side of a call's printed lines, for a notebook: captured per call, sent to the hub.

When the driver is a notebook kernel, the function a task runs (and each method of an actor) is
wrapped (:func:`wrap`, :func:`wrap_class`): while the call runs, ``sys.stdout``/``sys.stderr``
send each write to the call's sink, which a thread sends to the session's output hub every
:data:`~.cells.worker.FLUSH_INTERVAL` seconds, keyed by the call's task id, so the kernel can put
each line under the cell that made *that* call (Ray's own log stream only names the function, and
folds repeated lines). Which call a write belongs to is a context variable: each thread, and each
asyncio task of an async actor, has its own, so calls running at once keep their own lines; a
thread the call started itself has none, and writes to the call running alone in the process.
Generators (Ray's streaming generators, sync and async) capture each step, and hand the lines of
a step to the hub before Ray ships the item it yields. A call that printed sends what is left,
and waits for the hub to have it, before it returns: when ``get`` has the value, the hub has the
lines. A call that prints nothing sends nothing. Nothing here imports IPython.

Output written straight to the file descriptors (C code, subprocesses) bypasses ``sys.stdout``:
while a call runs, descriptors 1 and 2 point at files of this process (:class:`_Descriptors`),
read back live and sent as the call's own streams (``"fd:stdout"``, ``"fd:stderr"``), so those
lines show under the cell too and never reach Ray's log (whose stream would show them a second
time). Past :data:`FD_BYTES` per call the rest is passed on to Ray's log, and the cell says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import io
import os
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .cells.worker import FLUSH_INTERVAL, Chunks, _Sink

__all__ = ["FD_BYTES", "call_printing", "muted", "wrap", "wrap_class"]

#: At most this much of what one call writes straight to a descriptor is shown; the rest goes
#: to Ray's log, as it would without a notebook.
FD_BYTES = 1 << 20

_FDS = ((1, "stdout"), (2, "stderr"))

#: The call whose code is running, in this thread or asyncio task.
_current: contextvars.ContextVar[_CallSink | None] = contextvars.ContextVar(
    "eugo_call_sink", default=None
)


def _wait(ref: Any) -> None:
    """Wait for the hub's reply ``ref``. In an async actor (its ``__init__``, plain and generator
    methods) not with ``ray.get``, which Ray refuses there: it warns into the notebook. Its
    future is set from Ray's own threads, so waiting on it cannot hold up its own reply."""
    from .._raystate import in_async_actor

    if in_async_actor():
        ref.future().result()
    else:
        import ray

        ray.get(ref)


class _CallSink(_Sink):
    """A call's sink, keyed by its task id, that names its node in its first batch."""

    def __init__(self, hub_name: str) -> None:
        import ray

        context = ray.get_runtime_context()
        super().__init__(hub_name, context.get_task_id() or "")
        self._context = context
        self.started = False

    def add(self, stream: str, text: str) -> None:
        if not self.started:
            self.started = True
            super().add("node", self._context.get_node_id()[:8])
        super().add(stream, text)

    def _tail(self) -> Chunks | None:
        """Stop sending; what is left, or None when nothing was ever printed (nothing to wait
        for)."""
        tail: Chunks = self.close()
        if not self.started or self.lost:
            return None
        return tail

    def finish(self) -> None:
        """Send the rest and wait until the hub holds every batch (only if anything printed)."""
        tail = self._tail()
        if tail is None:
            return
        if tail:
            _wait(self._hub.write.remote(self._cell_id, self.sent, tail))
            self.sent += 1
        _wait(self._hub.done.remote(self._cell_id, self.sent))

    async def finish_async(self) -> None:
        """:meth:`finish` for an async actor: awaits the hub instead of blocking its loop."""
        tail = self._tail()
        if tail is None:
            return
        if tail:
            await self._hub.write.remote(self._cell_id, self.sent, tail)
            self.sent += 1
        await self._hub.done.remote(self._cell_id, self.sent)

    def _step_batch(self) -> Any:
        """Send what a generator step printed now: the hub's reply, to wait on (or None)."""
        return None if self.lost else self.send()

    def sync(self) -> None:
        """Before a generator yields: the lines of its step are at the hub."""
        ref = self._step_batch()
        if ref is not None:
            _wait(ref)

    async def sync_async(self) -> None:
        ref = self._step_batch()
        if ref is not None:
            await ref


class _Routed(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` while wrapped calls run: each write goes to its call."""

    def __init__(self, name: str, real: Any) -> None:
        self.name, self._real = name, real

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not text:
            return 0
        sink = _current.get() or _redirect.alone()
        if sink is None:
            return int(self._real.write(text) or 0) if self._real is not None else len(text)
        _descriptors.pull(sink)  # what C code wrote before this line comes first
        sink.add(self.name, str(text))
        return len(text)

    def flush(self) -> None:
        pass

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class _Descriptors:
    """Descriptors 1 and 2 while a call runs: files of this process, read back for the call.

    The window opens with the first call that runs when none is open (its *owner*) and closes
    when that call ends; what C code or a subprocess writes meanwhile is the owner's. The files
    are opened once per process, appended to, and emptied when the window closes.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.owner: _CallSink | None = None
        self.saved: dict[int, int] = {}  # descriptor -> a duplicate of what it pointed at
        self.files: dict[int, int] = {}  # descriptor -> our file's descriptor
        self.read: dict[int, int] = {}  # descriptor -> bytes of our file already read
        self.given: int = 0  # bytes the owner was sent (at most FD_BYTES)
        self.passed: dict[int, int] = {}  # descriptor -> bytes passed on to Ray's log
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.fflush: Any = None  # C's fflush, looked up once (False where there is none)

    def open(self, sink: _CallSink) -> None:
        with self.lock:
            if self.owner is not None:
                return
            try:
                self._flush_c()
                for fd, _ in _FDS:
                    if fd not in self.files:
                        self.files[fd] = self._file()
                    self.saved[fd] = os.dup(fd)
                    os.dup2(self.files[fd], fd)
                    self.read[fd] = 0
            except OSError:
                self._restore()
                return
            self.owner, self.given, self.passed = sink, 0, {}
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="eugo-fd", daemon=True)
                self.thread.start()
            if not self.wake.is_set():
                self.wake.set()

    @staticmethod
    def _file() -> int:
        import fcntl

        fd, path = tempfile.mkstemp(prefix="eugo-call-output-")
        os.unlink(path)
        # Appended to: a subprocess sharing the descriptor never writes over the call's lines.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
        return fd

    def _flush_c(self) -> None:
        """C's stdio buffers written out, so that they land where they were printed."""
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        if self.fflush is None:
            import ctypes

            try:
                self.fflush = ctypes.CDLL(None).fflush
            except (OSError, AttributeError):
                self.fflush = False
        if self.fflush:
            self.fflush(None)

    def pull(self, sink: _CallSink) -> None:
        """Send ``sink`` what was written to the descriptors since the last pull (its window)."""
        if self.owner is not sink:
            return
        with self.lock:
            if self.owner is not sink:
                return
            for fd, name in _FDS:
                if fd in self.saved:
                    self._pull_one(sink, fd, name)

    def _pull_one(self, sink: _CallSink, fd: int, name: str) -> None:
        mine = self.files[fd]
        try:
            size = os.fstat(mine).st_size
        except OSError:
            return
        start = self.read[fd]
        if size <= start:
            return
        data = os.pread(mine, size - start, start)
        self.read[fd] = start + len(data)
        room = max(0, FD_BYTES - self.given)
        if len(data) > room:
            # Past the cap: whole lines stay with the call, the rest goes to Ray's log.
            cut = data.rfind(b"\n", 0, room) + 1
            shown, rest = data[:cut], data[cut:]
            self.given = FD_BYTES
            with contextlib.suppress(OSError):
                os.write(self.saved[fd], rest)
            self.passed[fd] = self.passed.get(fd, 0) + len(rest)
            data = shown
        else:
            self.given += len(data)
        if data:
            sink.add(f"fd:{name}", data.decode(errors="replace"))
            if sink.lost:  # no hub: Ray's log has them, as without a notebook
                with contextlib.suppress(OSError):
                    os.write(self.saved[fd], data)

    def close(self, sink: _CallSink) -> None:
        if self.owner is not sink:
            return
        with self.lock:
            self._flush_c()
            self.pull(sink)
            self._restore()
            for fd, name in _FDS:
                passed = self.passed.get(fd, 0)
                if passed:
                    sink.add(
                        "note",
                        f"{passed:,} more bytes written straight to the worker's {name} (past "
                        f"{FD_BYTES >> 20} MiB in one call) went to Ray's log: Ray's log stream "
                        "shows them with a (pid=...) prefix.",
                    )
            self.owner = None

    def _restore(self) -> None:
        for fd, saved in list(self.saved.items()):
            with contextlib.suppress(OSError):
                os.dup2(saved, fd)
                os.close(saved)
            if self.read.get(fd):  # emptied only when something was written
                with contextlib.suppress(OSError):
                    os.ftruncate(self.files[fd], 0)
        self.saved.clear()

    def _loop(self) -> None:
        # Live: what a running call writes straight to its descriptors shows within a poll.
        while True:
            owner = self.owner
            if owner is None:
                self.wake.wait()
                self.wake.clear()  # then look again: a window opened meanwhile is seen
                continue
            with contextlib.suppress(Exception):  # output is best effort, never the call's fate
                self.pull(owner)
            time.sleep(FLUSH_INTERVAL)


class _Redirect:
    """``sys.stdout``/``sys.stderr`` for as long as any wrapped call runs in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: list[_CallSink] = []
        self.saved: tuple[Any, Any] | None = None

    def alone(self) -> _CallSink | None:
        """The call running alone here (its own threads have no context of their own)."""
        running = self.running
        return running[0] if len(running) == 1 else None

    def enter(self, sink: _CallSink) -> None:
        with self.lock:
            if not self.running:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()  # what was printed before this call is not this call's
                    except (AttributeError, OSError, ValueError):
                        pass
                self.saved = sys.stdout, sys.stderr
                sys.stdout = _Routed("stdout", self.saved[0])
                sys.stderr = _Routed("stderr", self.saved[1])
            self.running.append(sink)
        _descriptors.open(sink)

    def leave(self, sink: _CallSink) -> None:
        _descriptors.close(sink)
        with self.lock:
            self.running.remove(sink)
            if not self.running and self.saved is not None:
                sys.stdout, sys.stderr = self.saved
                self.saved = None


_redirect = _Redirect()
_descriptors = _Descriptors()


@contextlib.contextmanager
def _printing(sink: _CallSink) -> Iterator[None]:
    """While inside: this thread's (or asyncio task's) prints are ``sink``'s."""
    token = _current.set(sink)
    _redirect.enter(sink)
    try:
        yield
    finally:
        _redirect.leave(sink)
        _current.reset(token)


class _Discard(io.TextIOBase):
    """Where a muted run's prints go: nowhere (as a call's sink, and as ``sys.stdout``)."""

    lost = False

    def add(self, stream: str, text: str) -> None:
        pass

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def muted() -> Iterator[None]:
    """Nothing printed inside shows anywhere: Python's prints, and what C code writes to the
    descriptors. For the optimizer's verifying run of a compiled version, whose lines the plain
    run beside it has already printed (a call's output must not show twice).

    Descriptors belong to the process: while inside, what another thread's C code writes is lost
    too (a verifying run is one call, early in a function's life).
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()  # what was printed before is not muted
    with _descriptors.lock:
        _descriptors._flush_c()
        null = os.open(os.devnull, os.O_WRONLY)
        saved = {fd: os.dup(fd) for fd, _ in _FDS}
        for fd in saved:
            os.dup2(null, fd)
        os.close(null)
    discard = _Discard()
    token = _current.set(discard)  # type: ignore[arg-type]
    # Routed (a notebook's call), Python's prints follow the context; otherwise they go to
    # whatever sys.stdout is, swapped for the run (another thread's prints meanwhile too).
    swapped = None if isinstance(sys.stdout, _Routed) else (sys.stdout, sys.stderr)
    if swapped is not None:
        sys.stdout = sys.stderr = discard
    try:
        yield
    finally:
        _current.reset(token)
        if swapped is not None:
            sys.stdout, sys.stderr = swapped
        with _descriptors.lock:
            _descriptors._flush_c()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def call_printing(fn: Callable[..., Any], hub_name: str, args: tuple, kwargs: dict) -> Any:
    """Run ``fn(*args, **kwargs)`` with its prints sent to the hub ``hub_name``.

    Inside a call already printing here (a method calling another of its actor's), its prints
    are that call's.
    """
    if _current.get() is not None:
        return fn(*args, **kwargs)
    sink = _CallSink(hub_name)
    try:
        with _printing(sink):
            return fn(*args, **kwargs)
    except Exception as exc:
        from ._remote_tb import keep_frames

        keep_frames(exc)  # for eugo.hpc.debug(future) in the notebook
        raise
    finally:
        sink.finish()


async def _awaited_printing(fn: Callable[..., Any], hub_name: str, args: tuple,
                            kwargs: dict) -> Any:  # fmt: skip
    if _current.get() is not None:
        return await fn(*args, **kwargs)
    sink = _CallSink(hub_name)
    try:
        with _printing(sink):
            return await fn(*args, **kwargs)
    finally:
        await sink.finish_async()


def _generator_printing(fn: Callable[..., Any], hub_name: str, args: tuple,
                        kwargs: dict) -> Iterator[Any]:  # fmt: skip
    if _current.get() is not None:
        return (yield from fn(*args, **kwargs))
    sink = _CallSink(hub_name)
    inner = fn(*args, **kwargs)
    try:
        while True:
            with _printing(sink):
                try:
                    item = next(inner)
                except StopIteration as stop:
                    return stop.value
            sink.sync()
            yield item
    finally:
        with _printing(sink):
            inner.close()
        sink.finish()


async def _async_generator_printing(fn: Callable[..., Any], hub_name: str, args: tuple,
                                    kwargs: dict) -> AsyncIterator[Any]:  # fmt: skip
    if _current.get() is not None:
        async for item in fn(*args, **kwargs):
            yield item
        return
    sink = _CallSink(hub_name)
    inner = fn(*args, **kwargs)
    try:
        while True:
            with _printing(sink):
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    return
            await sink.sync_async()
            yield item
    finally:
        with _printing(sink):
            await inner.aclose()
        await sink.finish_async()


def _wrapped(fn: Callable[..., Any], hub_name: str) -> Callable[..., Any]:
    """``fn`` with its prints sent to the hub; of the same kind (plain, coroutine, generator,
    async generator), which Ray reads to run it, and named as ``fn``, which Ray names it by."""
    if inspect.isasyncgenfunction(fn):

        async def agen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in _async_generator_printing(fn, hub_name, args, kwargs):
                yield item

        run: Callable[..., Any] = agen
    elif inspect.isgeneratorfunction(fn):

        def gen(*args: Any, **kwargs: Any) -> Iterator[Any]:
            return (yield from _generator_printing(fn, hub_name, args, kwargs))

        run = gen
    elif inspect.iscoroutinefunction(fn):

        async def coro(*args: Any, **kwargs: Any) -> Any:
            return await _awaited_printing(fn, hub_name, args, kwargs)

        run = coro
    else:

        def plain(*args: Any, **kwargs: Any) -> Any:
            return call_printing(fn, hub_name, args, kwargs)

        run = plain
    return functools.wraps(fn)(run)


def wrap(fn: Callable[..., Any], hub_name: str) -> Callable[..., Any]:
    """``fn`` as a task body whose prints go to the hub; Ray names the task after ``fn``."""
    return _wrapped(fn, hub_name)


def wrap_class(cls: type, hub_name: str) -> type:
    """``cls`` as an actor class whose methods (and ``__init__``) send their prints to the hub.

    A subclass named as ``cls``: the actor's state and methods are the class's own. Coroutine
    and generator methods keep their kind (Ray runs an actor with a coroutine method as an async
    actor, and a generator method as a streaming generator).
    """
    import types

    namespace: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, member in vars(klass).items():
            if not isinstance(member, types.FunctionType):
                continue
            # __init__ runs as the actor's creation task: its prints go under the creating cell.
            if name.startswith("__") and name != "__init__":
                continue
            namespace[name] = _wrapped(member, hub_name)
    wrapped = type(cls.__name__, (cls,), namespace)
    wrapped.__qualname__ = cls.__qualname__
    wrapped.__module__ = cls.__module__
    wrapped.__doc__ = cls.__doc__
    return wrapped
