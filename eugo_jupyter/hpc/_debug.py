"""``eugo.hpc.debug``: a post-mortem in the notebook on the frames that raised in a worker.

The worker sent the raising frames with their locals (:mod:`._remote_tb`); here they become
real frames again and ``pdb`` (IPython's in a kernel) opens on them: ``where``, ``list``,
``p name``, ``up``/``down`` show the worker's code and values. A failed ``map`` also makes
``%debug`` in the next cell open there: after the cell, ``sys.last_value`` and
``sys.last_traceback`` are pointed at the item's exception and the worker's frames.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ..exceptions import MapItemError
from ._remote_tb import FRAMES_ATTRIBUTE, rebuild
from ._results import Failed, MapResults

__all__ = ["after_cell", "debug", "remote_exception"]


def _call_error(target: Any) -> BaseException | None:
    """The error a plain call's future holds, or ``target`` itself when it is an error."""
    if isinstance(target, BaseException):
        return target
    if not hasattr(target, "binary"):
        return None
    import ray

    try:
        ray.get(target)
    except Exception as exc:  # noqa: BLE001 - the error is what we are after
        return exc
    raise ValueError(f"{target!r} finished without an error: there is nothing to debug.")


def _from_call(error: BaseException) -> Failed | None:
    """A plain call's error as a Failed value, when its frames travelled with it."""
    original = getattr(error, "cause", None) or error
    frames = getattr(original, FRAMES_ATTRIBUTE, None)
    if not frames:
        return None
    text = f"{type(original).__name__}: {original}"
    failed = Failed(0, "", original, text, None, 1, frames)
    failed.kind, failed.text = type(original).__name__, str(original)
    return failed


def _failed_of(target: Any) -> Failed:
    if isinstance(target, Failed):
        return target
    if isinstance(target, MapItemError) and isinstance(target.failed, Failed):
        return target.failed
    if isinstance(target, MapResults) and target.failures:
        return target.failures[0]
    error = _call_error(target)
    failed = _from_call(error) if error is not None else None
    if failed is not None:
        return failed
    raise TypeError(
        "eugo.hpc.debug takes a Failed value (from map(..., errors='collect')), the "
        "MapItemError a map raised, a MapResults with failures, or a failed call's future (its "
        "frames travel back when the call ran from a notebook), not "
        f"{type(target).__name__}."
    )


def remote_exception(target: Any) -> BaseException:
    """The item's exception with the worker's frames as its ``__traceback__``."""
    failed = _failed_of(target)
    error = failed.error
    if error is None:
        error = RuntimeError(f"{failed.kind}: {failed.text}")
    tb = rebuild(failed.frames)
    if tb is None:
        raise ValueError(
            f"{failed!r} carries no frames to debug (it failed outside the function, e.g. "
            "its worker was lost); its .traceback says what happened."
        )
    return error.with_traceback(tb)


def debug(target: Any) -> None:
    """Open a post-mortem debugger on a failed item's worker frames.

    ``target`` is a :class:`~eugo_jupyter.hpc.Failed` value, the ``MapItemError`` a map raised,
    a ``MapResults`` (its first failure), or a failed call's future (or the error its ``get``
    raised) for a call made from a notebook. In the debugger ``where``, ``list`` and ``p name``
    show the worker's frames and values.

    >>> out = eugo.hpc.map(parse, tiles, errors="collect")   # doctest: +SKIP
    >>> eugo.hpc.debug(out.failures[0])                       # doctest: +SKIP
    """
    error = remote_exception(target)
    tb = error.__traceback__
    assert tb is not None
    if "IPython" in sys.modules:
        from IPython import get_ipython

        if get_ipython() is not None:
            from IPython.core.debugger import Pdb

            pdb = Pdb()
            pdb.reset()
            pdb.interaction(None, tb)
            return
    import pdb as plain_pdb

    plain_pdb.post_mortem(tb)


def _point_last_at(error: BaseException) -> None:
    tb = error.__traceback__
    assert tb is not None
    # IPython's %debug skips the traceback's first entry (the cell's own frame): put one there.
    here = sys._getframe()
    sys.last_type, sys.last_value = type(error), error
    sys.last_traceback = types.TracebackType(tb, here, here.f_lasti, here.f_lineno)
    if sys.version_info >= (3, 12):
        sys.last_exc = error


def after_cell(error: BaseException) -> None:
    """In a kernel: once this cell has failed with ``error`` (a map's ``MapItemError``, a
    call's error from ``get``), let ``%debug`` open on the worker's frames (IPython points
    ``sys.last_*`` at the kernel's side of the error first)."""
    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    try:
        failed = _failed_of(error)
    except (TypeError, ValueError):
        return  # no frames travelled with it: %debug shows the kernel's side
    if not failed.frames:
        return

    def point(result: Any = None) -> None:
        shell.events.unregister("post_run_cell", point)
        if getattr(sys, "last_value", None) is error:
            try:
                _point_last_at(remote_exception(failed))
            except Exception:  # noqa: BLE001 - %debug then shows the kernel's side
                pass

    shell.events.register("post_run_cell", point)
