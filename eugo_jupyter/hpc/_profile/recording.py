"""The recording half of ``eugo.hpc.profile()``: what was submitted and fetched, and the model.

While a profile records, :class:`Recorder` is the submission path of ``@distribute`` functions,
actor methods and ``map``: each call runs through :mod:`.worker` on the worker, which also
returns (as a second Ray object) when and where it ran. ``get`` reports each call here. The
recording holds no user object alive: arguments are sized with :mod:`.._serialized` (futures inside
them are never pickled out of band, which would pin them) and known by id only.

The shapes of the model (:class:`RunModel` and its records) are defined here, once;
:mod:`.._insights` reads them.
"""

from __future__ import annotations

import inspect
import reprlib
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import Any, TypedDict

from .. import _freshness, _output, _serialized, _static
from . import worker

__all__ = ["ArgRecord", "GetRecord", "Recorder", "RunModel", "TaskRecord"]

_short = reprlib.Repr()
_short.maxstring = 30
_short.maxother = 30
_short.maxlist = 4
_short.maxdict = 4
_short.maxarray = 4

_CO_ASYNC = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
#: Frames of these packages run the notebook's own event loop: a plain cell is not async code.
_LOOP_RUNNERS = ("IPython", "ipykernel", "asyncio", "tornado", "jupyter_client", "zmq", "anyio")


class ArgRecord(TypedDict):
    """One argument of a recorded call."""

    name: str
    bytes: int
    type: str
    key: int | None  #: the object's identity when large, to spot the same one sent again
    from_get: int | None  #: the task whose result, fetched with get, this argument is


class TaskRecord(TypedDict, total=False):
    """One recorded call (times in seconds since the profile began; None when not known)."""

    id: int
    function: str
    kind: str  #: "task" or "actor method"
    call: str
    submit: float
    request: dict[str, float]
    args: list[ArgRecord]
    arg_bytes: int
    deps: list[int]
    definition: int  #: 0 for the first definition of this name, 1 for a redefinition...
    function_bytes: int
    captured: list[tuple[str, int]]
    global_writes: list[str]
    start: float | None
    end: float | None
    pid: int | None
    node: str | None
    worker: str | None
    status: str  #: finished, failed or unknown
    returned_put: bool
    nested_gets: int
    nested_get_s: float
    cpu_s: float | None  #: CPU seconds the worker process spent in the body
    optimizations: list[Any]  #: the worker's optimizer stats after the call (optimize=True)


class GetRecord(TypedDict):
    """One ``eugo.hpc.get`` call made by the notebook."""

    start: float
    end: float
    futures: list[int | None]  #: recorded task ids, None for futures made elsewhere
    bytes: int | None  #: total size of the objects fetched, when Ray knows it
    in_async: bool  #: called from async code while its event loop was running


class RunModel(TypedDict):
    """A recorded run as plain data (see :meth:`eugo_jupyter.hpc.Run.model`)."""

    duration: float
    cluster: dict[str, float]
    memory: dict[str, float]  #: where fetched results land: object_store, available, limit
    tasks: list[TaskRecord]
    gets: list[GetRecord]
    #: Journaled runs: {"label", "path", "from_journal", "ran"} each (see ``hpc/_resume.py``).
    resumed: list[dict[str, Any]]


class _Function:
    """What is known of one function object, worked out once per profile."""

    __slots__ = (
        "target", "remotes", "reads", "definition", "size", "captured", "writes", "is_async",
    )  # fmt: skip

    def __init__(self, target: Any, definition: int) -> None:
        self.target = target  # held: Ray holds exported functions too, and ids must stay unique
        self.remotes: dict[str, Any] = {}  # per options: the timed export of the function
        self.reads: _freshness.Reads | None = None  # the globals the exports were made with
        self.definition = definition
        self.writes = _static.global_writes(target)
        self.size = _serialized.function_size(target) if not isinstance(target, type) else 0
        self.captured = (
            _serialized.captured_sizes(target) if self.size >= Recorder.LARGE_ARG else []
        )
        self.is_async = isinstance(target, type) and any(
            inspect.iscoroutinefunction(v) or inspect.isasyncgenfunction(v)
            for v in vars(target).values()
        )


def _fingerprint(value: Any) -> tuple[Any, str, int | None]:
    """A weak reference when the type allows one; else the type and length must match."""
    try:
        ref: Any = weakref.ref(value)
    except TypeError:
        ref = None
    try:
        length = len(value) if ref is None else None
    except TypeError:
        length = None
    return ref, type(value).__name__, length


def _matches(print_: tuple[Any, str, int | None], value: Any) -> bool:
    ref, type_name, length = print_
    if ref is not None:
        return ref() is value
    if type(value).__name__ != type_name:
        return False
    try:
        return len(value) == length
    except TypeError:
        return length is None


