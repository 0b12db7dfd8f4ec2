"""Numba's dispatcher once settled: calls go straight to it, new argument types are checked.

After verification an entry hands its calls to numba's dispatcher (:meth:`Dispatching._go_fast`);
numba calls back on argument types it has no version for (through :mod:`._numba_private`),
and the new version is run on a copy and compared with Python before it is trusted. A call the
compiled version raises on reruns in Python, counted (:meth:`Dispatching.raised`).
"""

from __future__ import annotations

from typing import Any

from .._output import muted
from . import (
    _compile,
    _differs,
    _explain,
    _numba_private,
    _verify,
)
from ._record import Record

__all__ = ["Dispatching"]


class Dispatching(Record):
    """The dispatcher glue of an entry."""

    def _go_fast(self) -> None:
        """Settled on a numba dispatcher: calls go straight to it, and numba calls
        :meth:`new_types` back for argument types it has no version for."""
        runner = self.compiled.dispatcher if self.compiled is not None else None
        if not _numba_private.can_intercept(runner):
            return  # helpers only, or offloaded: the full path
        _numba_private.intercept_new_types(runner, self.new_types)
        self.fast = runner

    def _slow(self) -> None:
        """Leave the short path (a difference was found, or a new version is being checked)."""
        if self.fast is not None:
            _numba_private.stop_intercepting(self.fast)
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
            return _numba_private.call_compile_for_args(dispatcher, *args, **kwargs)
        self._checking = True
        try:
            return self._check_new_types(dispatcher, args, kwargs)
        finally:
            self._checking = False

    def _check_new_types(self, dispatcher: Any, args: tuple, kwargs: dict) -> Any:
        trial = _verify.copy_args(args) if self.mutates else args
        plain = self.fn(*args, **kwargs)
        try:
            _numba_private.call_compile_for_args(dispatcher, *trial, **kwargs)
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


def _returning(value: Any) -> Any:
    """What numba's callback hands back: a callable that numba calls with the arguments."""
    return lambda *args, **kwargs: value
