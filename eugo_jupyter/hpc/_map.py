"""``eugo.hpc.map``: apply a function to every item on the cluster, in automatically sized batches.

How ``batch_size="auto"`` works: a first probe task runs one item and measures, on the worker,
how long an item takes; later batches hold enough items for about ``TARGET_S`` of work (growing
at most fourfold per batch while the estimate settles, and re-estimated from every finished
batch). Once the input is exhausted the remaining items are spread over at least two batches per
worker, so the last tasks are short and no worker idles behind a big final batch. At most
``IN_FLIGHT_PER_SLOT`` batches per slot (how many calls the cluster can run at once) are in
flight, and the input is read lazily, so a generator is consumed only as fast as the cluster works.

The function and the ``shared=`` keyword arguments go into the object store once; each worker
process deserializes them once and reuses them for every batch it runs.
"""

from __future__ import annotations

import math
import pickle
import reprlib
import time
import traceback
from collections import OrderedDict, deque
from typing import Any, Callable, Iterable, Mapping, TypeVar

from ..exceptions import MapItemError, OptionsError, SerializationError
from . import _data_location, _distribute, _session, _submissions
from ._options import request_of, validate_options
from ._progress import PROGRESS_AFTER, in_notebook, make_bar

__all__ = ["map"]

R = TypeVar("R")

#: Seconds of work each batch aims for: long enough that a few ms of overhead (more on a busy
#: machine) stays a small share, short enough to balance the load.
TARGET_S = 0.05
#: Batches per slot kept in flight (submitted but not collected).
IN_FLIGHT_PER_SLOT = 3
_MAX_BATCH = 200_000

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60

# Worker side: the (function, shared kwargs) of recent maps, deserialized once per process.
_payloads: OrderedDict[bytes, tuple[Callable[..., Any], dict[str, Any]]] = OrderedDict()


class _Failure:
    """What a batch sends back when the function raised on one of its items."""

    def __init__(self, index: int, item_repr: str, error: BaseException) -> None:
        self.index = index
        self.item_repr = item_repr
        self.kind = type(error).__name__
        self.text = str(error)
        self.trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        try:
            self.error: BaseException | None = pickle.loads(pickle.dumps(error))
        except Exception:  # noqa: BLE001 - an exception that cannot travel is described instead
            self.error = None
        self.error_bytes = pickle.dumps(self.error) if self.error is not None else None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["error"] = None  # travels as bytes, restored in __setstate__
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.error = pickle.loads(self.error_bytes) if self.error_bytes else None


def _payload(box: list[Any]) -> tuple[Callable[..., Any], dict[str, Any]]:
    import ray

    key = box[0].binary()
    hit = _payloads.get(key)
    if hit is None:
        hit = ray.get(box[0])
        _payloads[key] = hit
        while len(_payloads) > 2:
            _payloads.popitem(last=False)
    return hit


def _run_batch(box: list[Any], start: int, items: list[Any]) -> Any:
    """Worker side: apply the function to a batch; returns (results, seconds) or a _Failure."""
    fn, shared = _payload(box)
    results = []
    began = time.perf_counter()
    for offset, item in enumerate(items):
        try:
            results.append(fn(item, **shared) if shared else fn(item))
        except Exception as exc:  # noqa: BLE001 - reported with the item that caused it
            return _Failure(start + offset, _repr.repr(item), exc)
    return results, time.perf_counter() - began


_batch_remote: Any = None


def _unwrap(fn: Any, options: Mapping[str, Any]) -> tuple[Callable[..., Any], str, dict[str, Any]]:
    """The plain function, its label, and the options to submit with (call site wins)."""
    defaults: dict[str, Any] = {}
    if isinstance(fn, _distribute.BoundCall):
        defaults = fn.options_dict
        fn = fn._function
    if isinstance(fn, _distribute.DistributedFunction):
        defaults = {**fn._defaults, **defaults}
        fn = fn._fn
    if isinstance(fn, _distribute.DistributedClass):
        raise TypeError(
            "eugo.hpc.map takes a function, not a distributed class; to use an actor, call its "
            "method on each item, or map a function that builds what it needs."
        )
    if hasattr(fn, "remote"):
        raise TypeError(
            f"{fn!r} is a Ray remote function; pass the plain function (or an "
            "@eugo.hpc.distribute one) to eugo.hpc.map."
        )
    if not callable(fn):
        raise TypeError(f"eugo.hpc.map needs a function as its first argument, not {type(fn).__name__}.")
    label = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    merged = {**defaults, **validate_options(options, "task")}
    if merged.get("num_returns", 1) != 1:
        raise OptionsError("num_returns= is not allowed in eugo.hpc.map: each item returns one result.")
    return fn, label, merged


