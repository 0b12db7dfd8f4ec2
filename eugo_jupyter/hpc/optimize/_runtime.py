"""What a call site ships: :class:`Optimized`, which finds its :class:`._entry.Entry` per process.

The steps an entry goes through are described in :mod:`._entry`; verification in
:mod:`._verifying`; the settled dispatcher in :mod:`._glue`; the state and counts in
:mod:`._record`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from . import _candidates, _state
from ._entry import Entry
from ._record import VERIFY_CALLS, Settings, State

__all__ = ["VERIFY_CALLS", "Entry", "Optimized", "Settings", "State", "find_entry"]


class Optimized:
    """A plain function run through the optimizer; pickles as the function and its settings.

    >>> def add(a, b):
    ...     return a + b
    >>> Optimized(add)(1, 2)
    3
    """

    __slots__ = ("fn", "settings", "_entry", "__weakref__")

    def __init__(self, fn: Any, settings: Settings | None = None, **fields: Any) -> None:
        """``settings``, or its fields as keywords (``Optimized(fn, force=True)``)."""
        self.fn = fn
        self.settings = dataclasses.replace(settings or Settings(), **fields)
        self._entry: Entry | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Optimized, (self.fn, self.settings))

    def __repr__(self) -> str:
        return f"<optimized {getattr(self.fn, '__qualname__', self.fn)!r}>"

    @property
    def __name__(self) -> str:  # what Ray and the profile name the call after
        return str(getattr(self.fn, "__name__", "optimized"))

    def entry(self) -> Entry:
        """This function's entry in this process (found by cache key, made on first use)."""
        entry = self._entry
        if entry is None:
            entry = self._entry = find_entry(self.fn, self.settings)
        return entry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        entry = self._entry or self.entry()
        fast = entry.fast
        if fast is None or kwargs:
            return entry.call(args, kwargs)
        # Verified and settled: numba's dispatcher, with only the fallback around it (new
        # argument types come back to the entry through numba's own callback).
        try:
            return fast(*args)
        except Exception as exc:  # noqa: BLE001 - rerun in Python, counted and named
            return entry.raised(args, exc)


def find_entry(fn: Any, settings: Settings, cached: bool = True) -> Entry:
    """The entry for ``fn``'s current key in this process (a new one when ``cached`` is False)."""
    cands = _candidates.find(fn)
    key = cands.key() if cands is not None else f"plain:{id(fn)}"
    entry = _state.ENTRIES.get(key) if cached else None
    if entry is None:
        entry = Entry(fn, cands, key, settings)
        if cached:
            _state.ENTRIES[key] = entry
    else:
        entry.reconsider(settings.expected_calls)
    return entry
