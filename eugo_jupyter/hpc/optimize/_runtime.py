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

import contextlib
import importlib.util
import os
import statistics
import sys
import time
import types
import warnings
from typing import Any

from .._output import muted
from . import (
    _candidates,
    _compile,
    _decide,
    _differs,
    _explain,
    _nodecache,
    _state,
    _threads,
    _verify,
)

__all__ = ["VERIFY_CALLS", "Entry", "Optimized"]

#: Calls that run both versions before the compiled one is trusted.
VERIFY_CALLS = 2
#: Before deciding whether compiling pays for a known number of calls: sample calls until they
#: add up to this much plain time, or to ``SAMPLE_CALLS`` calls (or the calls known).
SAMPLE_S = 0.005
SAMPLE_CALLS = 64


class Entry:
    """One function (one cache key) in one process: its state, compiled version and counts."""

    def __init__(
        self,
        fn: types.FunctionType,
        cands: _candidates.Candidates | None,
        key: str,
        num_cpus: float | None,
        expected_calls: int | None,
        force: bool,
        mode: bool | str = True,
        num_gpus: float | None = None,
    ) -> None:
        self.fn = fn
        self.mode = mode
        self.num_gpus = num_gpus
        self.offload = ""  #: what GPU offload did, or why it was not tried
        self.cands = cands
        self.key = key
        self.num_cpus = num_cpus
        self.expected_calls = expected_calls
        self.force = force  # eugo.hpc.optimize(): compile whatever the break-even says
        self.state = "new"
        self.compiled: _compile.Compiled | None = None
        self.reason = ""
        self.decision = ""
        self.notes: list[str] = []
        self.help: list[_explain.Help] = []
        self.difference: _verify.Difference | None = None
        self.compile_s = 0.0  #: seconds compiling in this process
        self.compiles = 0  #: versions compiled in this process
        self.load_s = 0.0  #: seconds loading from the node cache
        self.loads = 0  #: versions loaded from the node cache
        self.node_cache = ""  #: the node cache folder, or why there is none
        #: kept Python on cost alone (the break-even, or compiled slower on the calls measured):
        #: what it rested on, decided again for calls far costlier
        self.per_cost: _decide.PerCost | None = None
        self.switched: tuple[float, int] | None = None  #: decided again: (costlier, at call)
        self.preparing: _compile.Background | None = None  #: numba's start and the compile
        self.fast: Any = None  #: the settled numba dispatcher (Optimized.__call__'s short path)
        self._checking = False  #: a new version is being checked (numba's callback)
        self.plain_times: list[float] = []
        self.compiled_times: list[float] = []
        self.paired: list[tuple[float, float]] = []  #: (plain, compiled) of each verified call
        self.verified = 0
        self.max_diff = 0.0
        self.mutates = False
        self.calls = 0
        self.python_fallbacks = 0
        self.fallback_error = ""
        self.failed_attempts: list[str] = []

    # -- the steps ----------------------------------------------------------------------------
    def call(self, args: tuple, kwargs: dict) -> Any:
        self.calls += 1
        state = self.state
        if state == "compiled":
            return self._compiled_call(args, kwargs)
        if state == "preparing":
            preparing = self.preparing
            assert preparing is not None
            if not preparing.done() or not self._ready(preparing):
                return self.fn(*args, **kwargs)
            return self._verifying_call(args, kwargs)
        if state == "python":
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
            self.state = "compiled"
            self._go_fast()
        else:  # the break-even again, for the calls left of this call site
            self.state = "new"
            self.plain_times = []
            if self.expected_calls is not None:
                made = self.calls - per_cost.at_call
                self.expected_calls = max(1, self.expected_calls - made)

    def _keep_python(self, reason: str) -> None:
        self.state = "python"
        self.reason = reason
        self._slow()

    def reconsider(self, expected_calls: int | None) -> None:
        """Another call site (a new map, a task): a decision made on cost alone is made again
        when what it rested on changed (the count, numba loaded since, the node cache filled)."""
        per_cost = self.per_cost
        if (
            per_cost is not None
            and per_cost.spare is None
            and self._cost_inputs(expected_calls) != per_cost.inputs
        ):
            self.state, self.reason, self.per_cost = "new", "", None
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
        return expected_calls, "numba" in sys.modules, cached

    def _sampling(self) -> bool:
        """Still sampling plain calls before the break-even (a known number of calls only)."""
        if self.force or self.expected_calls is None:
            return False
        calls = len(self.plain_times)
        return calls < min(SAMPLE_CALLS, self.expected_calls) and sum(self.plain_times) < SAMPLE_S

    def _account(self, seconds: float, loaded: bool, versions: int = 1) -> None:
        if loaded:
            self.load_s += seconds
            self.loads += versions
        else:
            self.compile_s += seconds
            self.compiles += versions
            _decide.note_compile(seconds)

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
        numba_was_loaded = "numba" in sys.modules  # the first compile also pays numba's start
        if not numba_was_loaded and not _installed("numba"):
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
            self.state = "preparing"
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
        self.failed_attempts += [f"{rung}: {type(e).__name__}" for rung, e in failures]
        if compiled is None:
            found = _explain.explain_error(cands, failures[-1][1])
            self.help.append(found)
            return self._helpers_or_python(
                cands, f"{found.kind} at line {found.line} of {found.function}"
            )
        if compiled.note:
            self.notes.append(compiled.note)
        self.compiled = compiled
        self.state = "verifying"
        return True

    def _helpers_or_python(self, cands: _candidates.Candidates, reason: str) -> bool:
        """The function cannot be compiled: its helpers still can (it stays Python around
        them), unless it changes its arguments in place, which a rerun could not check."""
        if not cands.helpers or self.mutates:
            self._keep_python(reason)
            return False
        self.compiled = _compile.helpers_only(cands, reason)
        self.node_cache = self.compiled.node_cache
        self.state = "verifying"
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
        self.state = "verifying"
        return True

    def _verifying_call(self, args: tuple, kwargs: dict) -> Any:
        bound = _compile.bind(self.fn, args, kwargs)
        if bound is None:
            if self.state == "new":
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
        if self.state == "new":
            if self._sampling():
                return plain
            typical = _decide.typical(self.plain_times)
            if not self._prepare(bound, typical):
                return plain
        self._check(plain, bound, trial, before, plain_s)
        return plain

    def _check(
        self, plain: Any, after_plain: tuple, trial: tuple, before: tuple, plain_s: float
    ) -> None:
        """Run the compiled version on ``trial`` and compare it with the plain call."""
        compiled = self.compiled
        assert compiled is not None
        _threads.limit(self.num_cpus)
        lazy = isinstance(compiled.dispatcher, _compile.HelpersOnly)
        versions = len(compiled.dispatcher.overloads) if lazy else 0
        loads = compiled.loads()
        try:
            with muted():  # the plain run beside it printed the call's lines already
                began = time.perf_counter()
                result = compiled.dispatcher(*trial)
                took = time.perf_counter() - began
        except Exception as exc:  # noqa: BLE001 - compiled raised where Python did not
            assert self.cands is not None
            explained = _explain.explain_error(self.cands, exc)
            self.help.append(explained)
            self._keep_python(f"{explained.kind} at line {explained.line} of {explained.function}")
            self.compiled = None
            return
        if lazy and len(compiled.dispatcher.overloads) != versions:
            # Helpers compiled (or loaded) during this call: not a call's time.
            added = len(compiled.dispatcher.overloads) - versions
            self._account(took, compiled.loads() > loads, added)
        else:
            self.compiled_times.append(took)
            self.paired.append((plain_s, took))
        found, max_diff = self._difference(plain, result, after_plain, trial)
        if found is not None:
            if compiled.parallel:
                self._serial_instead(found, plain, after_plain, before)
                return
            self._differs(found)
            self._keep_python(
                f"{self.fn.__qualname__}{_call_text(before)} {found.text()}; kept Python"
            )
            return
        self.verified += 1
        self.max_diff = max(self.max_diff, max_diff)
        if self.verified >= VERIFY_CALLS:
            self._settle(before)

    def _serial_instead(
        self, found: _verify.Difference, plain: Any, after: tuple, before: tuple
    ) -> None:
        assert self.cands is not None and self.compiled is not None
        self.notes.append(f"the parallel version differed ({found.text()}): serial instead")
        signature = tuple(self.compiled.dispatcher.signatures[-1])
        compiled, failures, spent = _compile.ladder(self.cands, signature, False)
        if spent:
            self._account(spent, loaded=False, versions=0)
        if compiled is not None:
            self._account(compiled.seconds, compiled.loaded)
        if compiled is None:
            self._keep_python("the parallel version differed and the serial one failed to compile")
            self.compiled = None
            return
        self.compiled = compiled
        self.compiled_times.clear()
        self.paired.clear()
        self._check(plain, after, _verify.copy_args(before), before, 0.0)

    def _settle(self, before: tuple) -> None:
        if not self.compiled_times:
            return  # every verified call so far compiled a helper: verify the next one too
        runner = self.compiled.dispatcher if self.compiled else None
        if isinstance(runner, _compile.HelpersOnly) and not runner.compiled_helpers:
            self.compiled = None
            self._keep_python(f"{runner.why}, and numba could not type its helpers either")
            return
        plain_s, compiled_s, keep = (0.0, 0.0, True) if self.force else self._keep_or_drop(before)
        if not keep:
            # Verified, only slower on calls this cheap: kept for calls far costlier.
            floor = _decide.FAR * max(plain_s, compiled_s)
            size = _decide.size_of(before)
            self.per_cost = _decide.PerCost(plain_s, floor, size, spare=self.compiled)
            self.compiled = None
            self._keep_python(
                f"the compiled version took {_decide.fmt(compiled_s)} per call, Python "
                f"{_decide.fmt(plain_s)}: kept Python for calls of about this cost"
            )
            return
        self.state = "compiled"
        self._go_fast()

    def _keep_or_drop(self, before: tuple) -> tuple[float, float, bool]:
        """Plain and compiled seconds per call, and whether to keep the compiled version: once
        per node (the node cache's verdict), every worker of the node doing the same. Timed on
        equal footing unless the verified calls were clear (compiled twice as fast or more)."""
        compiled = self.compiled
        assert compiled is not None
        paired = [(p, c) for p, c in self.paired if p > 0] or self.paired
        plain_s = min((p for p, _ in paired), default=0.0)
        compiled_s = min((c for _, c in paired), default=0.0)

        def decide() -> str:
            p, c = plain_s, compiled_s
            if not c * 2 < p:
                with muted(), contextlib.suppress(Exception):  # a rerun that fails: as verified
                    p, c = _decide.equal_footing(
                        self.fn, compiled.dispatcher, lambda: _verify.copy_args(before), p
                    )
            return f"{'keep' if c < p else 'drop'} {p!r} {c!r}"

        runner = compiled.dispatcher
        signatures = getattr(runner, "signatures", None) if compiled.caches else None
        if signatures:
            found = _nodecache.verdict(compiled.caches[0].folder, signatures[-1], decide)
        else:
            found = decide()
        parts = found.split()
        if len(parts) != 3 or not _decide.about_the_same(float(parts[1]), plain_s):
            parts = decide().split()  # unreadable, or decided on calls of another cost: here
        return float(parts[1]), float(parts[2]), parts[0] == "keep"

    def _go_fast(self) -> None:
        """Settled on a numba dispatcher: calls go straight to it, and numba calls
        :meth:`new_types` back for argument types it has no version for."""
        runner = self.compiled.dispatcher if self.compiled is not None else None
        if runner is None or not hasattr(runner, "_compile_for_args"):
            return  # helpers only, or offloaded: the full path
        runner._compile_for_args = self.new_types  # numba looks it up on the instance
        self.fast = runner

    def _slow(self) -> None:
        """Leave the short path (a difference was found, or a new version is being checked)."""
        if self.fast is not None:
            vars(self.fast).pop("_compile_for_args", None)
            self.fast = None

    def _compiled_call(self, args: tuple, kwargs: dict) -> Any:
        """The compiled state, called with keywords or not on numba's short path (its helpers
        compiled, or offloaded)."""
        compiled = self.compiled
        assert compiled is not None
        bound = args if not kwargs else _compile.bind(self.fn, args, kwargs)
        if bound is None:
            return self.fn(*args, **kwargs)
        dispatcher = compiled.dispatcher
        if self.fast is not None:
            try:
                return dispatcher(*bound)
            except Exception as exc:  # noqa: BLE001 - rerun in Python, counted and named
                return self.raised(bound, exc)
        versions = len(dispatcher.overloads)
        try:
            result = dispatcher(*bound)
        except Exception as exc:  # noqa: BLE001 - rerun in Python, counted and named
            return self.raised(bound, exc)
        if len(dispatcher.overloads) != versions:
            # This call compiled a new version (new argument types): check it against Python.
            self._account_new_version(compiled)
            plain = self.fn(*args, **kwargs)
            self._compare_new_version(plain, result, None, None)
            return plain
        return result

    def new_types(self, *args: Any, **kwargs: Any) -> Any:
        """Numba's callback for argument types it has no version for (``_compile_for_args``),
        made before anything runs: the new version is compiled, run on a copy of the arguments
        and compared with Python, whose answer the call returns."""
        dispatcher = self.fast
        assert dispatcher is not None
        if self._checking:  # numba asks again while the new version is being checked
            return type(dispatcher)._compile_for_args(dispatcher, *args, **kwargs)
        self._checking = True
        try:
            return self._check_new_types(dispatcher, args, kwargs)
        finally:
            self._checking = False

    def _check_new_types(self, dispatcher: Any, args: tuple, kwargs: dict) -> Any:
        trial = _verify.copy_args(args) if self.mutates else args
        plain = self.fn(*args, **kwargs)
        try:
            type(dispatcher)._compile_for_args(dispatcher, *trial, **kwargs)
            with muted():  # the plain run printed the call's lines already
                result = dispatcher(*trial, **kwargs)
        except Exception as exc:  # noqa: BLE001 - it cannot take these: Python's answer
            self._fell_back(exc)
            self.python_fallbacks += 1
            return _returning(plain)
        assert self.compiled is not None
        self._account_new_version(self.compiled)
        self._compare_new_version(plain, result, args if self.mutates else None, trial)
        return _returning(plain)

    def _compare_new_version(
        self, plain: Any, result: Any, after_plain: tuple | None, trial: tuple | None
    ) -> None:
        found, max_diff = self._difference(plain, result, after_plain, trial)
        if found is not None:
            assert self.compiled is not None
            version = self.compiled.versions()[-1]
            self._differs(found)
            self._keep_python(f"a new version ({version}): {found.text()}; kept Python")
            return
        self.max_diff = max(self.max_diff, max_diff)
        self.verified += 1

    def _differs(self, found: _verify.Difference) -> None:
        """A different answer: the compiled version is dropped for good, with the likely cause."""
        self.difference, self.compiled = found, None
        helped = _differs.explain_difference(self.cands, self.fn, found)
        if helped is not None:
            self.help.append(helped)

    def _account_new_version(self, compiled: _compile.Compiled) -> None:
        cres = next(reversed(compiled.dispatcher.overloads.values()), None)
        metadata = getattr(cres, "metadata", None)  # None: loaded from a cache (numba's way)
        seconds = float((metadata or {}).get("timers", {}).get("compiler_lock", 0.0))
        self._account(seconds, loaded=metadata is None)

    def raised(self, bound: tuple, exc: BaseException) -> Any:
        """The compiled version raised: rerun in Python (counted and named), unless it may
        have changed its arguments in place already."""
        self._fell_back(exc)
        if self.mutates and self._ran_compiled(bound):
            note = getattr(exc, "add_note", None)  # Python 3.11+
            if note is not None:
                note(
                    f"Raised by the compiled version of {self.fn.__qualname__} (optimize=), "
                    "which changes its arguments in place: they may already be changed, so it "
                    "was not rerun in Python. Call it without optimize= to see what Python does."
                )
            raise exc
        self.python_fallbacks += 1
        return self.fn(*bound)

    def _ran_compiled(self, bound: tuple) -> bool:
        """Whether a compiled version exists for these arguments (so it ran before raising)."""
        assert self.compiled is not None
        signature, _ = _compile.argument_types(self.fn, bound)
        return signature is not None and signature in self.compiled.dispatcher.overloads

    def _fell_back(self, exc: BaseException) -> None:
        if not self.fallback_error and self.cands is not None:
            found = _explain.explain_error(self.cands, exc)
            self.fallback_error = f"{type(exc).__name__} at line {found.line}: {found.kind}"
            self.help.append(found)

    def _difference(self, plain: Any, result: Any, after_plain: tuple | None,
                    trial: tuple | None) -> tuple[_verify.Difference | None, float]:  # fmt: skip
        """The first difference between the two versions' results, then the arguments each
        changed in place (``after_plain``, ``trial``), and the largest float difference."""
        found, max_diff = _verify.compare(plain, result)
        if found is None and after_plain is not None and trial is not None:
            for i, (a, b) in enumerate(zip(after_plain, trial, strict=True)):
                found, arg_diff = _verify.compare(a, b, f"argument {self._arg_name(i)}")
                max_diff = max(max_diff, arg_diff)
                if found is not None:
                    break
        return found, max_diff

    def _arg_name(self, index: int) -> str:
        names = self.fn.__code__.co_varnames[: self.fn.__code__.co_argcount]
        return names[index] if index < len(names) else f"#{index}"

    # -- what is reported ---------------------------------------------------------------------
    def stats(self) -> _state.Stats:
        compiled = self.compiled
        return {
            "function": self.fn.__qualname__,
            "key": self.key[:12],
            "pid": os.getpid(),
            "state": self.state,
            "how": compiled.how if compiled else "",
            "reason": self.reason,
            "compile_s": self.compile_s,
            "compiles": self.compiles,
            "load_s": self.load_s,
            "loads": self.loads,
            "node_cache": self.node_cache,
            "versions": compiled.versions() if compiled else [],
            "verified": self.verified,
            "max_diff": self.max_diff,
            "plain_s": statistics.median(p for p, _ in self.paired)
            if self.paired
            else statistics.median(self.plain_times)
            if self.plain_times
            else None,
            "compiled_s": statistics.median(self.compiled_times) if self.compiled_times else None,
            "calls": self.calls,
            "python_fallbacks": self.python_fallbacks,
            "fallback_error": self.fallback_error,
            "difference": self.difference.text() if self.difference else "",
            "help": [h.as_dict() for h in self.help],
            "offload": self.offload,
            "per_cost": _decide.switch_text(*self.switched, self.state == "compiled")
            if self.switched
            else "",
        }


