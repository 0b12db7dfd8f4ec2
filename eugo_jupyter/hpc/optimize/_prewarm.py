"""Numba's start in a worker before the first optimized call needs it, and beside the calls.

A fresh worker process spends about a second importing numba and another starting LLVM (its
first compile) before it can compile or load anything. Two things keep that off the calls:

- :func:`fast_switching`: while numba starts on a thread beside calls running Python, the
  interpreter switches threads every 0.5 ms instead of 5. Numba's import reads hundreds of
  files, each read handing the interpreter lock to the calls and waiting a whole switch
  interval to get it back: at 5 ms the start took about twice as long beside the calls as
  alone.
- :func:`fire`: when the notebook turns the optimizer on for every call (``set_optimize``,
  ``%eugo optimize on``) or declares a function with it (``@distribute(optimize=True)``,
  :func:`declare`), at that moment and when a cluster connects later, each CPU of the cluster
  gets one task that starts numba on a thread and returns at once (not waited on). The workers
  import numba while they wait for the notebook's first call, which then finds it loaded. Only
  then: a notebook that never asks for the optimizer loads no numba on its workers.

:func:`loading` tells the call path that numba is being started here and is not ready yet.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "declare", "fast_switching", "fire", "import_numba", "loading", "numba_installed",
    "on_connect", "start_numba", "started_here",
]  # fmt: skip

#: The switch interval while numba starts beside calls running Python.
SWITCH_S = 0.0005
#: Tasks of one :func:`fire` at most (one per CPU of the cluster, up to this).
MAX_TASKS = 64

_lock = threading.Lock()
_switching = 0  #: threads inside fast_switching()
_saved_interval = 0.0
_thread: threading.Thread | None = None  #: this process's numba start, if one ran
_fired: list[Any] = []  #: the latest fire's refs (kept until the next one)
_fired_for: tuple[str | None, str] = (None, "")  #: the connection fired for: (session, job)
_importing = threading.Lock()  #: held by the thread importing numba (see import_numba)
_imported = False  #: numba's import has completed in this process
_declared = False  #: a function of this notebook was declared with optimize= (see declare)


@contextlib.contextmanager
def fast_switching() -> Iterator[None]:
    """Switch threads every ``SWITCH_S`` while inside (nested and threads counted); the
    interval before is put back when the last one leaves, unless someone changed it meanwhile."""
    global _switching, _saved_interval
    with _lock:
        if _switching == 0:
            _saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_S, _saved_interval))
        _switching += 1
    try:
        yield
    finally:
        with _lock:
            _switching -= 1
            if _switching == 0 and sys.getswitchinterval() == min(SWITCH_S, _saved_interval):
                sys.setswitchinterval(_saved_interval)


def import_numba() -> Any | None:
    """numba (None where it is not installed), its first import made by one thread at a time.

    Two threads of a worker importing it at once (this module's start and a compile on the
    call's thread or in the background) can meet its modules half made: numba's packages
    import each other, and Python then hands one thread a module the other is still running
    ("module 'numba.core.types' has no attribute 'Type'"). Every import of numba in the
    optimizer goes through here (numba's own modules: :mod:`._numba_private` calls this first).
    """
    global _imported
    if _imported:
        return sys.modules["numba"]
    with _importing:
        try:
            import numba
        except ImportError:
            return None
        _imported = True
        return numba


def numba_installed() -> bool:
    """Whether numba can be imported, without importing it (its import takes ~1 s)."""
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def _start() -> None:
    with fast_switching(), contextlib.suppress(Exception):
        numba = import_numba()
        if numba is not None:
            numba.njit(lambda x: x + 1)(1)  # LLVM's start is paid by the first compile


def start_numba() -> bool:
    """Start numba's import and LLVM on a daemon thread of this process (once); False when
    numba is loaded already, started before, or not installed."""
    global _thread
    with _lock:
        if _thread is not None or "numba" in sys.modules or not numba_installed():
            return False
        _thread = threading.Thread(target=_start, daemon=True, name="eugo-optimize-numba")
        _thread.start()
    return True


def loading() -> bool:
    """Numba is being started in this process and is not ready yet."""
    thread = _thread
    return thread is not None and thread.is_alive()


def started_here() -> bool:
    """Whether :func:`start_numba` started numba in this process (``stats()`` says so)."""
    return _thread is not None


def on_connect(connection: object) -> None:
    """The session's connect listener (registered by ``set_optimize`` and :func:`declare`):
    while the notebook optimizes every call, or once it declared a function with ``optimize=``,
    a newly connected cluster's workers start numba at once."""
    from ... import _hooks

    if _hooks.optimize_default or _declared:
        fire()


def declare() -> None:
    """A function was declared with ``optimize=`` (``@distribute(optimize=True)``): its calls
    come later (a later cell, as a rule), so the workers start numba now, and those of each
    cluster connected later at its connect."""
    global _declared
    from .. import _session

    if not _declared:
        _declared = True
        _session.on_connect(on_connect)
    fire()


def fire() -> int:
    """One numba-starting task per CPU of the connected cluster (up to ``MAX_TASKS``), once per
    connection, not waited on; the number of tasks sent (0 when not connected, and in a worker:
    a declared function shipped to one is declared again there as it is rebuilt)."""
    global _fired, _fired_for
    import ray

    from ..._raystate import in_ray_worker, session_name

    if not ray.is_initialized() or in_ray_worker():
        return 0

    # A new connection is a new job of its cluster; a new cluster numbers its jobs from 1
    # again, so the connection is the cluster's session and the job together.
    connection = (session_name(), ray.get_runtime_context().get_job_id())
    if _fired_for == connection:
        return 0
    try:
        cpus = int(ray.cluster_resources().get("CPU", 0))
    except Exception:  # noqa: BLE001 - a cluster going away: nothing to warm
        return 0
    count = max(0, min(cpus, MAX_TASKS))
    remote = ray.remote(start_numba).options(
        num_cpus=1, max_retries=0, scheduling_strategy="SPREAD", name="eugo-optimize-start"
    )
    _fired = [remote.remote() for _ in range(count)]
    _fired_for = connection
    return count