def _in_async_code() -> bool:
    """A coroutine of the caller's, running on this thread's event loop, is making this call."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    frame: FrameType | None = sys._getframe(2)
    for _ in range(30):
        if frame is None:
            return False
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] in _LOOP_RUNNERS:
            return False
        if not module.startswith("eugo_jupyter.") and frame.f_code.co_flags & _CO_ASYNC:
            return True
        frame = frame.f_back
    return False


class Recorder:
    """Records submissions and gets; :class:`eugo_jupyter.hpc.Run` adds the block and report."""

    #: Arguments and functions at least this big (serialized) are large.
    LARGE_ARG = 1 << 20

    def __init__(self) -> None:
        self.started: float | None = None
        self._tasks: list[TaskRecord] = []
        self._timing_refs: list[Any] = []
        self._by_ref: dict[bytes, int] = {}
        self._gets: list[GetRecord] = []
        self._sizes: dict[int, tuple[tuple[Any, str, int | None], int]] = {}
        self._got: dict[int, tuple[tuple[Any, str, int | None], int]] = {}
        self._functions: dict[int, _Function] = {}
        self._definitions: dict[tuple[str, Any], int] = {}
        self._signatures: dict[int, inspect.Signature | None] = {}
        self._lock = threading.Lock()
        self.stale_globals: list[dict[str, str]] = []
        self.resumed_runs: list[dict[str, Any]] = []

    def resumed(self, label: str, path: str, from_journal: int, ran: int) -> None:
        """A journaled ``map``/``imap`` ended: how many items its journal answered, how many ran."""
        self.resumed_runs.append(
            {"label": label, "path": path, "from_journal": from_journal, "ran": ran}
        )

    def note_stale_global(self, actor: str, name: str, then: str, now: str) -> None:
        """A call on actor ``actor`` ran with ``name`` = ``then`` while the notebook has ``now``."""
        seen = {"actor": actor, "name": name, "actor_value": then, "notebook_value": now}
        if seen not in self.stale_globals:
            self.stale_globals.append(seen)

    # -- what is known of arguments and functions -------------------------------------------
    def _arg_size(self, value: Any) -> int:
        import ray

        if isinstance(value, ray.ObjectRef):
            return 0
        cached = self._sizes.get(id(value))
        if cached is not None and _matches(cached[0], value):
            return cached[1]
        try:
            size = _serialized.pickled_size(value)
        except Exception:  # noqa: BLE001 - Ray will report the pickling error itself
            size = 0
        self._sizes[id(value)] = (_fingerprint(value), size)
        return size

    def _function(self, target: Any, label: str) -> _Function:
        info = self._functions.get(id(target))
        if info is None:
            code = getattr(target, "__code__", None) or getattr(target, "__qualname__", None)
            key = (label, code)
            number = self._definitions.get(key, 0)
            self._definitions[key] = number + 1
            info = self._functions[id(target)] = _Function(target, number)
        return info

    def _names(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[str]:
        key = id(fn)
        if key not in self._signatures:
            try:
                self._signatures[key] = inspect.signature(fn)
            except (TypeError, ValueError):
                self._signatures[key] = None
        sig = self._signatures[key]
        if sig is not None:
            try:
                return list(sig.bind_partial(*args, **kwargs).arguments)
            except TypeError:
                pass
        return [f"#{i}" for i in range(len(args))] + list(kwargs)

    def _arguments(self, names: list[str], values: list[Any]) -> tuple[list[ArgRecord], list[int]]:
        import ray

        records: list[ArgRecord] = []
        deps = []
        for name, value in zip(names, values, strict=False):
            if isinstance(value, ray.ObjectRef):
                producer = self._by_ref.get(value.binary())
                if producer is not None:
                    deps.append(producer)
            size = self._arg_size(value)
            got = self._got.get(id(value))
            records.append(
                {
                    "name": name,
                    "bytes": size,
                    "type": type(value).__name__,
                    "key": id(value) if size >= self.LARGE_ARG else None,
                    "from_get": got[1] if got is not None and _matches(got[0], value) else None,
                }
            )
        return records, deps

    # -- submitting ---------------------------------------------------------------------------
    def _remote_for(self, info: _Function, label: str, options: Mapping[str, Any],
                    timed: bool) -> Any:  # fmt: skip
        """The function's export for these options: timed (two results) or as it is (a
        generator, several results); made again when a global it reads changed since, so a
        call sees the notebook's current state as an unprofiled one does."""
        import functools

        import ray

        if info.reads is not None and info.reads.stale():
            info.remotes.clear()
        key = repr((timed, sorted(options.items())))
        remote = info.remotes.get(key)
        if remote is None:
            if not info.remotes:
                info.reads = _freshness.reads_of(info.target)
            body = _output.prepare(info.target, label)  # its prints go under the calling cell
            if timed:

                @functools.wraps(info.target)  # Ray names the function (and its warnings) so
                def run(*args: Any, **kwargs: Any) -> Any:
                    return worker.timed_call(body, args, kwargs)

                remote = ray.remote(run).options(**{"name": label, **options, "num_returns": 2})
            else:
                remote = ray.remote(body)
                remote = remote.options(**options) if options else remote
            info.remotes[key] = remote
        return remote

    def _record(self, record: TaskRecord, value_ref: Any, timing_ref: Any) -> None:
        first = value_ref[0] if isinstance(value_ref, list) else value_ref
        with self._lock:
            record["id"] = index = len(self._tasks)
            self._tasks.append(record)
            self._timing_refs.append(timing_ref)
            if hasattr(first, "binary"):
                self._by_ref[first.binary()] = index

    def _base(self, label: str, kind: str, info: _Function, names: list[str], values: list[Any],
              request: Mapping[str, float]) -> TaskRecord:  # fmt: skip
        arg_records, deps = self._arguments(names, values)
        call = f"{label}({', '.join(_short.repr(v) for v in values)})"
        return {
            "function": label,
            "kind": kind,
            "call": call[:120],
            "submit": time.time(),
            "request": dict(request),
            "args": arg_records,
            "arg_bytes": sum(a["bytes"] for a in arg_records),
            "deps": deps,
            "definition": info.definition,
            "function_bytes": info.size,
            "captured": info.captured[:3],
            "global_writes": info.writes,
        }

    def submit(
        self,
        label: str,
        fn: Callable[..., Any],
        options: Mapping[str, Any],
        request: Mapping[str, float],
        args: tuple,
        kwargs: dict,
    ) -> Any:
        """Submit ``fn(*args, **kwargs)`` as a timed task; returns the task's own future."""
        info = self._function(fn, label)
        values = list(args) + list(kwargs.values())
        record = self._base(label, "task", info, self._names(fn, args, kwargs), values, request)
        generator = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
        if generator or options.get("num_returns", 1) not in (1, None):
            # several returns or a generator: record the submission only
            value_ref = self._remote_for(info, label, options, False).remote(*args, **kwargs)
            timing_ref = None
        else:
            remote = self._remote_for(info, label, options, True)
            value_ref, timing_ref = remote.remote(*args, **kwargs)
        self._record(record, value_ref, timing_ref)
        return value_ref

    def submit_method(self, cls: type | None, handle: Any, method: str, label: str,
                      plain: Any, timed: bool, args: tuple, kwargs: dict) -> Any:  # fmt: skip
        """Call an actor method, timed inside the actor (through Ray's ``__ray_call__``).

        ``plain`` (Ray's own method) is called as is where timing cannot wrap the call: an
        async actor, or a method given per-call options (``timed`` False).
        """
        info = self._function(cls if cls is not None else handle, label.split(".")[0])
        values = list(args) + list(kwargs.values())
        target = getattr(cls, method, None)
        names = self._names(target, (None, *args), kwargs)[1:] if callable(target) else []
        if len(names) != len(values):
            names = [f"#{i}" for i in range(len(values))]
        record = self._base(label, "actor method", info, names, values, {})
        if not timed or info.is_async or cls is None:
            value_ref, timing_ref = plain.remote(*args, **kwargs), None
        else:
            call = handle.__ray_call__.options(num_returns=2, name=label)
            value_ref, timing_ref = call.remote(worker.timed_method, method, *args, **kwargs)
        self._record(record, value_ref, timing_ref)
        return value_ref

    # -- fetching -----------------------------------------------------------------------------
    def got(self, refs: Iterable[Any], began: float, ended: float) -> None:
        """Note a ``get`` call: when it ran, on which recorded calls, and how much it fetched."""
        refs = list(refs)
        futures = []
        for ref in refs:
            binary = getattr(ref, "binary", None)
            futures.append(self._by_ref.get(binary()) if binary else None)
        record: GetRecord = {
            "start": began,
            "end": ended,
            "futures": futures,
            "bytes": self._fetched_bytes(refs) if len(refs) > 1 else None,
            "in_async": _in_async_code(),
        }
        with self._lock:
            self._gets.append(record)

    def returned(self, refs: list[Any], values: list[Any]) -> None:
        """Remember (by id, never holding them) the values a ``get`` returned."""
        for ref, value in zip(refs, values, strict=False):
            binary = getattr(ref, "binary", None)
            index = self._by_ref.get(binary()) if binary else None
            if index is not None and value is not None:
                self._got[id(value)] = (_fingerprint(value), index)

    @staticmethod
    def _fetched_bytes(refs: list[Any]) -> int | None:
        import ray
        from ray.experimental import get_object_locations

        refs = [r for r in refs if isinstance(r, ray.ObjectRef)]
        try:
            found = get_object_locations(refs, timeout_ms=1000)
        except Exception:  # noqa: BLE001 - sizes are a hint; the get itself succeeded
            return None
        return sum(int(v.get("object_size") or 0) for v in found.values())
