"""The one exception hierarchy of eugo_jupyter.

Every error the package raises on purpose is an ``EugoError``; the classes also inherit the
builtin a user would naturally catch (``ValueError``, ``TypeError``, ``TimeoutError``)::

    EugoError
     +-- OptionsError (ValueError)          a resource option the scheduler cannot accept
     +-- SerializationError (TypeError)     an argument or captured variable cannot be pickled
     +-- ClusterError (RuntimeError)        no cluster to talk to, or the wrong one
     +-- InfeasibleRequestError             no node can ever run this request (fail-fast paths)
     +-- GetTimeoutError (TimeoutError)     ``get(..., timeout=)`` ran out, with a diagnosis
     +-- MapItemError (RuntimeError)        ``map`` failed on an item; names its index and value
     +-- DataLocationError (FileNotFoundError)  a task's path does not exist on the node it ran on

    EugoWarning (UserWarning)
     +-- InfeasibleRequestWarning           a call was submitted that no alive node can run

Messages say what happened and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "DataLocationError",
    "EugoError",
    "EugoWarning",
    "GetTimeoutError",
    "InfeasibleRequestError",
    "InfeasibleRequestWarning",
    "MapItemError",
    "OptionsError",
    "SerializationError",
]


class EugoError(Exception):
    """Base class of every error raised on purpose by eugo_jupyter."""


class OptionsError(EugoError, ValueError):
    """A resource option (``num_cpus``, ``num_gpus``, ``memory``...) has a value Ray cannot use."""


class SerializationError(EugoError, TypeError):
    """An argument or a captured variable cannot be sent to a worker; nothing was submitted."""


class ClusterError(EugoError, RuntimeError):
    """There is no cluster to talk to, or the session is attached to a different one."""


class InfeasibleRequestError(EugoError, RuntimeError):
    """No alive node can ever satisfy a resource request, so waiting would never end."""


class GetTimeoutError(EugoError, TimeoutError):
    """``eugo.hpc.get(..., timeout=)`` ran out before every future was ready.

    The message carries the diagnosis of what the unfinished work is waiting for.
    """


class MapItemError(EugoError, RuntimeError):
    """``eugo.hpc.map`` stopped because the function failed on one item.

    ``index`` is the item's position in the input, ``item_repr`` a short repr of it, and the
    original exception (when it could travel back from the worker) is the ``__cause__``.
    """

    def __init__(self, message: str, index: int | None = None, item_repr: str | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.item_repr = item_repr

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (str(self), self.index, self.item_repr))


class DataLocationError(EugoError, FileNotFoundError):
    """A task failed because a path does not exist on the node that ran it.

    The message says which node, whether the path exists on the notebook's machine, what a
    relative path resolved against, and the fix. ``filename`` is the path.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        import errno

        super().__init__(errno.ENOENT, message, path)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.message, self.filename))


class EugoWarning(UserWarning):
    """Base class of eugo_jupyter's warnings."""


class InfeasibleRequestWarning(EugoWarning):
    """A call was submitted whose request no alive node can satisfy: it will wait until one joins."""
