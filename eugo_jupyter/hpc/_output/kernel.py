"""The kernel's entry points for output: what to export for a call, and what ``get`` waits on.

In a notebook kernel every task's function (and actor class) is exported wrapped (:func:`prepare`,
:func:`prepare_class`, see :mod:`.wrap`) and its lines go under the cell that made the call
(:mod:`.router`). In any IPython shell a ``%%distribute`` cell is such a call too
(:func:`cell_router`): its lines are the cell's. In a plain Python script nothing is wrapped and
Ray prints as it always does (``EUGO_OUTPUT=ray`` asks for that in a notebook too).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from .router import Router, task_ref

__all__ = [
    "cell_router",
    "connected",
    "disconnect",
    "logs",
    "prepare",
    "prepare_class",
    "quiet_startup",
    "router",
    "settle",
    "track_actor",
    "track_method",
]

_INTERNAL = "eugo_jupyter."
#: The function a ``%%distribute`` cell runs: routed in any IPython shell.
CELL = "notebook_cell"
#: eugo's own functions that run the user's code (their lines are the user's).
_RUNS_USER_CODE = ("_execute", CELL)

router: Router | None = None


def disconnect() -> None:
    """Stop collecting from the current cluster (before ``ray.shutdown``)."""
    if router is not None:
        router.disconnect()


def connected() -> None:
    """Just connected (again): functions exported before name the hub, so it is made on this
    cluster before any of them runs here."""
    if router is not None and router.exported:
        router.ensure_hub()


def _router(for_cell: bool = False) -> Router | None:
    """The kernel's router, made on first use: in a notebook kernel it routes every call; asked
    for by a cell elsewhere, only cells. None where neither."""
    global router
    if router is None:
        from .._progress import in_notebook

        tasks = os.environ.get("EUGO_OUTPUT", "cell") != "ray" and in_notebook()
        if not (tasks or for_cell):
            return None
        from IPython import get_ipython

        router = Router(get_ipython(), tasks)
        if tasks:
            from .. import _submissions

            _submissions.on_remember = router.track
    return router


def cell_router() -> Router:
    """The router a ``%%distribute`` cell's lines go through (made here if need be)."""
    active = _router(for_cell=True)
    assert active is not None
    return active


def prepare(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
    """What to export for ``fn``: in a notebook, ``fn`` with its prints sent to the hub."""
    active = _router()
    if active is None or not (active.tasks or label == CELL):
        return fn
    if getattr(fn, "__module__", "").startswith(_INTERNAL) and not label.startswith(
        _RUNS_USER_CODE
    ):
        active.skip.add(label)
        return fn
    active.ensure_hub()
    from .wrap import wrap

    return wrap(fn, active.hub_name)


class _NoTokenNotice:
    """Drops Ray's start-up notice that token authentication is on (nothing to act on)."""

    def filter(self, record: Any) -> bool:
        return not str(record.getMessage()).startswith("Token authentication is enabled")


def quiet_startup() -> None:
    """In a notebook, keep Ray's start-up lines a user cannot act on out of the first cell."""
    import logging

    from ... import _raystate

    active = _router()
    if active is None or not active.tasks:
        return
    logger = logging.getLogger(_raystate.TOKEN_NOTICE_LOGGER)
    if not any(isinstance(f, _NoTokenNotice) for f in logger.filters):
        logger.addFilter(_NoTokenNotice())
    if "RAY_DEDUP_LOGS" not in os.environ:
        # What still comes through Ray's own stream (lines past the routed ones' caps, a
        # script's calls) is not folded either: a notebook shows every line.
        _raystate.keep_every_log_line()


def prepare_class(cls: type, label: str) -> type:
    """What to export for an actor class: in a notebook, its methods' prints go to the hub."""
    active = _router()
    if active is None or not active.tasks or cls.__module__.startswith(_INTERNAL):
        return cls
    active.ensure_hub()
    active.actors.add(label)
    from .wrap import wrap_class

    return wrap_class(cls, active.hub_name)


def track_method(ref: Any, label: str) -> None:
    """An actor method call was submitted (its class was prepared): its lines go under this cell."""
    active = router
    if active is not None and label.split(".")[0] in active.actors:
        ref = task_ref(ref)
        if hasattr(ref, "task_id"):
            active.track(ref, label)


def track_actor(handle: Any, label: str) -> None:
    """An actor of a prepared class was created: its ``__init__``'s lines go under this cell."""
    active = router
    if active is not None and label in active.actors:
        from ..._raystate import actor_creation_task

        active.track_task(actor_creation_task(handle), label)


def settle(refs: Iterable[Any]) -> None:
    """Before ``get`` returns: the lines these calls printed are shown (a quiet call, or a
    process without a notebook, costs nothing beyond a lookup)."""
    active = router
    if active is None or not active.calls:
        return
    calls = active.calls
    for ref in refs:
        try:
            call = calls.get(ref.task_id().hex())
        except AttributeError:
            continue
        if call is not None and not call.finished:
            try:
                active.pump()
            except Exception:  # noqa: BLE001 - a lost hub loses output, never the value
                pass
            return


def logs(future: Any) -> str:
    """Every line a call printed, as text (its stdout and stderr, in the order printed).

    >>> fut = chatty(3)                 # doctest: +SKIP
    >>> print(eugo.hpc.logs(fut))       # doctest: +SKIP
    """
    active = router
    if active is not None:
        try:
            active.pump()
        except Exception:  # noqa: BLE001 - what was collected is still the answer
            pass
        text = active.text_of(future)
        if text is not None:
            return text
    # Not a call this kernel collected (a script, or let go of): Ray's log files have it.
    try:
        from ray.util.state import get_log

        task_id = task_ref(future).task_id().hex()
        return "".join(line + "\n" for line in get_log(task_id=task_id))
    except Exception:  # noqa: BLE001 - no dashboard, or the task printed nothing
        return ""
