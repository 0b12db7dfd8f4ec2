"""The one exception hierarchy of eugo_jupyter.

Every error the package raises on purpose is an ``EugoError``; the classes also inherit the
builtin a user would naturally catch (``ValueError``, ``TypeError``, ``TimeoutError``)::

    EugoError
     +-- OptionsError (ValueError)          a resource option the scheduler cannot accept
     +-- SerializationError (TypeError)     an argument or captured variable cannot be pickled
     +-- ClusterError (RuntimeError)        no cluster to talk to, or the wrong one
     |    +-- LaunchError                   a node of a launched cluster did not start
     |    +-- SchedulerError                a batch scheduler's command refused or failed (its
     |    |                                 words); ``SlurmError`` is the same class
     |    +-- ConfirmationError             stopping what the Manager did not start, unconfirmed
     +-- InfeasibleRequestError             no node can ever run this request (fail-fast paths)
     +-- GetTimeoutError (TimeoutError)     ``get(..., timeout=)`` ran out, with a diagnosis;
     |                                      also Ray's GetTimeoutError once Ray is loaded
     +-- MapItemError (RuntimeError)        ``map`` failed on an item; names its index and value,
     |                                      ``.partial`` holds the results that finished
     +-- ItemTimeout (TimeoutError)         an item of ``map``/``imap`` ran past ``timeout=``
     +-- JournalError (RuntimeError)        a run's journal cannot be read, or another process
     |                                      is writing it
     +-- ConflictError (RuntimeError)       a profile or an audit is already active (no nesting)
     +-- CellError (RuntimeError)           a ``%%distribute`` cell raised (worker side, carries
     |                                      the cell's traceback and what it bound)
     +-- RemoteCellError (RuntimeError)     the cell's exception could not travel back as itself
     +-- PartitionError (RuntimeError)      a ``.eugo`` pandas call failed in a partition; also
     |                                      an instance of the function's own exception type
     +-- DataLocationError (FileNotFoundError)  a task's path does not exist on the node it ran on

    EugoWarning (UserWarning)
     +-- InfeasibleRequestWarning           a call was submitted that no alive node can run
     +-- GlobalStateWarning                 a task or actor assigns a module global
     +-- StaleGlobalWarning                 an actor reads a global the notebook changed since
     +-- PandasFallbackWarning              a ``.eugo`` call ran in pandas here (would not pay)
     +-- JournalWarning                     a journal's damaged file or new generation, in words

Messages say what happened and what to do about it.

>>> issubclass(OptionsError, ValueError), issubclass(LaunchError, ClusterError)
(True, True)
>>> str(CellError({"text": "ZeroDivisionError: division by zero"}))
'ZeroDivisionError: division by zero'
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CellError",
    "ClusterError",
    "ConflictError",
    "ConfirmationError",
    "DataLocationError",
    "EugoError",
    "EugoWarning",
    "GetTimeoutError",
    "GlobalStateWarning",
    "InfeasibleRequestError",
    "InfeasibleRequestWarning",
    "ItemTimeout",
    "JournalError",
    "JournalWarning",
    "LaunchError",
    "MapItemError",
    "OptionsError",
    "PandasFallbackWarning",
    "PartitionError",
    "RemoteCellError",
    "SchedulerError",
    "SerializationError",
    "SlurmError",
    "StaleGlobalWarning",
]


class EugoError(Exception):
    """Base class of every error raised on purpose by eugo_jupyter."""


class OptionsError(EugoError, ValueError):
    """A resource option (``num_cpus``, ``num_gpus``, ``memory``...) has a value Ray cannot use."""


class SerializationError(EugoError, TypeError):
    """An argument or a captured variable cannot be sent to a worker; nothing was submitted."""


class ClusterError(EugoError, RuntimeError):
    """There is no cluster to talk to, or the session is attached to a different one."""


class LaunchError(ClusterError):
    """A node did not start; the message says why (port in use, ray missing, timeout...)."""


class SchedulerError(ClusterError):
    """A batch scheduler's command (sbatch, qsub, qstat...) refused or failed; the message is
    the scheduler's own."""


