"""The one module of ``eugo_jupyter.pandas`` that reaches into ``eugo_jupyter.hpc``.

Everything the accessors need from the distributed core comes through hpc's documented internal
entry point (:mod:`eugo_jupyter.hpc._internal`), imported here once.
"""

from __future__ import annotations

from ..hpc._internal import (
    RAY_TASK_OPTIONS,
    Engine,
    Failure,
    Unit,
    ensure,
    fetch,
    optimize_mode,
    optimized,
    request_of,
    resolve_options,
    slots,
    unit_work,
)

__all__ = [
    "Engine",
    "Failure",
    "RAY_TASK_OPTIONS",
    "Unit",
    "ensure",
    "fetch",
    "optimize_mode",
    "optimized",
    "request_of",
    "slots",
    "resolve_options",
    "unit_work",
]
