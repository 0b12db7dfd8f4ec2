"""``eugo.hpc.readiness``: measure a few items on the cluster and predict whether ``map`` pays.

Steps, each small: resolve the function and options as ``map`` does; check that the function
and the items pickle; check that the request can run at all; run a sample of items split over
the slots, at once (timing each, sizing results, and, when GPUs are requested, asking the GPU
audit's measurement whether the function touched one); measure what ``map`` itself costs on this
cluster (its setup, each batch) with small maps of no-op calls, and each byte shipped as map
ships it (into the object store from the notebook, idle and while the sample keeps the slots
busy, and out of it on the workers); look for file paths among the items on every node; then
hand the numbers to :mod:`.model` for the prediction, the verdict and the checklist.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ... import _hooks
from .. import _checks, _data_location, _session
from .._batching import slots as _slots
from .._map import _unwrap, check_batch_size
from .._options import optimize_mode, request_of
from .._serialized import pickle_problem
from .model import Check, Measurements, predict, timing_checks
from .report import ReadinessReport

__all__ = ["readiness"]

#: No-op items (one per batch) in the map that measures the cost of each batch.
OVERHEAD_BATCHES = 24
#: Times each small measuring map runs; the median counts (the machine may be busy).
REPEATS = 3
#: Times at most the sampled items are put into the object store, as one batch, while the sample
#: runs on every slot (to measure shipping on a busy node; only when items are large).
BUSY_PUTS = 5
#: Sampled items are called again until each slot has spent this long (at most SUSTAIN_CALLS
#: calls): about a batch's worth of work, so the per-item time holds over a batch.
SUSTAIN_S = 0.2
SUSTAIN_CALLS = 100_000
#: Items under this serialized size make the cost per byte irrelevant: it is not measured.
BYTES_WORTH_MEASURING = 64 << 10


def _noop(*_: Any) -> None:
    return None


def _sample(
    fn: Callable[..., Any], shared: dict[str, Any], box: list[Any], gpus: float
) -> dict[str, Any]:
    """Worker side: read the items out of the object store (timed, as a batch's arguments are
    read before its items run), time each item, size each result, measure one item's memory,
    check GPU use.

    ``box`` holds the items twice, as two objects put the same way. The first, read and let go,
    pays what only a process's first reads pay (the connection to the store, a first pull from
    the notebook's node, its memory growing to a batch's size), as map's first batch on a
    worker does. The second is timed: a new object read for the first time, as each later batch
    of map's is (pulled from the notebook's node when the worker is on another). Reading one
    object a second time would cost a fraction of that (measured: a third to a seventh on a
    busy two-node cluster), and a first read in a fresh process several times more.
    """
    import pickle
    import tracemalloc

    import ray
    from ray import cloudpickle

    warm = ray.get(box[1])
    del warm
    clock = time.perf_counter()
    items = ray.get(box[0])
    read_s = time.perf_counter() - clock
    times, sizes = [], []
    fn(items[0], **shared)  # warm-up: imports and caches a worker pays once, not per item
    began = time.time()
    for item in items:
        clock = time.perf_counter()
        value = fn(item, **shared)
        times.append(time.perf_counter() - clock)
        try:
            sizes.append(len(cloudpickle.dumps(value)))
        except Exception:  # noqa: BLE001 - a result that cannot travel would fail map too
            sizes.append(len(pickle.dumps(repr(value))))
    # Short items: go on calling them until a batch's worth of time has passed, so that the
    # pauses a busy machine inflicts now and then (too rare to hit 8 short calls) weigh in the
    # mean as much as they will over map's batches.
    calls, spent = len(times), sum(times)
    while spent < SUSTAIN_S and calls < SUSTAIN_CALLS:
        clock = time.perf_counter()
        for item in items:
            fn(item, **shared)
        spent += time.perf_counter() - clock
        calls += len(items)
    # memory in a second pass, so tracemalloc's slowdown stays out of the timings
    tracemalloc.start()
    try:
        fn(items[0], **shared)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    audit = None
    if gpus > 0:
        audit = _hooks.measure_gpu_use(getattr(fn, "__qualname__", "fn"), gpus, began, sum(times))
    return {
        "times": times,
        "read_s": read_s,
        "calls": calls,
        "spent": spent,
        "result_bytes": sizes,
        "peak": peak,
        "node": ray.get_runtime_context().get_node_id(),
        "audit": audit,
    }


def _pick(items: list[Any], count: int) -> list[Any]:
    """Items spread over the input (first, last and between), so skew shows in the spread."""
    if len(items) <= count:
        return list(items)
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


class _Readiness:
    """One readiness measurement: the steps share the function, options and items."""

    def __init__(self, fn: Any, items: list[Any], batch_size: int | str, shared: dict[str, Any],
                 sample: int, options: Mapping[str, Any]) -> None:  # fmt: skip
        self.plain, self.label, opts = _unwrap(fn, options)
        self.opts, self.optimize = optimize_mode(opts)
        self.items = items
        self.batch_size = batch_size
        self.shared = shared
        self.sample = max(1, sample)
        self.request = request_of(self.opts, "task")
        self.checks: list[Check] = []
        self.arg_bytes = 0.0  # median serialized size of a sampled item, set by measure()

    def pickles(self) -> str | None:
        """The first thing that cannot be pickled, as a sentence; records the check."""
        problem = pickle_problem((self.plain, self.shared))
        if problem is not None:
            explained = _checks.explain_unpicklable(self.plain, (), self.shared, problem)
            detail = str(explained or f"{self.label} cannot be pickled: {problem}")
            return self._fail_pickle(detail)
        for index, item in enumerate(self.items[: max(self.sample, 100)]):
            problem = pickle_problem(item)
            if problem is not None:
                return self._fail_pickle(
                    f"item #{index} ({type(item).__name__}) cannot be pickled: {problem}"
                )
        self.checks.append(Check("arguments can be pickled", True, "the function and items pickle"))
        return None

    def _fail_pickle(self, detail: str) -> str:
        self.checks.append(Check(
            "arguments can be pickled", False, detail,
            "pass what the object is made from (a path, a number) and build it inside the "
            "function",
        ))  # fmt: skip
        return detail

    def feasible(self) -> str | None:
        snap = _checks.current_snapshot(max_age=0)
        never = _checks.infeasible_message(self.request, snap) if snap else None
        if never:
            reason, _, fix = never.partition(". Fix: ")
            self.checks.append(Check("the request can run", False, reason, fix.rstrip(".")))
            return never
        self.checks.append(Check("the request can run", True, "a node can run this request"))
        return None

    def run_sample(self) -> dict[str, Any]:
        """The sample, split over the slots and run at once: items are timed while every slot
        is busy, as they will be under ``map`` (on a shared machine that is slower than one item
        alone), and every slot's worker is started, as ``map`` will find them."""
        import ray
        from ray import cloudpickle

        chosen = _pick(self.items, self.sample)
        count = min(_slots(self.request), len(chosen))
        groups = [chosen[i::count] for i in range(count)]  # each spread over the input too
        # spread as map spreads its batches: on a cluster, reads then pull from other nodes too
        spread = {} if "scheduling_strategy" in self.opts else {"scheduling_strategy": "SPREAD"}
        name = f"readiness({self.label})"
        remote = ray.remote(_sample).options(**{"name": name, **spread, **self.opts})
        gpus = self.request.get("GPU", 0)
        # the items go through the object store as a batch's arguments do; the workers time
        # reading them, the notebook times putting a batch of them while the slots are busy
        boxes = [[ray.put(g), ray.put(g)] for g in groups]  # timed, and the warm-up (_sample)
        futures = [remote.remote(self.plain, self.shared, box, gpus) for box in boxes]
        heavy = self.arg_bytes >= BYTES_WORTH_MEASURING
        busy = self._puts((0, chosen), BUSY_PUTS, futures) if heavy else []
        found = ray.get(futures)
        first = found[0]
        first["busy_put_s"] = busy
        # what the workers read: each group pickled alone (a shared object once per group)
        first["read_bytes"] = sum(len(cloudpickle.dumps(g)) for g in groups) if heavy else 0
        # and with the slots idle (after the first puts, as map finds the store: warm)
        first["put_s"] = self._puts((0, chosen), REPEATS) if heavy else []
        for other in found[1:]:
            first["times"] += other["times"]
            first["read_s"] += other["read_s"]
            first["calls"] += other["calls"]
            first["spent"] += other["spent"]
            first["result_bytes"] += other["result_bytes"]
            first["peak"] = max(first["peak"], other["peak"])
        return first

    def _timed_map(self, items: list[Any]) -> float:
        """Seconds for ``map`` of a no-op over ``items``, one per batch: map's own costs only."""
        from .._imap import map as map_

        clock = time.perf_counter()
        map_(_noop, items, batch_size=1, progress=False, **self.opts)
        return time.perf_counter() - clock

    def overhead(self) -> tuple[float, float]:
        """(each further batch, a whole one-batch map) with this request, measured through map.

        Measured through ``map`` itself, not with bare tasks: a batch costs the engine's
        submission, Ray's dispatch and the collection loop, and a map its setup.
        """
        self._timed_map([0])  # warm a worker and the payload path
        start = statistics.median(self._timed_map([0]) for _ in range(REPEATS))
        many = statistics.median(
            self._timed_map(list(range(OVERHEAD_BATCHES))) for _ in range(REPEATS)
        )
        return max(0.0, (many - start) / (OVERHEAD_BATCHES - 1)), start

    @staticmethod
    def _puts(batch: Any, count: int, futures: list[Any] | None = None) -> list[float]:
        """Seconds to put ``batch`` into the object store, each of ``count`` times (while none
        of ``futures`` is done, when given): shipping as ``map`` ships a batch's arguments."""
        import ray

        times: list[float] = []
        while len(times) < count:
            if futures and ray.wait(futures, num_returns=1, timeout=0)[0]:
                break  # a slot went idle: what follows is not a busy node
            clock = time.perf_counter()
            ref = ray.put(batch)
            times.append(time.perf_counter() - clock)
            del ref
        return times

    def gpu_check(self, audit: Mapping[str, Any] | None) -> None:
        if not self.request.get("GPU"):
            return
        used = audit.get("used") if audit else None
        if used is False:
            self.checks.append(Check(
                "the GPU requested is used", False,
                f"{self.label} asked for {self.request['GPU']:g} GPU and never used it "
                f"({audit['evidence'] if audit else ''})",
                "drop num_gpus (the GPU audit, eugo.gpu.audit(), confirms over a whole run), or "
                "move the work onto the device",
            ))  # fmt: skip
        else:
            detail = "the function used its GPU" if used else "could not tell if it used the GPU"
            self.checks.append(Check("the GPU requested is used", True if used else None, detail))

    def memory_of_nodes(self) -> tuple[float, int]:
        """The smallest memory among nodes that can run the request, and its slots."""
        snap = _checks.current_snapshot(max_age=0)
        best: tuple[float, int] | None = None
        for node in snap.alive_nodes if snap else []:
            fits = [node.total.get(k, 0.0) / v for k, v in self.request.items() if v > 0]
            slots = int(min(fits)) if fits else int(node.total.get("CPU", 1))
            memory = node.total.get("memory", 0.0)
            if slots >= 1 and memory and (best is None or memory < best[0]):
                best = (memory, slots)
        return best or (0.0, 1)

    def measure(self) -> ReadinessReport:
        from ray import cloudpickle

        if self.pickles() or self.feasible() or self.paths_fail():
            return self._blocked()
        sampled = _pick(self.items, self.sample)
        self.arg_bytes = statistics.median(len(cloudpickle.dumps(i)) for i in sampled)
        # in a batch, what items share (one big object referenced by all) is pickled once:
        # a batch of k items ships about shared + k x shipped bytes
        one, whole = len(cloudpickle.dumps(sampled[:1])), len(cloudpickle.dumps(sampled))
        shipped = (whole - one) / (len(sampled) - 1) if len(sampled) > 1 else float(one)
        shared_bytes = max(0.0, one - shipped)
        try:
            found = self.run_sample()
        except Exception as exc:  # noqa: BLE001 - the function failing on a worker is the answer
            cause = getattr(exc, "cause", None) or exc
            self.checks.append(Check(
                "the function runs on a worker", False,
                f"{self.label} raised {type(cause).__name__}: {cause}",
                f"call {self.label}(item) here on the first items and fix the error",
            ))  # fmt: skip
            return self._blocked()
        per_byte, busy_per_byte, worker_per_byte = 0.0, None, 0.0
        if self.arg_bytes >= BYTES_WORTH_MEASURING:  # below, fixed costs would pose as bytes
            per_byte = statistics.median(found["put_s"]) / whole
            busy = found["busy_put_s"]
            busy_per_byte = statistics.median(busy) / whole if busy else None
            worker_per_byte = found["read_s"] / max(1, found["read_bytes"])
        result_bytes = statistics.median(found["result_bytes"])
        overhead, start = self.overhead()
        memory, node_slots = self.memory_of_nodes()
        m = Measurements(
            function=self.label,
            items=len(self.items),
            sampled=len(found["times"]),
            per_item_s=found["times"],
            sustained_per_item_s=found["spent"] / found["calls"],
            arg_bytes=float(self.arg_bytes),
            result_bytes=float(result_bytes),
            overhead_s=overhead,
            latency_s=start,
            per_byte_s=per_byte,
            busy_per_byte_s=busy_per_byte,
            worker_per_byte_s=worker_per_byte,
            slots=_slots(self.request),
            request=dict(self.request),
            batch_size=self.batch_size,
            node=found["node"],
            node_memory=memory,
            node_slots=node_slots,
            peak_item_bytes=float(found["peak"]),
            start_s=start,
            shipped_bytes=shipped,
            batch_shared_bytes=shared_bytes,
        )
        prediction = predict(m)
        self.gpu_check(found["audit"])
        self.checks.extend(timing_checks(m, prediction))
        from . import advice as _advice  # would optimize=True pay more than distributing?

        advice = _advice.compile_check(self.plain, sampled[0], self.shared, m, prediction,
                                       self.optimize)  # fmt: skip
        if advice is not None:
            self.checks.append(advice)
        return ReadinessReport(m, prediction, self.checks)

    def paths_fail(self) -> bool:
        check = Check(*_data_location.paths_check(self.items[: max(self.sample, 100)]))
        self.checks.append(check)
        return check.ok is False

    def _blocked(self) -> ReadinessReport:
        last = self.checks[-1]
        return ReadinessReport(None, None, self.checks, blocking=f"{last.detail}; fix: {last.fix}")


