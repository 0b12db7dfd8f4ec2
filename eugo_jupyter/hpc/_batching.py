"""The batching engine shared by ``eugo.hpc.map`` and the pandas partitions.

A *unit* is what one task runs: a batch of items for ``map``, one partition for the ``.eugo``
accessors. The engine owns what both need and nothing else:

- the function and its ``shared=`` keyword arguments travel once per call (:meth:`Engine.store`:
  inside each task when small, else in the object store), and each worker process
  deserializes them once (:func:`fetch`);
- units are submitted as Ray tasks through the same path as any call (a running
  ``eugo.hpc.profile()`` records each of them, and ``waiting()`` / ``get`` diagnoses name them);
- a bounded number of units is in flight, so a lazy input is read only as fast as the cluster
  works; results come back keyed by the unit's position;
- a failed unit stops the run and raises the caller's error; the units already in flight (at
  most ``IN_FLIGHT_PER_SLOT`` per slot) are let go, not cancelled: they finish on the cluster
  and their results are dropped (``map`` first waits a moment for those before the failing
  unit, :meth:`Engine.finish_before`). ``ray.cancel`` of a task that completes at that moment
  aborts the driver in Ray 2.60 (``task_manager.cc: Check failed: it !=
  submissible_tasks_.end() Tried to complete task that was not pending``: the cancel fails
  the task while its reply is on the way, with any ``force``/``recursive``), which in a
  notebook is a dead kernel. A progress bar appears in a notebook once a run passes 2 s.

Why small values travel inside the tasks: an object this process put into the store is owned
by it and pinned on its own node. When the head announces that node dead (a ``ray stop``, a
node whose agent failed, a cluster killed process by process), Ray 2.60 writes an error
object for each such object still in use into that node's store, which is gone with the node,
and its plasma client then ends the whole process (``connection.cc: The connection to the
plasma store is failed. Terminate the process``): a dead kernel before ``ClusterError`` could
be said. A function and its ``shared=`` below :data:`INLINE_BYTES` leave nothing in the store.

*Which* units to run is the caller's business (a :class:`Planner`): ``map`` sizes batches as it
goes from the measured per-item time, the accessors plan partitions from a timed sample.

>>> from eugo_jupyter.hpc._batching import unit_work
>>> unit_work(lambda fn, shared, unit: [fn(x) for x in unit], lambda x: x + 1, {}, [1, 2])[0]
[2, 3]
"""

from __future__ import annotations

import os
import pickle
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from .. import _hooks
from ..exceptions import ClusterError
from . import _distribute, _output, _session, _submissions, _watch
from ._failure import Failure
from ._options import request_of
from ._progress import PROGRESS_AFTER, in_notebook, make_bar

__all__ = ["Engine", "Failure", "Planner", "Unit", "fetch", "slots", "unit_work"]

#: Units per slot kept in flight (submitted but not collected): enough that a worker finishing
#: one finds the next already queued on its node.
IN_FLIGHT_PER_SLOT = 3
#: Pickled bytes up to which a value travels inside each task instead of the object store
#: (below Ray's own 100 KiB inline limit, above which Ray would put it in the store itself).
INLINE_BYTES = 64 * 1024

# Worker side: recently used payloads and data frames, deserialized once per worker process.
# Two entries: the current call plus the one before it (a notebook rarely interleaves more).
_cache: OrderedDict[bytes, Any] = OrderedDict()
_CACHE_SIZE = 2


def fetch(box: list[Any]) -> Any:
    """Worker side: the value a box carries (see :meth:`Engine.store`), deserialized once per
    process.

    A box is ``[ref]``, a value in the object store (the ref travels inside a list so that Ray
    passes the ref itself instead of resolving it for every task), or ``[key, pickled]``, a
    small value inside the task. Either way large frames and functions are read once per
    worker, not per unit.
    """
    import ray

    inline = len(box) == 2
    key = box[0] if inline else box[0].binary()
    hit = _cache.get(key)
    if hit is None:
        hit = pickle.loads(box[1]) if inline else ray.get(box[0])
        _cache[key] = hit
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return hit


#: A unit's worker-side body: ``body(fn, shared, unit) -> results``; it returns a
#: :class:`Failure` instead of raising when it can say which item or row failed.
Body = Callable[[Callable[..., Any], dict[str, Any], Any], Any]


