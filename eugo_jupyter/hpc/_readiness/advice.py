"""``readiness()``'s compile advice: would compiling pay more than distributing?

The sampled item runs here through :func:`~eugo_jupyter.hpc.optimize.optimize`; the measured
ratio of compiled to plain time scales the per-item times the readiness measured on the
workers, and the same prediction (:func:`.model.predict`) gives the run with
``optimize=True``, compile seconds included.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from .model import Check, Measurements, Prediction, fmt_s, predict

__all__ = ["NAME", "compile_check"]

NAME = "compiling"


def compile_check(fn: Any, item: Any, shared: dict[str, Any], m: Measurements,
                  p: Prediction, mode: Any) -> Check | None:  # fmt: skip
    """A checklist line saying whether ``optimize=True`` would pay, with the numbers."""
    from ..optimize import _prewarm, optimize

    if _prewarm.import_numba() is None:
        return Check(
            NAME, None, "numba is not installed: compiling was not tried", "pip install numba"
        )
    try:
        report = optimize(fn, item, **shared)
    except Exception:  # noqa: BLE001 - the advice is optional; the function's own errors show elsewhere
        return None
    if not report.compiled or not report.plain_s or not report.compiled_s:
        first = report.help[0] if report.help else None
        fix = f"line {first['line']}: {first['fix']}" if first else ""
        return Check(NAME, None, f"not compiled: {report.reason}", fix)
    ratio = report.compiled_s / report.plain_s
    per_item = statistics.median(m.per_item_s)
    faster = dataclasses.replace(
        m,
        per_item_s=[t * ratio for t in m.per_item_s],
        sustained_per_item_s=(m.sustained_per_item_s or per_item) * ratio,
    )
    optimized = predict(faster).parallel_s + report.compile_s
    serial_compiled = m.items * per_item * ratio + report.compile_s
    detail = (
        f"compiled, an item takes {fmt_s(per_item * ratio)} instead of {fmt_s(per_item)}: with "
        f"optimize=True the run is predicted at {fmt_s(optimized)} instead of "
        f"{fmt_s(p.parallel_s)}"
    )
    if serial_compiled < p.parallel_s:
        detail += (
            f" (compiled on one core alone: {fmt_s(serial_compiled)}, faster than distributing)"
        )
    fix = "" if mode else "eugo.hpc.map(fn, items, optimize=True)"
    return Check(NAME, None, detail, fix if optimized < p.parallel_s else "")
