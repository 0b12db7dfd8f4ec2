"""A notebook cell run as one task: what it reads and binds, the worker side, the running cell.

- :mod:`.analysis`: which notebook names a cell reads (sent along) and assigns (sent back);
- :mod:`.worker`: the task that runs the cell's code, streams its prints, collects its names;
- :mod:`.run`: :func:`submit_cell` and :class:`CellRun`, which owns waiting, streaming output
  and binding names.

The wire format (the ``spec`` and ``payload`` dicts) is owned here; the ``%%distribute`` magic
in ``eugo_jupyter.magics`` parses flags and renders errors, nothing else.

>>> analyze("import math\\nr = math.sqrt(a)\\nr").free
('a',)
"""

from ...exceptions import CellError
from .analysis import CellPlan, analyze
from .run import POLL, CellRun, adopt, submit_cell, unpicklable_inputs
from .worker import FLUSH_INTERVAL, Chunks, OutputHub, notebook_cell, pickle_problem

__all__ = [
    "FLUSH_INTERVAL",
    "POLL",
    "CellError",
    "CellPlan",
    "CellRun",
    "Chunks",
    "OutputHub",
    "adopt",
    "analyze",
    "notebook_cell",
    "pickle_problem",
    "submit_cell",
    "unpicklable_inputs",
]