def unit_work(body: Body, fn: Callable[..., Any], shared: dict[str, Any], unit: Any) -> Any:
    """Run one unit; ``(results, seconds)`` or a :class:`Failure`. Used by workers and locally."""
    began = time.perf_counter()
    results = body(fn, shared, unit)
    if isinstance(results, Failure):
        return results
    return results, time.perf_counter() - began


def _execute(body: Body, payload: list[Any], unit: Any) -> Any:
    """Worker side: one task of the engine."""
    fn, shared = fetch(payload)
    return unit_work(body, fn, shared, unit)


def slots(request: Mapping[str, float]) -> int:
    """How many calls with this request the cluster can run at once."""
    import ray

    total = ray.cluster_resources()
    fits = [total.get(name, 0.0) / amount for name, amount in request.items() if amount > 0]
    return max(1, int(min(fits))) if fits else max(1, int(total.get("CPU", 1)))


class Unit:
    """One unit to submit: its position in the output (``key``), its size, what the body gets."""

    __slots__ = ("began", "key", "ref", "size", "work")

    def __init__(self, key: int, size: int, work: Any) -> None:
        self.key = key
        self.size = size
        self.work = work
        self.ref: Any = None  # its future once submitted (to ask Ray where it ran)
        self.began = 0.0  # when it was (last) submitted, for backups


class Planner(Protocol):
    """Decides the units: the engine asks for the next one and reports each finished one."""

    def next_unit(self) -> Unit | None:
        """The next unit to submit, or None when there is none *right now*."""

    def finished(self, unit: Unit, seconds: float) -> None:
        """A unit came back after running ``seconds`` on its worker."""

    def waiting_on_results(self) -> bool:
        """True while the planner needs a finished unit before it can plan more (a probe)."""

    # Optional: ``lost(unit, error) -> bool``, True when the planner takes a lost unit back to
    # run again (``map`` with ``timeout=`` splits a batch whose worker had to be replaced).


