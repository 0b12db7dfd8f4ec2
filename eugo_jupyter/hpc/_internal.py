"""The one entry point other eugo_jupyter packages use to reach hpc's internals.

``magics``, ``widgets``, ``gpu``, ``server`` and ``pandas`` import from here, never from hpc's
``_x`` modules, so hpc can reshape its files without breaking them (a test scans for it). What
is here is internal: it may change between releases; users import ``eugo_jupyter.hpc``.

- the session: :func:`ensure`, :func:`connection`, :func:`held` (the connection, never
  connecting), :func:`probe` (try a cluster without switching), :func:`on_disconnect` (where a
  per-cluster cache resets);
- options: :func:`validate_options` (pure), :func:`resolve_options` (sizes ``gpu_memory``),
  :func:`request_of`, :func:`format_options`;
- the cluster's state and the feasibility verdicts: :func:`describe_cluster` (``cluster()``'s
  view of a given connection), :func:`current_snapshot`, :func:`infeasible_message`,
  :func:`infeasible_reason` (with :func:`needs_sentence` and :func:`missing_everywhere`, its
  parts as data), :func:`fix_for`;
- the batching engine shared by ``map`` and the pandas accessors: :class:`Engine`, :class:`Unit`,
  :class:`Failure`, :func:`fetch`, :func:`slots`, :func:`unit_work`;
- serialization diagnosis: :func:`explain_unpicklable`;
- notebook cells: :mod:`eugo_jupyter.hpc.cells` (``analyze``, ``submit_cell``, ``CellRun``);
- :mod:`hooks <eugo_jupyter._hooks>`: where a profile, the GPU audit, the magics and the GPU
  sizing plug in.

>>> from eugo_jupyter.hpc import _internal
>>> _internal.request_of({"num_gpus": 0.25})
{'CPU': 1.0, 'GPU': 0.25}
"""

from __future__ import annotations

from typing import Any

from .. import _hooks as hooks
from .._feasibility import fix_for, infeasible_reason, missing_everywhere, needs_sentence
from .._raystate import NodeFacts
from . import cells
from ._batching import Engine, Failure, Unit, fetch, slots, unit_work
from ._checks import current_snapshot, explain_unpicklable, infeasible_message
from ._cluster import describe as describe_cluster
from ._options import (
    RAY_TASK_OPTIONS,
    format_options,
    optimize_mode,
    request_of,
    resolve_options,
    validate_options,
)
from ._session import connection, ensure, held, on_disconnect
from ._target import probe

__all__ = [
    "RAY_TASK_OPTIONS",
    "Engine",
    "Failure",
    "NodeFacts",
    "connection",
    "current_snapshot",
    "cells",
    "describe_cluster",
    "ensure",
    "explain_unpicklable",
    "fetch",
    "optimize_mode",
    "optimized",
    "optimized_inputs",
    "fix_for",
    "held",
    "format_options",
    "hooks",
    "infeasible_message",
    "infeasible_reason",
    "missing_everywhere",
    "needs_sentence",
    "on_disconnect",
    "probe",
    "request_of",
    "resolve_options",
    "slots",
    "Unit",
    "unit_work",
    "validate_options",
]


def optimized(fn: Any, mode: Any, options: Any, expected_calls: int | None = None) -> Any:
    """``fn`` run through the optimizer (``optimize=True``), for the accessors and the magics."""
    return hooks.the_optimizer().wrap(fn, mode, options, expected_calls)


def optimized_inputs(inputs: dict[str, Any], mode: Any, options: Any) -> dict[str, Any]:
    """A cell's inputs with the notebook's own plain functions run through the optimizer."""
    import types

    wrap = hooks.the_optimizer().wrap
    return {
        name: wrap(value, mode, options)
        if isinstance(value, types.FunctionType) and value.__module__ == "__main__"
        else value
        for name, value in inputs.items()
    }
