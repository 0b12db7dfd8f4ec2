"""Whether what a function was exported to Ray with is still the notebook's current state.

Ray pickles a remote function (and an actor's class) once, at its first call: a function defined
in a notebook is pickled *by value*, with the values of the globals it reads at that moment.
A later cell that sets ``THRESH = 100`` changes nothing the workers see, so the next call still
answers with the old value, unlike a local call. :func:`reads_of` records, at export time, each
global the function reads (following helper functions and classes defined in the notebook, as
cloudpickle does) with the object it held; :meth:`Reads.changed` compares them with the
notebook's current ones. A changed global means the function is exported again.

What the check sees, and what it costs an unchanged call (one dict lookup and one identity
test per global read, plus a ``len`` for a list, dict, set or bytearray):

- a global rebound (``THRESH = 100``, a helper function redefined in another cell): always;
- a container grown or shrunk in place (``items.append(x)``, ``d[new_key] = v``): by its length;
- a small container of plain values (up to :data:`SMALL` items of numbers, strings, bools,
  None) changed in place at the same length (``limits[0] = 5``): compared with a shallow copy;
- *not seen*: an in-place change that keeps the length of a larger container, or of an element
  inside one (``rows[3]["x"] = 1``), or of any other mutable object (a NumPy array written into,
  an attribute set on an object). Rebind the name (``arr = arr.copy()``), or pass the value as
  an argument, for the call to see the new value.

Functions from importable modules are pickled by reference (the workers import the module
themselves), so they record nothing and their check costs nothing.

>>> LIMIT = 3
>>> def over(x):
...     return x > LIMIT
>>> reads = reads_of(over, by_value=lambda obj: True)
>>> reads.names()
['LIMIT']
>>> reads.changed()
[]
>>> LIMIT = 100
>>> [(name, old, new) for name, old, new in reads.changed()]
[('LIMIT', 3, 100)]
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from .. import _raystate
from ._code_identity import codes

__all__ = ["SMALL", "Reads", "by_value", "reads_of"]

#: The most items a container may hold for an in-place change at the same length to be seen.
SMALL = 32

_PLAIN = (int, float, str, bool, bytes, type(None))
_SIZED = (list, dict, set, bytearray)
_MISSING = object()
_MAX_DEPTH = 8


def by_value(obj: Any) -> bool:
    """Does cloudpickle ship ``obj`` by value (a notebook's, or a module registered so)?"""
    module = getattr(obj, "__module__", None)
    if module == "__main__":
        return True
    if module is None or module not in sys.modules:
        return False
    return _raystate.pickled_by_value(sys.modules[module])


def _probe(value: Any) -> tuple[int, Any] | None:
    """What is remembered of a mutable container besides its identity: its length, and a
    shallow copy when it is small and holds plain values only."""
    if not isinstance(value, _SIZED):
        return None
    size = len(value)
    if size <= SMALL:
        if isinstance(value, dict):
            plain = all(isinstance(k, _PLAIN) and isinstance(v, _PLAIN) for k, v in value.items())
        else:
            plain = all(isinstance(v, _PLAIN) for v in value)
        if plain:
            return size, value.copy()
    return size, None


def _functions_of(target: Any) -> list[types.FunctionType]:
    """The plain functions whose globals ``target`` ships with it."""
    inner = getattr(target, "_fn", None) or getattr(target, "_cls", None)  # eugo's wrappers
    if inner is not None and not isinstance(target, (types.FunctionType, type)):
        target = inner
    if isinstance(target, types.FunctionType):
        return [target]
    if isinstance(target, type):
        found: list[types.FunctionType] = []
        for klass in target.__mro__:
            if klass is object or not by_value(klass):
                continue
            for member in vars(klass).values():
                member = getattr(member, "__func__", member)  # staticmethod, classmethod
                if isinstance(member, property):
                    member = member.fget
                if isinstance(member, types.FunctionType):
                    found.append(member)
        return found
    return []


class Reads:
    """The globals a function was exported with: ``(namespace, name, value, probe)`` each."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[dict[str, Any], str, Any, Any]]) -> None:
        self.entries = entries

    def names(self) -> list[str]:
        return sorted({name for _, name, _, _ in self.entries})

    def __bool__(self) -> bool:
        return bool(self.entries)

    def stale(self) -> bool:
        """Has any global changed since? The per-call check: stops at the first change."""
        for namespace, name, value, probe in self.entries:
            now = namespace.get(name, _MISSING)
            if now is not value:
                return True
            if probe is not None and (
                len(now) != probe[0] or (probe[1] is not None and now != probe[1])
            ):
                return True
        return False

    def changed(self) -> list[tuple[str, Any, Any]]:
        """``(name, value exported, value now)`` for each global that changed."""
        out: list[tuple[str, Any, Any]] = []
        for namespace, name, value, probe in self.entries:
            now = namespace.get(name, _MISSING)
            moved = now is not value or (
                probe is not None
                and (len(now) != probe[0] or (probe[1] is not None and now != probe[1]))
            )
            if moved:
                then = probe[1] if probe is not None and probe[1] is not None else value
                out.append((name, then, None if now is _MISSING else now))
        return out


def reads_of(target: Any, by_value: Callable[[Any], bool] = by_value) -> Reads | None:
    """The globals ``target`` (a function, a class, or eugo's wrapper of one) reads, followed
    through the helpers it calls; None when it is pickled by reference (nothing to check)."""
    roots = [fn for fn in _functions_of(target) if by_value(fn)]
    if not roots:
        return None
    entries: list[tuple[dict[str, Any], str, Any, Any]] = []
    seen: set[int] = set()
    todo = [(fn, 0) for fn in roots]
    while todo:
        fn, depth = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        namespace = fn.__globals__
        names = {name for code in codes(fn.__code__) for name in code.co_names}
        for name in sorted(names):
            value = namespace.get(name, _MISSING)
            if value is _MISSING or isinstance(value, types.ModuleType):
                # Not a global (an attribute's name, a builtin), or a module: modules travel by
                # reference, the worker imports its own.
                continue
            entries.append((namespace, name, value, _probe(value)))
            if depth < _MAX_DEPTH:
                for inner in _functions_of(value):
                    if by_value(inner):
                        todo.append((inner, depth + 1))
    return Reads(entries)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ActorGlobals:
    """What an actor's class read when the actor was created; warns once per change on a call.

    An actor cannot take a new global without losing its state, so it keeps the old one; the
    warning names the global, both values and the fix.
    """

    __slots__ = ("reads", "label", "warned")

    def __init__(self, reads: Reads, label: str) -> None:
        self.reads = reads
        self.label = label
        self.warned: set[tuple[str, int]] = set()  # (name, id of the notebook's value) told

    def warn_if_stale(self, method: str, stacklevel: int) -> None:
        if not self.reads.stale():
            return
        import warnings

        from .. import _hooks
        from ..exceptions import StaleGlobalWarning

        for name, then, now in self.reads.changed():
            note = getattr(_hooks.recorder, "note_stale_global", None)
            if note is not None:  # a profile records: its report says so, with the fix
                note(self.label, name, _shown(then), _shown(now))
            key = (name, id(now))
            if key in self.warned:
                continue
            self.warned.add(key)
            warnings.warn(
                f"The actor {self.label} was created when {name} was {_shown(then)}; the "
                f"notebook's {name} is now {_shown(now)}, but {self.label}.{method} still "
                f"uses {_shown(then)} (an actor keeps the globals it started with). Fix: pass "
                f"{name} as an argument to the method, or create the actor again "
                f"({self.label}(...)) to use the new value.",
                StaleGlobalWarning,
                stacklevel=stacklevel + 1,
            )