def auto_batch_size(per_item: float | None, last_size: int) -> int:
    """The next batch size of ``batch_size="auto"``: 1 to probe, then about ``TARGET_S`` of work.

    Shared with ``eugo.hpc.readiness``, which predicts a map from the same rule.

    >>> auto_batch_size(None, 0), auto_batch_size(0.001, 1), auto_batch_size(0.001, 100)
    (1, 4, 50)
    """
    if per_item is None:
        return 1  # the probe
    ideal = TARGET_S / max(per_item, 1e-7)
    return int(max(1, min(ideal, 4 * max(last_size, 1), _MAX_BATCH)))


def final_batch_size(size: int, per_item: float, remaining: int, slots: int) -> int:
    """Once the input is exhausted: spread what remains over two batches per slot at least.

    >>> final_batch_size(50, 0.001, 40, 4)
    6
    """
    floor = max(1, int(TARGET_S / 8 / max(per_item, 1e-7)))
    return min(size, max(floor, math.ceil(remaining / (2 * slots))))


def _slots(request: Mapping[str, float]) -> int:
    """How many calls with this request the cluster can run at once."""
    import ray

    total = ray.cluster_resources()
    fits = [total.get(name, 0.0) / amount for name, amount in request.items() if amount > 0]
    return max(1, int(min(fits))) if fits else max(1, int(total.get("CPU", 1)))


def _first_unpicklable(items: list[Any], start: int) -> SerializationError | None:
    from ray import cloudpickle

    for offset, item in enumerate(items):
        try:
            cloudpickle.dumps(item)
        except Exception as exc:  # noqa: BLE001 - the failure is the answer
            return SerializationError(
                f"Item #{start + offset} ({_repr.repr(item)}) cannot be sent to a worker: "
                f"{type(exc).__name__}: {exc}. Nothing more was submitted. Fix: pass what the "
                "object is made from (a path, a number) and build it inside the function."
            )
    return None


