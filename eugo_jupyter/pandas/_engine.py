"""The one module of ``eugo_jupyter.pandas`` that reaches into ``eugo_jupyter.hpc``.

Everything the accessors need from the distributed core is imported here, so that pointing the
package at hpc's documented internal entry point is a change to this file only.
"""

from __future__ import annotations

from ..hpc._batching import Engine, Failure, Unit, fetch, slots, unit_work
from ..hpc._options import RAY_TASK_OPTIONS, request_of, validate_options
from ..hpc._session import ensure

__all__ = [
    "Engine",
    "Failure",
    "RAY_TASK_OPTIONS",
    "Unit",
    "ensure",
    "fetch",
    "request_of",
    "slots",
    "unit_work",
    "validate_options",
]
