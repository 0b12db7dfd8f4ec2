"""What this process submitted: each future's function name and resource request.

Ray's futures do not say what they asked for; diagnosing a ``get`` timeout or naming who waits in
``waiting()`` needs it. The record is bounded (oldest entries are dropped) and costs one dict
insert per call.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RequestKey", "functions_by_request", "lookup", "remember", "request_key"]

RequestKey = tuple[tuple[str, float], ...]

_LIMIT = 200_000
#: Told of every call as it is submitted (the notebook's output router, see _output).
on_remember: Callable[[Any, str], object] | None = None
_by_ref: OrderedDict[bytes, tuple[str, RequestKey]] = OrderedDict()
_names_by_request: defaultdict[RequestKey, set[str]] = defaultdict(set)


def request_key(request: Mapping[str, float]) -> RequestKey:
    """A hashable form of a request, the same for equal requests."""
    return tuple(sorted(request.items()))


def remember(ref: Any, name: str, key: RequestKey) -> None:
    """Note that future ``ref`` came from a call of ``name`` asking for ``key``."""
    _by_ref[ref.binary()] = (name, key)
    if on_remember is not None:
        on_remember(ref, name)
    _names_by_request[key].add(name)
    if len(_by_ref) > _LIMIT:
        _by_ref.popitem(last=False)


def lookup(ref: Any) -> tuple[str, RequestKey] | None:
    """``(function name, request key)`` of a future this process submitted, else None."""
    return _by_ref.get(ref.binary())


def functions_by_request() -> dict[RequestKey, set[str]]:
    """Names of the functions that submitted each request shape."""
    return dict(_names_by_request)
