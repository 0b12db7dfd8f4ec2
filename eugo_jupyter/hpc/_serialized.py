"""How big a value or a function is once serialized, measured without side effects.

Pickling an ``ObjectRef`` (or an actor handle) outside Ray's own serialization makes Ray pin
that object for the rest of the session, so a profile that sized arguments with a plain
``cloudpickle.dumps`` kept every future it saw alive. Here futures and handles are counted as
small references instead (Ray ships them as ids), nothing is copied (bytes are counted as
they are written, large buffers out of band), and nothing is kept.

>>> pickled_size(b"x" * 1000) >= 1000
True
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from ._code_identity import codes

__all__ = ["captured_sizes", "function_size", "inline_bytes", "pickle_problem", "pickled_size"]

#: What a future or actor handle inside an argument costs: Ray sends its id, not its value.
REF_BYTES = 64


class _Count:
    """A write-only file that only counts: pickling into it allocates nothing."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self.n += size
        return size


@functools.cache
def _pickler_class() -> type:
    """Made once, on first use: it subclasses Ray's cloudpickler, imported only then."""
    import ray
    from ray import cloudpickle
    from ray.actor import ActorHandle

    ref_types = (ray.ObjectRef, ActorHandle)

    class SizingPickler(cloudpickle.CloudPickler):  # type: ignore[misc,valid-type]
        refs: int  # futures and handles met so far; the caller sets it to 0 before dumping

        # persistent_id runs before any reducer: a future is never handed to Ray's reducer,
        # which is what pins it when called outside a Ray serialization context.
        def persistent_id(self, obj: Any) -> Any:
            if isinstance(obj, ref_types):
                self.refs += 1
                return b"ref"
            return None

    return SizingPickler


def pickled_size(value: Any) -> int:
    """Bytes ``value`` takes when Ray serializes it; futures inside count as references.

    Raises what pickling raises (an unpicklable value): the caller decides what that means.

    >>> pickled_size(list(range(10))) < 100
    True
    """
    sink = _Count()

    def out_of_band(buffer: Any) -> bool:
        sink.n += buffer.raw().nbytes  # counted, not copied
        return False

    pickler = _pickler_class()(sink, protocol=5, buffer_callback=out_of_band)
    pickler.refs = 0
    pickler.dump(value)
    return sink.n + REF_BYTES * pickler.refs


class _TooBig(Exception):
    pass


class _Bounded:
    """A write-only file that keeps what is written, and gives up past ``limit`` bytes."""

    __slots__ = ("limit", "n", "parts")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.n = 0
        self.parts: list[bytes] = []

    def write(self, data: Any) -> int:
        size = memoryview(data).nbytes
        self.n += size
        if self.n > self.limit:
            raise _TooBig
        self.parts.append(bytes(data))
        return size


def inline_bytes(value: Any, limit: int) -> bytes | None:
    """``value`` pickled, to travel inside each task that needs it; None when it is larger than
    ``limit`` bytes, holds a future or an actor handle (those need Ray's own serialization), or
    cannot be pickled: such a value goes through the object store instead.

    Pickling stops at ``limit``: a large value is never copied whole to find out.

    >>> import pickle
    >>> pickle.loads(inline_bytes({"rows": [1, 2]}, 1000))
    {'rows': [1, 2]}
    >>> inline_bytes(b"x" * 5000, 1000) is None
    True
    """
    sink = _Bounded(limit)
    pickler = _pickler_class()(sink, protocol=5)
    pickler.refs = 0
    try:
        pickler.dump(value)
    except Exception:  # noqa: BLE001 - too big, or not picklable: the object store's business
        return None
    return None if pickler.refs else b"".join(sink.parts)


def pickle_problem(value: Any) -> str | None:
    """None if Ray can serialize ``value``; else why, in the pickler's words.

    The one place the package asks "can this travel?" (call sites, ``map`` items, readiness,
    ``%%distribute`` names on both sides): nothing is copied or kept, and a future inside the
    value is fine, as it is for Ray.

    >>> import threading
    >>> pickle_problem(threading.Lock())
    "TypeError: cannot pickle '_thread.lock' object"
    >>> pickle_problem({"rows": [1, 2]}) is None
    True
    """
    try:
        pickled_size(value)
    except Exception as exc:  # noqa: BLE001 - any failure to pickle is the answer
        return f"{type(exc).__name__}: {exc}"
    return None


def function_size(fn: Callable[..., Any]) -> int:
    """Bytes of ``fn`` as Ray exports it to workers (its closure and globals pickled by value)."""
    try:
        return pickled_size(fn)
    except Exception:  # noqa: BLE001 - Ray reports an unpicklable function itself, at submit
        return 0


def captured_sizes(fn: Callable[..., Any]) -> list[tuple[str, int]]:
    """The variables ``fn`` captures (closure cells and globals it reads), largest first.

    Only what Ray would ship with the function counts, so a function importable by name
    (pickled by reference) captures nothing.

    >>> big = list(range(100_000))
    >>> def f():
    ...     return len(big)
    >>> [name for name, _ in captured_sizes(f)]
    ['big']
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    found: dict[str, Any] = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            found[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    namespace = getattr(fn, "__globals__", {})
    for name in _global_reads(code):
        value = namespace.get(name)
        shipped = not isinstance(value, (types.ModuleType, type)) and not callable(value)
        if name in namespace and shipped:
            found.setdefault(name, value)
    sizes = []
    for name, value in found.items():
        try:
            sizes.append((name, pickled_size(value)))
        except Exception:  # noqa: BLE001 - an unpicklable capture is reported at submit
            continue
    return sorted(sizes, key=lambda item: -item[1])


def _global_reads(code: types.CodeType) -> list[str]:
    """Names a function's code (nested code included) may read as globals."""
    return list(dict.fromkeys(name for nested in codes(code) for name in nested.co_names))
