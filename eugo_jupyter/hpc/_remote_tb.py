"""A worker's traceback that a notebook can debug: the frames that raised, with their locals.

A worker captures, for each frame of the user's code in the traceback (ours are left out),
its file, line, function name, the source lines around it and its locals: each value pickled
when it travels (up to :data:`VALUE_BYTES`), else its repr cut to 200 characters. The kernel
rebuilds those frames as real Python frames (code compiled under the remote file name and
line, run with the frame's locals as its namespace, the way template engines rewrite their
tracebacks), so ``pdb``'s ``where``, ``list`` and ``p name`` show the worker's frames and
values. The source the worker read goes into ``linecache`` for a file the kernel cannot read.

>>> try:
...     (lambda z: 1 / z)(0)
... except ZeroDivisionError as exc:
...     frames = capture(exc)
>>> tb = rebuild(frames)
>>> while tb.tb_next is not None:
...     tb = tb.tb_next
>>> tb.tb_frame.f_locals["z"], tb.tb_lineno == frames[-1]["line"]
(0, True)
"""

from __future__ import annotations

import linecache
import os
import pickle
import reprlib
import types
from typing import Any

__all__ = ["FRAMES_ATTRIBUTE", "Shown", "capture", "keep_frames", "rebuild"]

#: Where a plain call's exception carries its frames back (pickled with the exception).
FRAMES_ATTRIBUTE = "_eugo_frames"

#: The most pickled bytes one local value may take to travel as itself.
VALUE_BYTES = 16 * 1024
#: The innermost frames kept, and the source lines kept either side of each frame's line.
MAX_FRAMES = 12
WINDOW = 40

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 200


class Shown:
    """A local that could not travel as itself: its repr, shown as the value."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _values(names: dict[str, Any]) -> tuple[dict[str, str], bytes | None]:
    from ray import cloudpickle

    kept: dict[str, Any] = {}
    reprs: dict[str, str] = {}
    for name, value in names.items():
        try:
            reprs[name] = _repr.repr(value)
        except Exception:  # noqa: BLE001 - a broken __repr__ still names the value
            reprs[name] = f"<{type(value).__name__}>"
        try:
            if len(cloudpickle.dumps(value)) <= VALUE_BYTES:
                kept[name] = value
                continue
        except Exception:  # noqa: BLE001 - shown by its repr instead
            pass
        kept[name] = Shown(reprs[name])
    try:
        return reprs, cloudpickle.dumps(kept)
    except Exception:  # noqa: BLE001 - the reprs alone then
        return reprs, None


def capture(error: BaseException) -> list[dict[str, Any]]:
    """The frames of ``error``'s traceback outside this package, outermost first."""
    entries = []
    tb = error.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            entries.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    frames = []
    for frame, lineno in entries[-MAX_FRAMES:]:
        code = frame.f_code
        lines = linecache.getlines(code.co_filename, frame.f_globals)
        first = max(0, lineno - 1 - WINDOW)
        reprs, values = _values(dict(frame.f_locals))
        frames.append(
            {
                "file": code.co_filename,
                "line": lineno,
                "name": code.co_name,
                "first": first,
                "source": lines[first : lineno + WINDOW],
                "reprs": reprs,
                "values": values,
            }
        )
    return frames


def keep_frames(error: BaseException) -> None:
    """Worker side of a plain call: put the raising frames on the exception itself, which
    travels back in the task's error (an exception without a ``__dict__`` keeps none)."""
    try:
        setattr(error, FRAMES_ATTRIBUTE, capture(error))
    except Exception:  # noqa: BLE001 - the error itself must still travel
        pass


class _Raised(Exception):
    pass


def _namespace(frame: dict[str, Any]) -> dict[str, Any]:
    if frame["values"] is not None:
        try:
            return dict(pickle.loads(frame["values"]))
        except Exception:  # noqa: BLE001 - a value's class missing here: the reprs
            pass
    return {name: Shown(text) for name, text in frame["reprs"].items()}


def _install_source(frame: dict[str, Any]) -> None:
    path = frame["file"]
    if not frame["source"] or linecache.getlines(path):
        return  # the kernel reads this file itself (a shared disk, a notebook cell)
    lines = ["\n"] * frame["first"] + list(frame["source"])
    linecache.cache[path] = (sum(map(len, lines)), None, lines, path)


def rebuild(frames: list[dict[str, Any]]) -> types.TracebackType | None:
    """Real frames standing for the captured ones, linked as a traceback (outermost first)."""
    tb: types.TracebackType | None = None
    for frame in reversed(frames):
        _install_source(frame)
        namespace = _namespace(frame)
        marker = "__eugo_remote_raise__"
        namespace[marker] = _Raised()
        code = compile("\n" * (frame["line"] - 1) + f"raise {marker}", frame["file"], "exec")
        code = code.replace(co_name=frame["name"])
        try:
            exec(code, namespace)
        except _Raised as raised:
            made = raised.__traceback__.tb_next  # type: ignore[union-attr]
        finally:
            namespace.pop(marker, None)
        assert made is not None
        tb = types.TracebackType(tb, made.tb_frame, made.tb_lasti, made.tb_lineno)
    return tb
