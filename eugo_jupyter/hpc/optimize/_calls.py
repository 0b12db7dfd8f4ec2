"""Where a task call hands over: its Ray function.

Tasks: the driver works out the function's cache key on each call (its code, its helpers' code,
the values of the globals they read), so a helper or a global changed in a later cell reaches
the workers with the next call; one Ray function per key is kept, so an unchanged function is
exported once. (A map's item function is wrapped once per map, by the optimizer's ``wrap``, with
the number of items each worker will run, which the break-even uses.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from . import _candidates
from ._runtime import Optimized, Settings

__all__ = ["for_task"]

#: (function id, key) -> (the task function, {options key: Ray handle}); the newest per function.
_tasks: dict[int, tuple[str, Callable[..., Any], dict[str, Any]]] = {}


def _task_function(optimized: Optimized) -> Callable[..., Any]:
    fn = optimized.fn

    @functools.wraps(fn)  # Ray and the profile name the task after the user's function
    def task(*args: Any, **kwargs: Any) -> Any:
        return optimized(*args, **kwargs)

    return task


def for_task(
    fn: Any, mode: Any, options: Mapping[str, Any], label: str
) -> tuple[Callable[..., Any], Any]:
    """``(function to submit, its Ray handle with options)`` for an optimized task call; in a
    notebook its prints go under the calling cell, named ``label``, as a plain call's do."""
    import ray

    from .. import _output

    cands = _candidates.find(fn)
    key = cands.key() if cands is not None else ""
    held = _tasks.get(id(fn))
    if held is None or held[0] != key:
        optimized = Optimized(fn, Settings.of(mode, options))
        held = _tasks[id(fn)] = (key, _task_function(optimized), {})
    _, task, remotes = held
    options_key = repr(sorted(options.items()))
    remote = remotes.get(options_key)
    if remote is None:
        base = ray.remote(_output.prepare(task, label))
        remote = remotes[options_key] = base.options(**options) if options else base
    return task, remote
