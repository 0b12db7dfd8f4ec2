"""Automatic optimizations: numba compiles what pays, verified against Python, explained.

- ``optimize=`` on ``@distribute``, ``.options(...)``, ``eugo.hpc.map``, the pandas accessors
  and ``%%distribute --optimize`` ships :class:`Optimized` instead of the plain function.
- :func:`set_optimize` (and ``%eugo optimize on|off``) sets it for the whole notebook.
- :func:`optimize` tries it here on one sample call and returns an :class:`OptimizationReport`.

One responsibility per module: ``_candidates`` (what is compiled, the cache key), ``_compile``
(numba, the ladder), ``_verify`` (copies, comparison), ``_decide`` (break-even, per cost),
``_explain`` (how to help it), ``_differs`` (why an answer differs), ``_runtime`` (what a call
site ships), ``_entry`` (the steps), ``_verifying`` (both versions compared), ``_glue`` (the
settled dispatcher), ``_record`` (state, settings, counts), ``_numba_private`` (numba's private
API, nowhere else), ``_state`` (the per-process cache), ``_threads`` (threads follow
``num_cpus``), ``_report`` (the report), ``_profiled`` (the profile's section), ``_prewarm``
(numba's start before and beside the calls).
"""

from __future__ import annotations

from typing import Any

from ... import _hooks
from ._report import OptimizationReport
from ._runtime import VERIFY_CALLS, Optimized, Settings, find_entry

__all__ = ["OptimizationReport", "Optimized", "optimize", "set_optimize"]


def set_optimize(value: bool | str) -> None:
    """Optimize every call of this notebook that does not say otherwise (``%eugo optimize on``).

    ``value`` is one of False, True, "cpu" (a call's own ``optimize=`` wins).

    >>> set_optimize(True); set_optimize(False)
    """
    from .._options import check_optimize

    checked = check_optimize(value)
    if checked == "gpu":
        from ...exceptions import OptionsError

        raise OptionsError(
            'set_optimize("gpu") is not allowed: "gpu" needs a call that holds a GPU; use '
            'optimize="gpu" with num_gpus= on that call, or set_optimize(True).'
        )
    _hooks.optimize_default = checked
    if checked:  # the workers start numba now, and on each cluster connected later
        from .. import _session
        from . import _prewarm

        _session.on_connect(_prewarm.on_connect)
        _prewarm.fire()


def optimize(fn: Any, *args: Any, **kwargs: Any) -> OptimizationReport:
    """Try the optimization here, on one sample call: compile, verify, time; submits nothing.

    The function runs on copies of the arguments (yours are left as they are).

    >>> import numpy as np
    >>> def total(a):
    ...     s = 0.0
    ...     for v in a:
    ...         s += v
    ...     return s
    >>> report = optimize(total, np.arange(1000.0))     # doctest: +SKIP
    >>> report.compiled, report.result                  # doctest: +SKIP
    (True, 499500.0)
    """
    from .. import _distribute
    from . import _threads, _verify

    num_cpus = None
    if isinstance(fn, _distribute.BoundCall):
        num_cpus = fn.options_dict.get("num_cpus")
        fn = fn._function
    if isinstance(fn, _distribute.DistributedFunction):
        num_cpus = num_cpus or fn._defaults.get("num_cpus")
        fn = fn._fn
    if isinstance(fn, Optimized):
        fn = fn.fn
    entry = find_entry(fn, Settings(num_cpus=num_cpus, force=True), cached=False)
    result = None
    for i in range(VERIFY_CALLS + 1):
        out = entry.call(_verify.copy_args(args), _verify.copy_args(kwargs))
        if i == 0:
            result = out
        if entry.state == "python":
            break
    return OptimizationReport(entry, result, _threads.threads_for(num_cpus))
