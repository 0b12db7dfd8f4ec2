"""A call's output, from the worker that printed it to the cell that made the call.

- worker side: :mod:`.capture` (``sys.stdout``/``sys.stderr`` and descriptors 1 and 2 while a
  call runs, and :func:`muted`), :mod:`.wrap` (a function or actor class whose calls capture);
- the hub: :mod:`.hub` (the actor that holds the batches, and the sink a call sends them with);
- kernel side: :mod:`.router` (which cell made each call, its output area, the pump) and
  :mod:`.kernel` (what to export for a call, and what ``get`` waits on).

A ``%%distribute`` cell is one such call (:func:`cell_router`), so it shows what a task shows.
"""

from .capture import muted
from .kernel import (
    cell_router,
    connected,
    disconnect,
    logs,
    prepare,
    prepare_class,
    quiet_startup,
    settle,
    track_actor,
    track_method,
)
from .router import task_ref

__all__ = [
    "cell_router",
    "connected",
    "disconnect",
    "logs",
    "muted",
    "prepare",
    "prepare_class",
    "quiet_startup",
    "settle",
    "task_ref",
    "track_actor",
    "track_method",
]