#: The name this error had when SLURM was the only scheduler; ``except SlurmError`` still works.
SlurmError = SchedulerError


class ConfirmationError(ClusterError):
    """The action would stop a cluster the Manager did not start; repeat it with confirmation."""


class InfeasibleRequestError(EugoError, RuntimeError):
    """No alive node can ever satisfy a resource request, so waiting would never end."""


class GetTimeoutError(EugoError, TimeoutError):
    """``eugo.hpc.get(..., timeout=)`` ran out before every future was ready.

    The message carries the diagnosis of what the unfinished work is waiting for. Once Ray is
    loaded it is also Ray's own ``ray.exceptions.GetTimeoutError`` (an instance of a subclass
    of both), so code written for Ray catches it unchanged.
    """

    def __new__(cls, *args: Any) -> GetTimeoutError:
        if cls is GetTimeoutError:
            cls = _get_timeout_class()
        return super().__new__(cls, *args)

    def __reduce__(self) -> tuple[Any, ...]:
        return (GetTimeoutError, self.args)


_ray_get_timeout: list[type] = []  # the subclass that is Ray's GetTimeoutError too, made once


def _get_timeout_class() -> type:
    import sys

    ray_exceptions = sys.modules.get("ray.exceptions")  # never import Ray for this
    if ray_exceptions is None:
        return GetTimeoutError
    if not _ray_get_timeout:
        both = (GetTimeoutError, ray_exceptions.GetTimeoutError)
        _ray_get_timeout.append(type("GetTimeoutError", both, {"__module__": __name__}))
    return _ray_get_timeout[0]


class MapItemError(EugoError, RuntimeError):
    """``eugo.hpc.map`` stopped because the function failed on one item.

    ``index`` is the item's position in the input, ``item_repr`` a short repr of it, and the
    original exception (when it could travel back from the worker) is the ``__cause__``.
    ``partial`` is ``{index: result}`` for the items that finished before the run stopped
    (``imap``: those finished and not yet yielded), so nothing computed is lost;
    ``eugo.hpc.debug(error)`` opens a post-mortem on the worker's frames.
    """

    def __init__(
        self,
        message: str,
        index: int | None = None,
        item_repr: str | None = None,
        partial: dict[int, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.index = index
        self.item_repr = item_repr
        self.partial: dict[int, Any] = {} if partial is None else partial
        self.failed: Any = None  # the eugo.hpc.Failed value, for eugo.hpc.debug

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.index, self.item_repr, self.partial))


class ItemTimeout(EugoError, TimeoutError):
    """An item of ``eugo.hpc.map``/``imap`` was still running after ``timeout=`` seconds.

    It was abandoned (interrupted in its worker, or its worker replaced) and counted as
    failed; ``index`` and ``item_repr`` name it, ``seconds`` is the limit it ran past.
    """

    def __init__(
        self,
        message: str,
        index: int | None = None,
        item_repr: str | None = None,
        seconds: float | None = None,
    ) -> None:
        super().__init__(message)
        self.index = index
        self.item_repr = item_repr
        self.seconds = seconds

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.index, self.item_repr, self.seconds))


class JournalError(EugoError, RuntimeError):
    """A run's journal cannot be opened: its index is damaged, it is newer than this version,
    or another process is writing it (the message names that process)."""


class ConflictError(EugoError, RuntimeError):
    """Something that does not nest is already active (a profile, a GPU-use audit)."""


class CellError(EugoError, RuntimeError):
    """Raised by a ``%%distribute`` cell's task when the cell's code raised.

    ``info`` carries what the kernel needs (frames, the exception if it pickles, the output tail,
    the names bound before the error). Its text is the cell's own traceback, so
    ``eugo.hpc.get(fut)`` on a ``--no-block`` cell says what went wrong; the magic re-raises the
    original exception with the cell's line numbers.
    """

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("text", "the cell raised an exception"))
        self.info = info

    def __reduce__(self) -> tuple[Any, ...]:
        return (CellError, (self.info,))

    def __str__(self) -> str:
        return str(self.info.get("text", ""))


class RemoteCellError(EugoError, RuntimeError):
    """The cell raised an exception that could not be sent back as itself (only its text came)."""


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
    """A call was submitted whose request no alive node can satisfy: it waits until one joins."""