class Engine:
    """Submits a planner's units as tasks and gathers their results by key.

    >>> engine = Engine("map(square)", body, square, {}, options={})          # doctest: +SKIP
    >>> results = engine.run(planner, on_failure=to_error)                    # doctest: +SKIP
    """

    _remote: Any = None  # the one ray.remote of _execute, built on first use

    def __init__(
        self,
        name: str,
        body: Body,
        fn: object,  # handed to body with shared, never called here: a function or pandas' Op
        shared: Mapping[str, Any] | None,
        options: dict[str, Any],
        progress: bool | None = None,
        total: int | None = None,
        unit_name: str = "item",
        backups: bool = False,
    ) -> None:
        import ray

        from ._backups import Straggling

        _session.ensure()
        self.name = name
        self.body = body
        self.options = options
        self.request = request_of(options, "task")
        self.submitter = _distribute._Submitter(name, options, "task")
        self.total = total
        self.unit_name = unit_name
        self.show = progress if progress is not None else in_notebook()
        self.force_bar = bool(progress)
        if Engine._remote is None:
            Engine._remote = ray.remote(_output.prepare(_execute, "_execute"))
        # The units are independent and meant for every slot: ask Ray to spread them. Its
        # default (hybrid) policy prefers the submitting node, and right after a burst of tasks
        # the head's view of the other nodes still shows them busy, so whole runs stayed on the
        # head of a two-node cluster at the serial time. A caller's own strategy wins.
        spread = {} if "scheduling_strategy" in options else {"scheduling_strategy": "SPREAD"}
        self.remote = Engine._remote.options(**{"name": name, **spread, **options})
        self.payload = self.store((fn, dict(shared or {})), fn, shared)
        self.slots = slots(self.request)
        # The loop state, one attribute per concern (the run is a few named steps below).
        self.in_flight: dict[Any, Unit] = {}  # future -> the unit it computes
        self.results: dict[int, Any] = {}  # unit key -> its results
        self.done = 0  # items (or rows) finished, for the progress bar
        self.failed = 0  # items that failed and were kept (errors="collect"), for the bar
        self.retried = 0  # items tried again (retries=), for the bar
        self.bar: Any = None
        self.began = time.monotonic()
        self.watch: _watch.Watch | None = None  # whether the cluster is still there (_wait)
        # backups=True: the refs of each unit in flight (a copy makes two), and the rule.
        self.backups = Straggling(self.slots) if backups else None
        self.refs_of: dict[Unit, list[Any]] = {}

    def check(self, stacklevel: int) -> None:
        """Warn at the caller's line when no node can run the request."""
        self.submitter.check(stacklevel + 1)

    def store(
        self, value: Any, fn: Any = None, shared: Mapping[str, Any] | None = None
    ) -> list[Any]:
        """The box that tasks carry to reach ``value`` (:func:`fetch` opens it): the value
        pickled when it takes at most :data:`INLINE_BYTES`, else put into the object store once.

        A small value then leaves nothing in the store that a dying node could take this
        process down with (see the module's docstring).
        """
        import ray

        from ._serialized import inline_bytes

        pickled = inline_bytes(value, INLINE_BYTES)
        if pickled is not None:
            return [os.urandom(16), pickled]  # the key: this call's, for the workers' cache
        try:
            return [ray.put(value)]
        except Exception as exc:
            if fn is None:
                raise
            from . import _checks

            explained = _checks.explain_unpicklable(fn, (), dict(shared or {}), exc)
            raise (explained or exc) from exc

    # -- the run, in named steps -----------------------------------------------------------
    def run(
        self,
        planner: Planner,
        on_failure: Callable[[Failure, Unit], BaseException],
        on_lost: Callable[[BaseException, Unit], BaseException],
        on_unsendable: Callable[[BaseException, Unit], BaseException | None] | None = None,
    ) -> dict[int, Any]:
        """Run every unit the planner gives; ``{unit.key: results}``.

        ``on_failure`` turns a unit's :class:`Failure` into the error to raise, ``on_lost`` a
        lost task (worker died, cancelled), ``on_unsendable`` a unit that cannot be pickled.
        """
        for unit, results in self.stream(planner, on_failure, on_lost, on_unsendable):
            self.results[unit.key] = results
        return self.results

    def stream(
        self,
        planner: Planner,
        on_failure: Callable[[Failure, Unit], BaseException],
        on_lost: Callable[[BaseException, Unit], Any],
        on_unsendable: Callable[[BaseException, Unit], BaseException | None] | None = None,
        backlog: Callable[[], int] = lambda: 0,
    ) -> Iterator[tuple[Unit, Any]]:
        """Each finished unit with its results, as they come back: the one place every unit's
        outcome passes (``run`` keeps them all, ``imap`` lets each go once yielded).

        ``backlog()`` is how many finished units the consumer still holds: they count against
        the units in flight, so a slow consumer (or an ordered one waiting on a slow first
        unit) stops the submitting instead of piling up results. ``on_lost`` returning None
        means the planner took the unit back (:meth:`Planner.lost`) and it runs again; any
        other value that is not an exception stands as the unit's results (a caller that keeps
        each item's failure instead of stopping).
        """
        self.on_failure, self.on_lost, self.on_unsendable = on_failure, on_lost, on_unsendable
        limit = max(2, IN_FLIGHT_PER_SLOT * self.slots)
        try:
            while True:
                exhausted = False
                while len(self.in_flight) + backlog() < limit and not planner.waiting_on_results():
                    unit = planner.next_unit()
                    if unit is None:
                        exhausted = True
                        break
                    self._submit(unit)
                if exhausted and self.backups is not None:
                    for unit in self.backups.due(self.refs_of, time.monotonic()):
                        self._submit(unit)  # a copy: the first result back wins
                if not self.in_flight:
                    break
                for ref in self._wait():
                    collected = self._collect(ref)
                    if collected is None:
                        continue  # lost, and taken back by the planner
                    unit, results, seconds = collected
                    planner.finished(unit, seconds)
                    yield unit, results
                self._tick()
        except BaseException:  # GeneratorExit too: a consumer that stopped early
            self._let_go()
            raise
        finally:
            self._close_bar()

    def _submit(self, unit: Unit) -> None:
        args = (self.body, self.payload, unit.work)
        recorder = _hooks.recorder
        try:
            if recorder is None:
                ref = self.remote.remote(*args)
            else:
                ref = recorder.submit(self.name, _execute, self.options, self.request, args, {})
        except Exception as exc:
            explained = self.on_unsendable(exc, unit) if self.on_unsendable else None
            if explained is not None:
                raise explained from exc
            raise
        _submissions.remember(ref, self.submitter.name, self.submitter.key)
        unit.ref = ref
        unit.began = time.monotonic()
        self.in_flight[ref] = unit
        if self.backups is not None:
            self.refs_of.setdefault(unit, []).append(ref)

    def _wait(self) -> list[Any]:
        import ray

        # With a bar to refresh, wake up now and then; on a cluster, every STEP seconds to ask
        # whether its head is still there (Ray would wait on, then end the kernel); otherwise
        # block until a unit is done.
        if self.watch is None:
            self.watch = _watch.Watch()
        timeout = 0.25 if self.show else None
        if self.backups is not None:
            timeout = 0.1  # look for stragglers while a unit runs
        if self.watch.address is not None:
            timeout = min(timeout or _watch.STEP, _watch.STEP)
        ready, _ = ray.wait(list(self.in_flight), num_returns=1, timeout=timeout)
        if not ready:
            self.watch.check()
        return ready

    def _collect(self, ref: Any) -> tuple[Unit, Any, float] | None:
        unit = self.in_flight.pop(ref)
        others = [r for r in self.refs_of.pop(unit, []) if r != ref]
        try:
            # In steps on a cluster: a result lost with its node is waited on (Ray tries to
            # rebuild it), and a dead cluster must raise ClusterError instead.
            outcome = _watch.get_watching(ref)
        except ClusterError:
            raise  # the whole cluster is gone, not this unit: said as eugo.hpc.get says it
        except Exception as exc:
            if others:
                self.refs_of[unit] = others  # its copy runs on: that one answers for it
                return None
            answer = self.on_lost(exc, unit)
            if answer is None:
                return None  # taken back by the planner
            if isinstance(answer, BaseException):
                raise answer from exc
            outcome = (answer, 0.0)  # the unit's results, as the caller says them
        if isinstance(outcome, Failure):
            raise self.on_failure(outcome, unit) from outcome.error
        results, seconds = outcome
        for other in others:  # the first result won: let go of the copy, never cancel it
            self.in_flight.pop(other, None)
        if self.backups is not None:
            self.backups.finished(seconds)
        self.done += unit.size
        return unit, results, seconds

    def finish_before(self, key: int, within: float) -> Iterator[tuple[Unit, Any]]:
        """The units in flight that come before ``key`` in the output, each with its outcome,
        in key order: waited for up to ``within`` seconds in all (those still running then
        are let go). A run that stops at a failure uses it to keep every result before the
        failing item, as a loop over the items would have, and to raise the first failure in
        input order."""
        import ray

        deadline = time.monotonic() + within
        earlier = [ref for ref, unit in self.in_flight.items() if unit.key < key]
        for ref in sorted(earlier, key=lambda ref: self.in_flight[ref].key):
            if ref not in self.in_flight:
                continue  # a copy of a unit (backups=True) that already answered
            left = deadline - time.monotonic()
            if left <= 0 or not ray.wait([ref], num_returns=1, timeout=left)[0]:
                return
            collected = self._collect(ref)
            if collected is not None:
                yield collected[0], collected[1]

    def _tick(self) -> None:
        if not self.show:
            return
        if self.bar is None:
            if self.force_bar or time.monotonic() - self.began >= PROGRESS_AFTER:
                self.bar = make_bar(self.total, self.done, self.name)  # type: ignore[arg-type]
                self.bar.unit = self.unit_name
        else:
            self._update_bar()

    def _update_bar(self) -> None:
        if self.failed or self.retried:
            self.bar.set_postfix(failed=self.failed, retried=self.retried, refresh=False)
        self.bar.update(self.done - self.bar.n)

    def _close_bar(self) -> None:
        if self.bar is not None:
            self._update_bar()
            self.bar.close()

    def _let_go(self) -> None:
        """The run failed: drop the units in flight, never ``ray.cancel`` them.

        Cancelling siblings that are finishing races Ray's own completion of them and aborts
        the whole process (see the module's docstring); let go of, they finish (at most
        ``IN_FLIGHT_PER_SLOT`` per slot) and Ray frees their results once nothing holds them.
        """
        self.in_flight.clear()
