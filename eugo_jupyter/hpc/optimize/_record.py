"""One function's optimizer state in one process: what :class:`._entry.Entry` records.

:class:`State` is where an entry is; :class:`Settings` what the call site asked; :class:`Record`
holds the state, the compiled version and the counts, and turns them into ``stats()``.
"""

from __future__ import annotations

import enum
import os
import statistics
import sys
import types
from dataclasses import dataclass
from typing import Any

from . import (
    _candidates,
    _compile,
    _decide,
    _explain,
    _prewarm,
    _state,
    _verify,
)

__all__ = ["SAMPLE_CALLS", "SAMPLE_S", "VERIFY_CALLS", "Record", "Settings", "State"]

#: Calls that run both versions before the compiled one is trusted.
VERIFY_CALLS = 2
#: Before deciding whether compiling pays for a known number of calls: sample calls until they
#: add up to this much plain time, or to ``SAMPLE_CALLS`` calls (or the calls known).
SAMPLE_S = 0.005
SAMPLE_CALLS = 64


class State(str, enum.Enum):
    """Where an entry is (module docstring: the steps)."""

    NEW = "new"  #: sampling plain calls before the break-even
    PREPARING = "preparing"  #: numba starts and compiles on a thread; calls run Python
    VERIFYING = "verifying"  #: both versions run and are compared
    COMPILED = "compiled"  #: calls go to the compiled version
    PYTHON = "python"  #: kept Python (``reason`` says why)


@dataclass(frozen=True)
class Settings:
    """What a call site asks of the optimizer; shipped beside the function."""

    mode: bool | str = True  #: True, "cpu" or "gpu"
    num_cpus: float | None = None  #: the call's CPUs (a parallel compile when more than one)
    expected_calls: int | None = None  #: calls each worker makes (a map's share), else None
    force: bool = False  #: eugo.hpc.optimize(): compile whatever the break-even says
    num_gpus: float | None = None  #: the call's GPUs (GPU offload is tried when held)

    @classmethod
    def of(cls, mode: Any, options: Any, expected_calls: int | None = None) -> Settings:
        """A call site's settings from its ``optimize=`` and its Ray options."""
        return cls(mode, options.get("num_cpus"), expected_calls, False, options.get("num_gpus"))


class Record:
    """One function (one cache key) in one process: its state, compiled version and counts."""

    def __init__(
        self,
        fn: types.FunctionType,
        cands: _candidates.Candidates | None,
        key: str,
        settings: Settings,
    ) -> None:
        self.fn = fn
        self.mode = settings.mode
        self.num_gpus = settings.num_gpus
        self.offload = ""  #: what GPU offload did, or why it was not tried
        self.cands = cands
        self.key = key
        self.num_cpus = settings.num_cpus
        self.expected_calls = settings.expected_calls  #: the calls left (decided again on)
        self.force = settings.force
        self.state = State.NEW
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
        self.preparing_calls = 0  #: calls run in Python while numba started and compiled
        self.python_fallbacks = 0
        self.fallback_error = ""

    def _account(self, seconds: float, loaded: bool, versions: int = 1) -> None:
        if loaded:
            self.load_s += seconds
            self.loads += versions
        else:
            self.compile_s += seconds
            self.compiles += versions
            _decide.note_compile(seconds)

    def _keep_python(self, reason: str) -> None:
        self.state = State.PYTHON
        self.reason = reason
        self._slow()

    def _slow(self) -> None:  # the dispatcher glue's (leaves numba's short path)
        raise NotImplementedError

    # -- what is reported ---------------------------------------------------------------------
    def stats(self) -> _state.Stats:
        compiled = self.compiled
        return {
            "function": self.fn.__qualname__,
            "key": self.key[:12],
            "pid": os.getpid(),
            "state": self.state.value,
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
            "preparing_calls": self.preparing_calls,
            "numba_started_early": _prewarm.started_here(),
            "python_fallbacks": self.python_fallbacks,
            "fallback_error": self.fallback_error,
            "difference": self.difference.text() if self.difference else "",
            "help": [h.as_dict() for h in self.help],
            "offload": self.offload,
            "per_cost": _decide.switch_text(*self.switched, self.state == State.COMPILED)
            if self.switched
            else "",
        }


def _numba_ready() -> bool:
    """Numba is loaded here (not still being started by :mod:`._prewarm`)."""
    return "numba" in sys.modules and not _prewarm.loading()


def _call_text(args: tuple) -> str:
    return "(" + ", ".join(_verify._short.repr(a) for a in args) + ")"