class GlobalStateWarning(EugoWarning):
    """A task or actor assigns a module global: each worker has its own copy, nothing is shared."""


class StaleGlobalWarning(EugoWarning):
    """An actor's class reads a global that the notebook changed after the actor was created:
    the actor keeps the value it started with (taking the new one would lose its state)."""


class PartitionError(EugoError, RuntimeError):
    """A ``.eugo`` pandas call failed in one partition.

    ``partition`` is the partition's number, ``label`` the failing row's index label (or the
    group's key for ``groupby``), and the original exception, when it could travel back from
    the worker, is the ``__cause__``; the message carries the worker's traceback.
    """

    def __init__(self, message: str, partition: int | None = None, label: object = None) -> None:
        super().__init__(message)
        self.partition = partition
        self.label = label

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (str(self), self.partition, self.label))

    @classmethod
    def raised(
        cls, message: str, partition: int | None, label: object, cause: BaseException | None
    ) -> PartitionError:
        """The error for a function that raised ``cause``: also an instance of its type.

        As Ray's task errors are instances of the user's exception class, ``except KeyError:``
        around an ``apply`` catches a ``KeyError`` raised on a worker; the error's own
        attributes (``errno``, a custom field) are read from the cause. Without a cause that
        could travel back, or for a type that cannot be combined, a plain ``PartitionError``.

        >>> error = PartitionError.raised("row 'b': 'x'", 0, "b", KeyError("x"))
        >>> isinstance(error, KeyError), isinstance(error, PartitionError), error.label
        (True, True, 'b')
        >>> type(error).__name__, str(error)
        ('PartitionError(KeyError)', "row 'b': 'x'")
        """
        kind = _partition_error_class(type(cause)) if cause is not None else None
        error = (kind or cls)(message, partition, label)
        error.__cause__ = cause
        if isinstance(cause, OSError) and isinstance(error, OSError):
            # OSError keeps these in its own fields, which the error's __init__ did not set.
            error.errno, error.strerror = cause.errno, cause.strerror
            error.filename, error.filename2 = cause.filename, cause.filename2
        return error


_combined: dict[type[BaseException], type[PartitionError] | None] = {}


def _partition_error_class(cause: type[BaseException]) -> type[PartitionError] | None:
    """``PartitionError(<cause>)``: a subclass of both, made once per cause type."""
    if issubclass(PartitionError, cause) or not issubclass(cause, Exception):
        return PartitionError  # Exception, RuntimeError...; never KeyboardInterrupt and kin
    if cause not in _combined:
        name = f"PartitionError({cause.__name__})"
        try:
            kind = type(name, (PartitionError, cause), dict(_AS_CAUSE))
        except TypeError:  # a base with its own C layout (rare): the plain error
            kind = None
        _combined[cause] = kind
    return _combined[cause]


def _str(self: PartitionError) -> str:
    return str(self.args[0]) if self.args else ""


def _getattr(self: PartitionError, name: str) -> Any:
    # Only names the error lacks: the cause's own attributes (OSError.errno, custom fields).
    cause = BaseException.__getattribute__(self, "__cause__")
    if cause is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(cause, name)


def _reduce(self: PartitionError) -> tuple[Any, ...]:
    return (PartitionError.raised, (str(self), self.partition, self.label, self.__cause__))


# What the combined classes override: __str__ (KeyError's quotes its argument), pickling by this
# module's name, and attribute reads. (Their __init__ is PartitionError's, first in their MRO,
# not their cause type's, whose arguments differ.)
_AS_CAUSE: dict[str, Any] = {
    "__str__": _str,
    "__getattr__": _getattr,
    "__reduce__": _reduce,
    "__module__": __name__,
}


class JournalWarning(EugoWarning):
    """A journal had damaged files (their items run again), a result could not be written, or
    a changed function started a new generation."""


class PandasFallbackWarning(EugoWarning):
    """A ``.eugo`` call ran in pandas in this process because splitting it would not pay.

    Silence it with ``warnings.filterwarnings("ignore", category=PandasFallbackWarning)``.
    """