def map(  # noqa: A001 - the name users expect, as in multiprocessing.Pool.map
    fn: Callable[..., R] | Any,
    items: Iterable[Any],
    *,
    batch_size: int | str = "auto",
    ordered: bool = True,
    progress: bool | None = None,
    shared: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[R]:
    """``[fn(item) for item in items]`` on the cluster, in batches sized for low overhead.

    ``fn`` is a plain function or an ``@eugo.hpc.distribute`` one (its options apply; ``options``
    given here win). ``items`` is any iterable; a generator is read lazily. ``batch_size="auto"``
    measures the items and aims for tens of milliseconds per task; an int fixes it. With
    ``ordered=False`` results come in the order they finish. ``shared`` is a dict of keyword
    arguments passed to every call (``fn(item, **shared)``), stored in the object store once
    instead of copied into every task. ``progress``: None shows a bar in notebooks once the map
    passes two seconds, True always, False never.

    An exception in ``fn`` stops the map and raises
    :class:`~eugo_jupyter.exceptions.MapItemError` naming the item's index and value.

    >>> import eugo_jupyter as eugo
    >>> eugo.hpc.map(lambda x: x * x, range(5))                          # doctest: +SKIP
    [0, 1, 4, 9, 16]
    >>> eugo.hpc.map(score, rows, shared={"model": model}, num_cpus=2)   # doctest: +SKIP
    """
    global _batch_remote
    plain, label, opts = _unwrap(fn, options)
    if batch_size != "auto" and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size={batch_size!r} is not allowed: use \"auto\" or a whole number, 1 or more.")
    if shared is not None and not isinstance(shared, Mapping):
        raise TypeError(
            "shared= takes a dict of keyword arguments passed to every call, such as "
            "shared={'model': model}; the function is then called as fn(item, model=model)."
        )
    try:
        source = iter(items)
    except TypeError:
        raise TypeError(f"eugo.hpc.map needs an iterable of items, not {type(items).__name__}.") from None
    total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]

    _session.ensure()
    import ray

    request = request_of(opts, "task")
    submitter = _distribute._Submitter(f"map({label})", opts, "task")
    submitter.check(stacklevel=2)
    if _batch_remote is None:
        _batch_remote = ray.remote(_run_batch)
    remote = _batch_remote.options(**{"name": f"map({label})", **opts})
    try:
        box = [ray.put((plain, dict(shared or {})))]
    except Exception as exc:
        from . import _checks

        explained = _checks.explain_unpicklable(plain, (), dict(shared or {}), exc)
        raise (explained or exc) from exc
    slots = _slots(request)
    limit = max(2, IN_FLIGHT_PER_SLOT * slots)

    buffer: deque[Any] = deque()
    exhausted = False
    next_index = 0
    in_flight: dict[Any, tuple[int, int]] = {}
    chunks: dict[int, list[Any]] = {}
    unordered: list[Any] = []
    per_item: float | None = None
    measured_items = 0
    measured_seconds = 0.0
    last_size = 0
    done = 0
    bar = None
    began = time.monotonic()
    show = progress if progress is not None else in_notebook()

    def refill(want: int) -> None:
        nonlocal exhausted
        while len(buffer) < want and not exhausted:
            try:
                buffer.append(next(source))
            except StopIteration:
                exhausted = True

    def next_size() -> int:
        size = int(batch_size) if batch_size != "auto" else auto_batch_size(per_item, last_size)
        refill(size * (slots + 1))
        if exhausted and batch_size == "auto" and per_item is not None:
            size = final_batch_size(size, per_item, len(buffer), slots)
        return min(size, len(buffer))

    def submit() -> bool:
        nonlocal next_index, last_size
        size = next_size()
        if size == 0:
            return False
        batch = [buffer.popleft() for _ in range(size)]
        recorder = _distribute._recorder
        try:
            if recorder is None:
                ref = remote.remote(box, next_index, batch)
            else:
                ref = recorder.submit(f"map({label})", _run_batch, opts, request, (box, next_index, batch), {})
        except Exception as exc:
            explained = _first_unpicklable(batch, next_index)
            if explained is not None:
                raise explained from exc
            raise
        _submissions.remember(ref, submitter.name, submitter.key)
        in_flight[ref] = (next_index, size)
        next_index += size
        last_size = size
        return True

    def collect(ref: Any) -> None:
        nonlocal per_item, measured_items, measured_seconds, done
        start, size = in_flight.pop(ref)
        try:
            outcome = ray.get(ref)
        except Exception as exc:
            raise MapItemError(
                f"eugo.hpc.map({label}) lost the batch of items #{start} to #{start + size - 1}: "
                f"{type(exc).__name__}: {exc}",
                start,
                None,
            ) from exc
        if isinstance(outcome, _Failure):
            located = _data_location.hint(outcome.error, ref)  # a path missing on its node
            error = MapItemError(
                f"{label} raised {outcome.kind} on item #{outcome.index} ({outcome.item_repr}): "
                f"{outcome.text}\n{located + chr(10) if located else ''}Reproduce it here with "
                f"{label}(item) on that item. Worker traceback:\n{outcome.trace}",
                outcome.index,
                outcome.item_repr,
            )
            raise error from outcome.error
        results, seconds = outcome
        measured_items += size
        measured_seconds += seconds
        per_item = measured_seconds / measured_items
        if ordered:
            chunks[start] = results
        else:
            unordered.extend(results)
        done += size

    try:
        if batch_size == "auto" and submit():
            collect(next(iter(in_flight)))  # the probe: measure before sizing the rest
        while True:
            while len(in_flight) < limit and submit():
                pass
            if not in_flight:
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.25 if show else None)
            for ref in ready:
                collect(ref)
            if show and bar is None and (progress or time.monotonic() - began >= PROGRESS_AFTER):
                bar = make_bar(total, done, f"eugo.hpc.map({label})")  # type: ignore[arg-type]
                bar.unit = "item"
            elif bar is not None:
                bar.update(done - bar.n)
    except BaseException:
        for ref in in_flight:
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - best effort: the error that stopped us matters
                pass
        raise
    finally:
        if bar is not None:
            bar.update(done - bar.n)
            bar.close()
    if not ordered:
        return unordered
    out: list[Any] = []
    for start in sorted(chunks):
        out.extend(chunks[start])
    return out