def readiness(
    fn: Callable[..., Any] | Any,
    items: Iterable[Any],
    *,
    batch_size: int | str = "auto",
    shared: Mapping[str, Any] | None = None,
    sample: int = 8,
    **options: Any,
) -> ReadinessReport:
    """Is ``eugo.hpc.map(fn, items, ...)`` worth running on this cluster? A measured prediction.

    Takes what ``map`` takes (``batch_size=1`` asks about one task per item; ``num_cpus=``,
    ``num_gpus=`` and the other options set the request). Runs ``sample`` items, spread over
    the input, in one task on a worker, measures what map costs per batch on this cluster (small
    maps of no-op calls), and returns a :class:`ReadinessReport`: per-item time, sizes, the
    batches ``map`` would choose, predicted times serially and on the cluster, a one-sentence
    ``verdict`` and a checklist with fixes
    (pickling, item size, argument size, GPU use, memory, paths the workers cannot see).
    ``items`` is read into a list (a generator is consumed).

    >>> import eugo_jupyter as eugo
    >>> report = eugo.hpc.readiness(resample, tiles)      # doctest: +SKIP
    >>> report.verdict                                     # doctest: +SKIP
    'worth it: about 7.4x faster on 8 slots'
    >>> report.as_dict()["prediction"]["speedup"]          # doctest: +SKIP
    7.41
    """
    check_batch_size(batch_size)
    if shared is not None and not isinstance(shared, Mapping):
        raise TypeError("shared= takes a dict of keyword arguments passed to every call.")
    try:
        listed = list(items)
    except TypeError:
        raise TypeError(
            f"eugo.hpc.readiness needs an iterable of items, not {type(items).__name__}."
        ) from None
    if not listed:
        raise ValueError("eugo.hpc.readiness needs at least one item to measure.")
    _session.ensure()
    return _Readiness(fn, listed, batch_size, dict(shared or {}), sample, options).measure()
