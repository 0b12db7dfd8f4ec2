"""A call's function wrapped so that its output goes to the hub, of whatever kind it is.

In a notebook kernel the function a task runs (and each method of an actor) is wrapped
(:func:`wrap`, :func:`wrap_class`): while the call runs its output is captured
(:mod:`.capture`) and sent to the hub keyed by the call's task id, so the kernel can put each
line under the cell that made *that* call (Ray's own log stream only names the function, and
folds repeated lines). Generators (Ray's streaming generators, sync and async) capture each step,
and hand the lines of a step to the hub before Ray ships the item it yields. A call that printed
sends what is left, and waits for the hub to have it, before it returns: when ``get`` has the
value, the hub has the lines. A call that prints nothing sends nothing. Nothing here imports
IPython.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .capture import current, printing
from .hub import CallSink

__all__ = ["call_printing", "wrap", "wrap_class"]


def call_printing(fn: Callable[..., Any], hub_name: str, args: tuple, kwargs: dict) -> Any:
    """Run ``fn(*args, **kwargs)`` with its prints sent to the hub ``hub_name``.

    Inside a call already printing here (a method calling another of its actor's), its prints
    are that call's.
    """
    if current.get() is not None:
        return fn(*args, **kwargs)
    sink = CallSink(hub_name)
    try:
        with printing(sink):
            return fn(*args, **kwargs)
    except Exception as exc:
        from .._remote_tb import keep_frames

        keep_frames(exc)  # for eugo.hpc.debug(future) in the notebook
        raise
    finally:
        sink.finish()


async def _awaited_printing(fn: Callable[..., Any], hub_name: str, args: tuple,
                            kwargs: dict) -> Any:  # fmt: skip
    if current.get() is not None:
        return await fn(*args, **kwargs)
    sink = CallSink(hub_name)
    try:
        with printing(sink):
            return await fn(*args, **kwargs)
    finally:
        await sink.finish_async()


def _generator_printing(fn: Callable[..., Any], hub_name: str, args: tuple,
                        kwargs: dict) -> Iterator[Any]:  # fmt: skip
    if current.get() is not None:
        return (yield from fn(*args, **kwargs))
    sink = CallSink(hub_name)
    inner = fn(*args, **kwargs)
    try:
        while True:
            with printing(sink):
                try:
                    item = next(inner)
                except StopIteration as stop:
                    return stop.value
            sink.sync()
            yield item
    finally:
        with printing(sink):
            inner.close()
        sink.finish()


async def _async_generator_printing(fn: Callable[..., Any], hub_name: str, args: tuple,
                                    kwargs: dict) -> AsyncIterator[Any]:  # fmt: skip
    if current.get() is not None:
        async for item in fn(*args, **kwargs):
            yield item
        return
    sink = CallSink(hub_name)
    inner = fn(*args, **kwargs)
    try:
        while True:
            with printing(sink):
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    return
            await sink.sync_async()
            yield item
    finally:
        with printing(sink):
            await inner.aclose()
        await sink.finish_async()


def wrap(fn: Callable[..., Any], hub_name: str) -> Callable[..., Any]:
    """``fn`` as a task body whose prints go to the hub; of the same kind (plain, coroutine,
    generator, async generator), which Ray reads to run it, and named as ``fn``, which Ray names
    the task by.

    Each kind's body only forwards to a function of this module: named as ``fn``, the body is
    pickled by value when ``fn`` is (a notebook's function), and so are the globals it reads,
    which the module's functions are not (its context variable could not be).
    """
    if inspect.isasyncgenfunction(fn):

        async def agen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for item in _async_generator_printing(fn, hub_name, args, kwargs):
                yield item

        run: Callable[..., Any] = agen
    elif inspect.isgeneratorfunction(fn):

        def gen(*args: Any, **kwargs: Any) -> Iterator[Any]:
            return (yield from _generator_printing(fn, hub_name, args, kwargs))

        run = gen
    elif inspect.iscoroutinefunction(fn):

        async def coro(*args: Any, **kwargs: Any) -> Any:
            return await _awaited_printing(fn, hub_name, args, kwargs)

        run = coro
    else:

        def plain(*args: Any, **kwargs: Any) -> Any:
            return call_printing(fn, hub_name, args, kwargs)

        run = plain
    return functools.wraps(fn)(run)


def wrap_class(cls: type, hub_name: str) -> type:
    """``cls`` as an actor class whose methods (and ``__init__``) send their prints to the hub.

    A subclass named as ``cls``: the actor's state and methods are the class's own. Coroutine
    and generator methods keep their kind (Ray runs an actor with a coroutine method as an async
    actor, and a generator method as a streaming generator).
    """
    import types

    namespace: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, member in vars(klass).items():
            if not isinstance(member, types.FunctionType):
                continue
            # __init__ runs as the actor's creation task: its prints go under the creating cell.
            if name.startswith("__") and name != "__init__":
                continue
            namespace[name] = wrap(member, hub_name)
    wrapped = type(cls.__name__, (cls,), namespace)
    wrapped.__qualname__ = cls.__qualname__
    wrapped.__module__ = cls.__module__
    wrapped.__doc__ = cls.__doc__
    return wrapped
