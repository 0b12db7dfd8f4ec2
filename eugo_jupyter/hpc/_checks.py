"""Checks made at the call site: can any node run this request, and can the arguments travel.

The feasibility check reads the cluster at most about once a second and caches its verdict per
request shape, so a loop of 10,000 calls pays for it once. The serializability diagnosis runs
only after Ray has refused to pickle something, to name the culprit.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from .._feasibility import fix_for, infeasible_reason
from .._raystate import Snapshot, snapshot
from ..exceptions import InfeasibleRequestWarning, SerializationError
from . import _session
from ._serialized import pickle_problem
from ._submissions import RequestKey

__all__ = ["current_snapshot", "explain_unpicklable", "infeasible_message", "warn_if_infeasible"]

_MAX_AGE = 1.0
_snap: Snapshot | None = None
_snap_at = 0.0
_verdicts: dict[RequestKey, str] = {}
_unavailable_until = 0.0


@_session.on_disconnect
def _forget_cluster(reason: str) -> None:
    """The cluster read is another one's after a disconnect: read the next one afresh."""
    global _snap, _snap_at, _unavailable_until
    _snap, _snap_at, _unavailable_until = None, 0.0, 0.0
    _verdicts.clear()


def current_snapshot(
    max_age: float = _MAX_AGE, asked: bool = False, address: str | None = None
) -> Snapshot | None:
    """The cluster's nodes and demands, at most ``max_age`` seconds old; None if unreadable.
    ``address``: that cluster's GCS (default: the connection's, connecting first if needed).

    A ``ray://`` client cannot reach the GCS: then there is no snapshot and no check. After a
    failed read the checks of calls leave the cluster alone for 30 s; ``asked=True`` (the user
    asked to see the cluster) reads it anyway.
    """
    global _snap, _snap_at, _unavailable_until
    now = time.monotonic()
    if _snap is not None and now - _snap_at < max_age:
        return _snap
    if not asked and now < _unavailable_until:
        return None
    try:
        _snap = snapshot(address or _session.connection().address)
    except Exception:  # noqa: BLE001 - a check must never break a call
        _snap, _unavailable_until = None, now + 30
    _snap_at = now
    _verdicts.clear()
    return _snap


def infeasible_message(request: Mapping[str, float], snap: Snapshot) -> str | None:
    """Why no node can run ``request`` and what to do, else None: "needs 1 GPU; ... Fix: ..."."""
    reason = infeasible_reason(request, snap.alive_nodes)
    if reason is None:
        return None
    return f"{reason}. Fix: {fix_for(request, snap.alive_nodes)}."


def warn_if_infeasible(
    name: str, key: RequestKey, request: Mapping[str, float], stacklevel: int
) -> str | None:
    """Warn (once per call site) when no alive node can run ``request``; returns the diagnosis."""
    if _snap is not None and key in _verdicts and time.monotonic() - _snap_at < _MAX_AGE:
        verdict = _verdicts[key]
    else:
        snap = current_snapshot()
        if snap is None:
            return None
        verdict = _verdicts.setdefault(key, infeasible_message(request, snap) or "")
    if verdict:
        warnings.warn(
            f"{name} {verdict} The call was submitted and will wait until a node that can run "
            "it joins (eugo.hpc.waiting() lists what waits).",
            InfeasibleRequestWarning,
            stacklevel=stacklevel + 1,
        )
    return verdict or None


def _captured(fn: Callable[..., Any]) -> dict[str, Any]:
    """Globals and closure variables a function reads (what cloudpickle ships with it)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    names: dict[str, Any] = {}
    fn_globals = getattr(fn, "__globals__", {})
    for name in code.co_names:
        if name in fn_globals and not inspect.ismodule(fn_globals[name]):
            names[name] = fn_globals[name]
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            names[name] = cell.cell_contents
        except ValueError:
            continue
    return names


def explain_unpicklable(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    error: BaseException | str,
) -> SerializationError | None:
    """Name the argument or captured variable that cannot be pickled, or None if none is found."""
    label = getattr(fn, "__qualname__", repr(fn))
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {**{f"#{i}": a for i, a in enumerate(args)}, **kwargs}
    fix = (
        "Nothing was submitted. Fix: create that object inside the function, or pass what it is "
        "made from (a path, a config dict) and build it on the worker."
    )
    for name, value in bound.items():
        problem = pickle_problem(value)
        if problem:
            return SerializationError(
                f"Argument {name!r} of {label} ({type(value).__name__}) cannot be sent to a "
                f"worker: {problem}. {fix}"
            )
    for name, value in _captured(fn).items():
        problem = pickle_problem(value)
        if problem:
            return SerializationError(
                f"{label} uses the variable {name!r} ({type(value).__name__}), which cannot be "
                f"sent to a worker: {problem}. {fix}"
            )
    return None
