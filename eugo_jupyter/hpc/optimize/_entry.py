"""The call path of an optimized function: decide, compile, verify, then run the compiled one.

:class:`Optimized` is what is shipped to a worker instead of the plain function (it pickles as
the plain function plus its settings). In each process it finds its :class:`Entry` by cache key
once; the entry goes through the steps:

1. ``new``: the first calls run the plain function (timed) on the real arguments, a copy of
   the arguments having been taken first. When the number of calls is known (a map), calls are
   sampled until ``SAMPLE_S`` of work or ``SAMPLE_CALLS`` calls (a map's first item may be its
   cheapest). Static reasons (a generator), a missing numba, arguments numba cannot type, and
   the break-even (:mod:`._decide`) may keep Python here; one kept for its cost alone is
   decided again when another call site (a new map, a task) brings a different count, or when
   a call is far costlier than the calls it was decided on (:class:`._decide.PerCost`).
2. compile: the ladder of :mod:`._compile` (parallel when the call holds more than one CPU,
   then serial), which loads a version another process saved in the node cache instead of
   compiling it (:mod:`._nodecache`); a failure keeps Python with the line and the fix
   (:mod:`._explain`).
3. ``verifying``: the first ``VERIFY_CALLS`` calls run both versions, the compiled one on the
   copy, and compare results and in-place changes (:mod:`._verify`). The plain result is the
   one returned. A difference drops the compiled version for good (a parallel one falls back
   to serial first); a compiled version slower than Python on every verified call is dropped
   for calls of about that cost: a call far costlier uses it (``python`` with a ``PerCost``).
4. ``compiled``: calls go straight to numba's dispatcher (:meth:`Optimized.__call__`). Numba
   calls back (its ``_compile_for_args``, before running anything) on argument types it has no
   version for: the new version is compiled, run on a copy and checked against Python, whose
   answer is returned (:meth:`Entry.new_types`). A call the compiled version raises on reruns in
   Python and is counted, unless the function changes its arguments in place: then the error
   is raised, with a note, as the arguments may already be changed.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from .._output import muted
from . import (
    _candidates,
    _compile,
    _decide,
    _explain,
    _nodecache,
    _prewarm,
    _threads,
    _verify,
)
from ._record import SAMPLE_CALLS, SAMPLE_S, State, _numba_ready
from ._verifying import Verifying

__all__ = ["Entry"]


class Entry(Verifying):
    """One function (one cache key) in one process: the steps from the first call on."""

    # -- the steps ----------------------------------------------------------------------------
    def call(self, args: tuple, kwargs: dict) -> Any:
        self.calls += 1
        state = self.state
        if state == State.COMPILED:
            return self._compiled_call(args, kwargs)
        if state == State.PREPARING:
            preparing = self.preparing
            assert preparing is not None
            if not preparing.done() or not self._ready(preparing):
                self.preparing_calls += 1
                return self.fn(*args, **kwargs)
            return self._verifying_call(args, kwargs)
        if state == State.PYTHON:
            if self.per_cost is None:
                return self.fn(*args, **kwargs)
            return self._python_call(self.per_cost, args, kwargs)
        return self._verifying_call(args, kwargs)

    def _python_call(self, per_cost: _decide.PerCost, args: tuple, kwargs: dict) -> Any:
        """Kept Python on cost: a call whose arguments predict it far costlier than the calls
        the decision rested on decides again before it runs; one that took far longer, after."""
        size = _decide.size_of(args, kwargs)
        factor = per_cost.far(size=size) if size > per_cost.size * _decide.FAR else None
        if factor is not None:
            self._decide_again(per_cost, factor, self.calls)
            self.calls -= 1  # counted again by call()
            return self.call(args, kwargs)
        began = time.perf_counter()
        result = self.fn(*args, **kwargs)
        took = time.perf_counter() - began
        if took < per_cost.floor_s:  # the common case: about the cost decided on
            per_cost.far_calls = 0
            return result
        factor = per_cost.far(plain_s=took)
        per_cost.far_calls += 1
        if factor is not None and per_cost.far_calls >= _decide.FAR_CALLS:
            self._decide_again(per_cost, factor, self.calls + 1)
        return result

    def _decide_again(self, per_cost: _decide.PerCost, factor: float, call: int) -> None:
        """A version dropped as slower is used (it was verified); a function kept Python by
        the break-even goes through it again, on the costlier calls."""
        self.per_cost, self.reason, self.switched = None, "", (factor, call)
        if per_cost.spare is not None:
            self.compiled = per_cost.spare
            self.state = State.COMPILED
            self._go_fast()
        else:  # the break-even again, for the calls left of this call site
            self.state = State.NEW
            self.plain_times = []
            if self.expected_calls is not None:
                made = self.calls - per_cost.at_call
                self.expected_calls = max(1, self.expected_calls - made)

    def reconsider(self, expected_calls: int | None) -> None:
        """Another call site (a new map, a task): a decision made on cost alone is made again
        when what it rested on changed (the count, numba loaded since, the node cache filled)."""
        per_cost = self.per_cost
        if (
            per_cost is not None
            and per_cost.spare is None
            and self._cost_inputs(expected_calls) != per_cost.inputs
        ):
            self.state, self.reason, self.per_cost = State.NEW, "", None
            self.expected_calls = expected_calls
            self.plain_times = []

    def _cost_inputs(self, expected_calls: int | None) -> tuple[Any, ...]:
        """What the break-even's compile cost depends on, besides the measured time."""
        cands = self.cands
        assert cands is not None
        parallel = _threads.threads_for(self.num_cpus) > 1
        cached = any(
            _nodecache.has_entry(_nodecache.folder_for(cands.node_key(p))[0])
            for p in {parallel, False}
        )
        return expected_calls, _numba_ready(), cached

    def _sampling(self) -> bool:
        """Still sampling plain calls before the break-even (a known number of calls only)."""
        if self.force or self.expected_calls is None:
            return False
        calls = len(self.plain_times)
        return calls < min(SAMPLE_CALLS, self.expected_calls) and sum(self.plain_times) < SAMPLE_S

    def _prepare(self, bound: tuple, plain_s: float) -> bool:
        """Step 1 and 2 (after the sampled plain calls): whether a compiled version now exists."""
        cands = self.cands
        if cands is None:
            self._keep_python("not a plain Python function")
            return False
        static = _candidates.static_reason(self.fn)
        if static is not None:
            kind, line, fix = static
            self.help.append(_explain._help(self.fn, line, kind, fix))
            self._keep_python(f"{kind} at line {line}")
            return False
        numba_was_loaded = _numba_ready()  # the first compile also pays numba's start
        if not numba_was_loaded and not _prewarm.numba_installed():
            warnings.warn(_compile.INSTALL_HINT, stacklevel=4)
            self._keep_python(_compile.INSTALL_HINT)
            return False
        if (
            self.num_gpus
            and self.mode in (True, "gpu")
            and not self.mutates
            and self._offloaded(bound)
        ):
            return True
        inputs = self._cost_inputs(self.expected_calls)
        _, numba_was_loaded, cached = inputs
        estimate = _decide.compile_estimate(numba_was_loaded, cached)
        decision = _decide.before_compile(plain_s, self.expected_calls, estimate, cached)
        self.decision = decision.text
        if not decision.compile and not self.force:
            self._keep_python(decision.text)
            # Decided again for calls that would pay: FAR times costlier, and enough to pay.
            pays_s = estimate / (_decide.ASSUMED_SAVING * max(self.expected_calls or 1, 1))
            floor = max(plain_s * _decide.FAR, pays_s)
            size = _decide.size_of(bound)
            self.per_cost = _decide.PerCost(plain_s, floor, size, inputs, at_call=self.calls)
            return False
        if self.expected_calls is not None and not numba_was_loaded and not self.force:
            # A fresh process: numba's start and the compile run beside the calls, which go
            # on in Python (a map's first results do not wait), and switch once it is ready.
            self.preparing = _compile.Background(self._build, cands, bound)
            self.state = State.PREPARING
            return False
        return self._built(cands, *self._build(cands, bound))

    def _build(self, cands: _candidates.Candidates, bound: tuple) -> tuple[Any, ...]:
        """The argument types and the ladder: touches nothing of the entry (a thread may run
        it)."""
        signature, bad = _compile.argument_types(self.fn, bound)
        if bad is not None:
            return signature, bad, None, [], 0.0
        assert signature is not None
        parallel = _threads.threads_for(self.num_cpus) > 1
        compiled, failures, spent = _compile.ladder(cands, signature, parallel)
        return signature, bad, compiled, failures, spent

    def _ready(self, preparing: _compile.Background) -> bool:
        """The background preparation finished: whether a compiled version now exists."""
        self.preparing = None
        assert self.cands is not None
        if preparing.error is not None:
            self._keep_python(f"compiling failed: {type(preparing.error).__name__}")
            return False
        return self._built(self.cands, *preparing.result)

    def _built(
        self,
        cands: _candidates.Candidates,
        signature: Any,
        bad: Any,
        compiled: _compile.Compiled | None,
        failures: list[tuple[str, BaseException]],
        spent: float,
    ) -> bool:
        if bad is not None:
            name, value, error = bad
            found = _explain.explain_argument(self.fn, name, value, error)
            self.help.append(found)
            return self._helpers_or_python(
                cands, f"{found.kind} (argument {name}, line {found.line})"
            )
        if spent:
            self._account(spent, loaded=False, versions=0)
        if compiled is not None:
            self._account(compiled.seconds, compiled.loaded)
            self.node_cache = compiled.node_cache
        if compiled is None:
            found = _explain.explain_error(cands, failures[-1][1])
            self.help.append(found)
            return self._helpers_or_python(
                cands, f"{found.kind} at line {found.line} of {found.function}"
            )
        if compiled.note:
            self.notes.append(compiled.note)
        self.compiled = compiled
        self.state = State.VERIFYING
        return True

    def _helpers_or_python(self, cands: _candidates.Candidates, reason: str) -> bool:
        """The function cannot be compiled: its helpers still can (it stays Python around
        them), unless it changes its arguments in place, which a rerun could not check."""
        if not cands.helpers or self.mutates:
            self._keep_python(reason)
            return False
        self.compiled = _compile.helpers_only(cands, reason)
        self.node_cache = self.compiled.node_cache
        self.state = State.VERIFYING
        return True

    def _offloaded(self, bound: tuple) -> bool:
        """Try the GPU (the call holds one): keep it when equal and faster, else say why."""
        from . import _offload

        xp, why = _offload.namespace()
        if xp is None:
            self.offload = f"GPU offload not tried: {why}"
            self.notes.append(self.offload)
            return False
        with muted():  # two more runs of the function: the call printed its lines already
            found = _offload.trial(self.fn, bound, xp)
        self.offload = found.text
        self.notes.append(found.text)
        if not found.kept:
            return False
        rebound = _offload.rebind(self.fn, xp.module)
        self.compiled = _compile.Compiled(_offload.Runner(rebound, xp), False, [], 0.0, found.text)
        self.state = State.VERIFYING
        return True

    def _verifying_call(self, args: tuple, kwargs: dict) -> Any:
        bound = _compile.bind(self.fn, args, kwargs)
        if bound is None:
            if self.state == State.NEW:
                self._keep_python("called with **kwargs, which a compiled function cannot take")
            return self.fn(*args, **kwargs)
        before = _verify.copy_args(bound)
        trial = _verify.copy_args(bound)
        began = time.perf_counter()
        plain = self.fn(*args, **kwargs)
        plain_s = time.perf_counter() - began
        self.plain_times.append(plain_s)
        if _verify.compare(bound, before, "arguments")[0] is not None:
            self.mutates = True
        if self.state == State.NEW:
            if self._sampling():
                return plain
            typical = _decide.typical(self.plain_times)
            if not self._prepare(bound, typical):
                return plain
        self._check(plain, bound, trial, before, plain_s)
        return plain
