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
from ._remote_tb import rebuild
from ._results import Failed, MapResults

__all__ = ["after_cell", "debug", "remote_exception"]


def _failed_of(target: Any) -> Failed:
    if isinstance(target, Failed):
        return target
    if isinstance(target, MapItemError) and isinstance(target.failed, Failed):
        return target.failed
    if isinstance(target, MapResults) and target.failures:
        return target.failures[0]
    raise TypeError(
        f"eugo.hpc.debug takes a Failed value (from map(..., errors='collect')), the "
        f"MapItemError a map raised, or a MapResults with failures, not {type(target).__name__}."
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
    or a ``MapResults`` (its first failure). In the debugger ``where``, ``list`` and ``p name``
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


def after_cell(error: MapItemError) -> None:
    """In a kernel: once this cell has failed with ``error``, let ``%debug`` open on the
    worker's frames (IPython sets ``sys.last_*`` to the kernel's side of the error first)."""
    if "IPython" not in sys.modules or not isinstance(error.failed, Failed):
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or not error.failed.frames:
        return

    def point(result: Any = None) -> None:
        shell.events.unregister("post_run_cell", point)
        if getattr(sys, "last_value", None) is error:
            try:
                _point_last_at(remote_exception(error))
            except Exception:  # noqa: BLE001 - %debug then shows the kernel's side
                pass

    shell.events.register("post_run_cell", point)
