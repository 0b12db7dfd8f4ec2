"""How a cell's error is shown: the cell's own line numbers, never the magic's frames.

A ``%%distribute`` cell's exception happened on a worker; what came back is the exception (when
it pickles) and its frames as ``(file, line, function)``. :func:`fake_traceback` rebuilds a real
traceback over those places, so IPython prints the notebook cell's own source lines.

>>> tb = fake_traceback([("<cell>", 3, "<module>")])
>>> tb.tb_lineno, tb.tb_frame.f_code.co_filename
(3, '<cell>')
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ..exceptions import RemoteCellError

__all__ = ["fake_traceback", "raise_cell_error", "short"]


class _Marker(Exception):
    pass


def short(exc: BaseException) -> BaseException:
    """Show ``Type: message`` only: the frames would be the magic's, never the user's."""
    try:
        exc._render_traceback_ = lambda: [f"{type(exc).__name__}: {exc}"]  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return exc


def fake_traceback(frames: list[tuple[str, int, str]]) -> types.TracebackType | None:
    """A traceback whose frames point at the given (file, line, function) places.

    Each frame runs a one-line ``raise`` compiled at that line under that file name, so IPython
    prints the notebook cell's own source for frames in cells.
    """
    tbs: list[types.TracebackType] = []
    for filename, lineno, name in frames:
        code = compile("\n" * max(lineno - 1, 0) + "raise __eugo_marker__", filename, "exec")
        try:
            code = code.replace(co_name=name)
        except (TypeError, ValueError):
            pass
        try:
            exec(code, {"__eugo_marker__": _Marker, "__name__": "__main__"})
        except _Marker:
            tb = sys.exc_info()[2]
            if tb is not None and tb.tb_next is not None:
                tbs.append(tb.tb_next)
    for current, following in zip(tbs, tbs[1:], strict=False):  # pairs of neighbours
        current.tb_next = following
    if tbs:
        tbs[-1].tb_next = None
    return tbs[0] if tbs else None


def raise_cell_error(shell: Any, info: dict[str, Any]) -> None:
    """Raise the cell's own exception (or a ``RemoteCellError`` with its text) at its lines."""
    __tracebackhide__ = True
    exc = info.get("exception")
    if not isinstance(exc, BaseException):
        exc = RemoteCellError(f"{info.get('type')}: {info.get('message')}")
    tb = fake_traceback([(str(f[0]), int(f[1]), str(f[2])) for f in info.get("frames", [])])
    exc = exc.with_traceback(tb)
    try:
        stb = shell.InteractiveTB.structured_traceback(type(exc), exc, tb, tb_offset=0)
        exc._render_traceback_ = lambda: stb  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - fall back to IPython's own rendering
        pass
    raise exc
