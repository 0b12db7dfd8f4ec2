"""A running call's output, on the worker: ``sys.stdout``/``sys.stderr`` and descriptors 1, 2.

While a wrapped call runs (:mod:`.wrap`), ``sys.stdout``/``sys.stderr`` send each write to the
call's sink (:class:`~.hub.CallSink`). Which call a write belongs to is a context variable: each
thread, and each asyncio task of an async actor, has its own, so calls running at once keep their
own lines; a thread the call started itself has none, and writes to the call running alone in
the process.

Output written straight to the file descriptors (C code, subprocesses) bypasses ``sys.stdout``:
while a call runs, descriptors 1 and 2 point at files of this process (:class:`_Descriptors`),
read back live and sent as the call's own streams (``"fd:stdout"``, ``"fd:stderr"``), so those
lines show under the cell too and never reach Ray's log (whose stream would show them a second
time). Past :data:`FD_BYTES` per call the rest is passed on to Ray's log, and the cell says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from .hub import FLUSH_INTERVAL, CallSink

__all__ = ["FD_BYTES", "current", "muted", "printing"]

#: At most this much of what one call writes straight to a descriptor is shown; the rest goes
#: to Ray's log, as it would without a notebook.
FD_BYTES = 1 << 20

_FDS = ((1, "stdout"), (2, "stderr"))

#: The call whose code is running, in this thread or asyncio task.
current: contextvars.ContextVar[CallSink | None] = contextvars.ContextVar(
    "eugo_call_sink", default=None
)


class _Routed(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` while wrapped calls run: each write goes to its call."""

    def __init__(self, name: str, real: Any) -> None:
        self.name, self._real = name, real

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not text:
            return 0
        sink = current.get() or _redirect.alone()
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
        self.owner: CallSink | None = None
        self.saved: dict[int, int] = {}  # descriptor -> a duplicate of what it pointed at
        self.files: dict[int, int] = {}  # descriptor -> our file's descriptor
        self.read: dict[int, int] = {}  # descriptor -> bytes of our file already read
        self.given: int = 0  # bytes the owner was sent (at most FD_BYTES)
        self.passed: dict[int, int] = {}  # descriptor -> bytes passed on to Ray's log
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.fflush: Any = None  # C's fflush, looked up once (False where there is none)

    def open(self, sink: CallSink) -> None:
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

    def pull(self, sink: CallSink) -> None:
        """Send ``sink`` what was written to the descriptors since the last pull (its window)."""
        if self.owner is not sink:
            return
        with self.lock:
            if self.owner is not sink:
                return
            for fd, name in _FDS:
                if fd in self.saved:
                    self._pull_one(sink, fd, name)

    def _pull_one(self, sink: CallSink, fd: int, name: str) -> None:
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

    def close(self, sink: CallSink) -> None:
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
        self.running: list[CallSink] = []
        self.saved: tuple[Any, Any] | None = None

    def alone(self) -> CallSink | None:
        """The call running alone here (its own threads have no context of their own)."""
        running = self.running
        return running[0] if len(running) == 1 else None

    def enter(self, sink: CallSink) -> None:
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

    def leave(self, sink: CallSink) -> None:
        _descriptors.close(sink)
        with self.lock:
            self.running.remove(sink)
            if not self.running and self.saved is not None:
                sys.stdout, sys.stderr = self.saved
                self.saved = None


_redirect = _Redirect()
_descriptors = _Descriptors()


@contextlib.contextmanager
def printing(sink: CallSink) -> Iterator[None]:
    """While inside: this thread's (or asyncio task's) prints are ``sink``'s."""
    token = current.set(sink)
    _redirect.enter(sink)
    try:
        yield
    finally:
        _redirect.leave(sink)
        current.reset(token)


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
    token = current.set(discard)  # type: ignore[arg-type]
    # Routed (a notebook's call), Python's prints follow the context; otherwise they go to
    # whatever sys.stdout is, swapped for the run (another thread's prints meanwhile too).
    swapped = None if isinstance(sys.stdout, _Routed) else (sys.stdout, sys.stderr)
    if swapped is not None:
        sys.stdout = sys.stderr = discard
    try:
        yield
    finally:
        current.reset(token)
        if swapped is not None:
            sys.stdout, sys.stderr = swapped
        with _descriptors.lock:
            _descriptors._flush_c()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
