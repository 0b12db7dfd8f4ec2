"""The worker side of a ``%%distribute`` cell: run its code, send the names it bound back.

The cell runs as a call like any other: its output (Python's prints, and what C code and
subprocesses write to the descriptors) goes the way every call's does
(:mod:`eugo_jupyter.hpc._output`), so it shows under the cell while it runs, without Ray's
``(pid=...)`` prefix. Nothing here imports IPython.

>>> spec = {"source": "y = x * 2\\ny", "filename": "<cell>",
...         "has_value": True, "assigned": ("y",)}
>>> value, payload = notebook_cell(spec, {"x": 21})
>>> value, payload["bound"]
(42, {'y': 42})
"""

from __future__ import annotations

import ast
import builtins
import traceback
from typing import Any

from ...exceptions import CellError
from .._output.capture import current
from .._serialized import pickle_problem

__all__ = ["notebook_cell", "pickle_problem"]


def _collect(ns: dict[str, Any], plan: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    sink = current.get()  # whether the cell printed: if not, the kernel need not ask the hub
    printed = sink is None or getattr(sink, "started", True)
    bound, unsent = {}, {}
    for name in plan["assigned"]:
        if name in ns:
            problem = pickle_problem(ns[name])
            if problem is None:
                bound[name] = ns[name]
            else:
                unsent[name] = f"{type(ns[name]).__name__}; {problem}"
    deleted = [name for name in inputs if name not in ns]
    return {"bound": bound, "unsent": unsent, "deleted": deleted, "printed": printed}


def _cell_frames(tb: Any, filename: str) -> list[tuple[str, int, str]]:
    frames = [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(tb)]
    for index, (name, _, _) in enumerate(frames):
        if name == filename:
            return frames[index:]
    return frames


def notebook_cell(spec: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Run one cell's code on a worker: returns (value of the last expression, payload).

    ``spec`` holds the padded source, its filename, the names to send back and ``has_value``;
    ``inputs`` the free variables taken from the notebook.
    """
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    ns.update(inputs)
    value = None
    try:
        tree = ast.parse(spec["source"], spec["filename"], "exec")
        last = tree.body.pop() if spec["has_value"] else None
        exec(compile(tree, spec["filename"], "exec"), ns)
        if last is not None:
            expression = ast.Expression(last.value)  # type: ignore[attr-defined]
            value = eval(compile(expression, spec["filename"], "eval"), ns)
    except Exception as exc:  # noqa: BLE001 - the user's error, sent back as a CellError
        frames = _cell_frames(exc.__traceback__, spec["filename"])
        text = (
            "Traceback (most recent call last):\n"
            + "".join(
                traceback.format_list(
                    traceback.StackSummary.from_list([(f, n, q, None) for f, n, q in frames])
                )
            )
            + "".join(traceback.format_exception_only(type(exc), exc))
        )
        info = {
            "frames": frames,
            "type": type(exc).__name__,
            "message": str(exc),
            "exception": None if pickle_problem(exc) else exc.with_traceback(None),
            "text": text,
            **_collect(ns, spec, inputs),
        }
        raise CellError(info) from None
    payload = _collect(ns, spec, inputs)
    if value is not None:
        problem = pickle_problem(value)
        if problem is not None:
            payload["value_problem"] = f"{type(value).__name__}; {problem}"
            value = None
    return value, payload
