"""A notebook cell run as one task: what it reads and binds, the worker side, the running cell.

- :mod:`.analysis`: which notebook names a cell reads (sent along) and assigns (sent back);
- :mod:`.worker`: the task that runs the cell's code and collects its names (its output goes
  the way every call's does, see :mod:`eugo_jupyter.hpc._output`);
- :mod:`.run`: :func:`submit_cell` and :class:`CellRun`, which owns waiting, showing output
  and binding names.

The wire format (the ``spec`` and ``payload`` dicts) is owned here; the ``%%distribute`` magic
in ``eugo_jupyter.magics`` parses flags and renders errors, nothing else.

>>> analyze("import math\\nr = math.sqrt(a)\\nr").free
('a',)
"""

from ...exceptions import CellError
from .analysis import CellPlan, analyze
from .run import CellRun, Chunks, adopt, submit_cell, unpicklable_inputs
from .worker import notebook_cell, pickle_problem

__all__ = [
    "CellError",
    "CellPlan",
    "CellRun",
    "Chunks",
    "adopt",
    "analyze",
    "notebook_cell",
    "pickle_problem",
    "submit_cell",
    "unpicklable_inputs",
]
