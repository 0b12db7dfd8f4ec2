"""The verifying calls: both versions run, their answers compared, then keep or drop.

The first ``VERIFY_CALLS`` calls run the compiled version on a copy of the arguments beside
the plain one; a difference drops it for good (a parallel one falls back to serial first), and
a version slower than Python on the verified calls is kept for calls far costlier only.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..._units import format_seconds
from .._output import muted
from . import (
    _compile,
    _decide,
    _explain,
    _nodecache,
    _threads,
    _verify,
)
from ._glue import Dispatching
from ._record import VERIFY_CALLS, State, _call_text

__all__ = ["Verifying"]


class Verifying(Dispatching):
    """The verification steps of an entry."""

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
                f"the compiled version took {format_seconds(compiled_s)} per call, Python "
                f"{format_seconds(plain_s)}: kept Python for calls of about this cost"
            )
            return
        self.state = State.COMPILED
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
