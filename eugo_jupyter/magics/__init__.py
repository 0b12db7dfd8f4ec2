"""The notebook magics: ``%%distribute`` (a cell as one task) and ``%eugo`` (the cluster).

- :mod:`.flags`: the shared flag groups and their parsing into usage errors;
- :mod:`.distribute`: ``%%distribute``, which parses and delegates to
  :class:`eugo_jupyter.hpc.cells.CellRun`;
- :mod:`.eugo`: ``%eugo status | connect | options | check``;
- :mod:`.tracebacks`: a cell's error shown at the cell's own line numbers.

>>> %load_ext eugo_jupyter                                   # doctest: +SKIP
>>> %%distribute --num-cpus 2                                # doctest: +SKIP
... total = sum(x * x for x in data)
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..hpc._internal import hooks
from .distribute import EugoMagics, syntax_transformer
from .eugo import EugoLineMagics

__all__ = ["EugoLineMagics", "EugoMagics", "load"]


def load(shell: Any, package: ModuleType) -> None:
    """Register the magics once per shell and put ``eugo`` (``package``) in the namespace.

    Idempotent. ``package`` is ``eugo_jupyter`` itself, handed over by its
    ``load_ipython_extension`` so that this module never imports the package root back.
    """
    shell.push({"eugo": package})
    if "EugoMagics" in shell.magics_manager.registry:
        return
    magics = EugoMagics(shell)
    shell.register_magics(magics)
    shell.register_magics(EugoLineMagics(shell))
    shell.input_transformers_cleanup.append(syntax_transformer(shell))
    shell.events.register("pre_run_cell", magics.pre_run_cell)
    hooks.on_get(magics.after_get)