def _installed(name: str) -> bool:
    """Whether ``name`` can be imported, without importing it (numba's import takes ~1 s)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _returning(value: Any) -> Any:
    """What numba's callback hands back: a callable that numba calls with the arguments."""
    return lambda *args, **kwargs: value


def _call_text(args: tuple) -> str:
    return "(" + ", ".join(_verify._short.repr(a) for a in args) + ")"


class Optimized:
    """A plain function run through the optimizer; pickles as the function and its settings.

    >>> def add(a, b):
    ...     return a + b
    >>> Optimized(add)(1, 2)
    3
    """

    __slots__ = ("fn", "mode", "num_cpus", "expected_calls", "force", "num_gpus", "_entry",
                 "__weakref__")  # fmt: skip

    def __init__(self, fn: Any, mode: bool | str = True, num_cpus: float | None = None,
                 expected_calls: int | None = None, force: bool = False,
                 num_gpus: float | None = None) -> None:  # fmt: skip
        self.fn = fn
        self.mode = mode
        self.num_cpus = num_cpus
        self.expected_calls = expected_calls
        self.force = force
        self.num_gpus = num_gpus
        self._entry: Entry | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Optimized,
            (self.fn, self.mode, self.num_cpus, self.expected_calls, self.force, self.num_gpus),
        )

    def __repr__(self) -> str:
        return f"<optimized {getattr(self.fn, '__qualname__', self.fn)!r}>"

    @property
    def __name__(self) -> str:  # what Ray and the profile name the call after
        return str(getattr(self.fn, "__name__", "optimized"))

    def entry(self) -> Entry:
        """This function's entry in this process (found by cache key, made on first use)."""
        entry = self._entry
        if entry is None:
            entry = self._entry = find_entry(
                self.fn, self.num_cpus, self.expected_calls, self.force, True, self.mode,
                self.num_gpus,
            )  # fmt: skip
        return entry

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        entry = self._entry or self.entry()
        fast = entry.fast
        if fast is None or kwargs:
            return entry.call(args, kwargs)
        # Verified and settled: numba's dispatcher, with only the fallback around it (new
        # argument types come back to the entry through numba's own callback).
        try:
            return fast(*args)
        except Exception as exc:  # noqa: BLE001 - rerun in Python, counted and named
            return entry.raised(args, exc)


def find_entry(fn: Any, num_cpus: float | None, expected_calls: int | None, force: bool,
               cached: bool = True, mode: bool | str = True,
               num_gpus: float | None = None) -> Entry:  # fmt: skip
    """The entry for ``fn``'s current key in this process (a new one when ``cached`` is False)."""
    cands = _candidates.find(fn)
    key = cands.key() if cands is not None else f"plain:{id(fn)}"
    entry = _state.ENTRIES.get(key) if cached else None
    if entry is None:
        entry = Entry(fn, cands, key, num_cpus, expected_calls, force, mode, num_gpus)
        if cached:
            _state.ENTRIES[key] = entry
    else:
        entry.reconsider(expected_calls)
    return entry
