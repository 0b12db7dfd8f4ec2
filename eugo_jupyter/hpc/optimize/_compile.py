"""Compiling with numba: the function and its helpers, the fallback ladder, the argument types.

Every candidate helper is compiled first (``numba.njit``, never ``fastmath``) and the called
function is rebuilt over a copy of its globals in which the helpers' names point at their
compiled versions, so numba types the calls between them. Numba's own ``cache=True`` is not
used: it is lost through cloudpickle (an unpickled dispatcher has no disk cache) and its
notebook cache is keyed on one function's source only. Each dispatcher caches on the node
instead, in the folder of our key (:mod:`._nodecache`): a version another process compiled is
loaded, not compiled. The compile is explicit (``dispatcher.compile(signature)``) so that its
seconds are measured apart from the run, and so is whether it was a load.

The ladder: ``parallel=True`` when the call holds more than one CPU, then serial, then Python.
A parallel compile that finds nothing to parallelize is replaced by the serial one. A function
numba cannot type itself (it reads files, calls a library) but that calls notebook helpers gets
:class:`HelpersOnly`: the function stays Python and its helpers are compiled, each on its first
call for the types it meets; a helper numba cannot type either stays Python too.
"""

from __future__ import annotations

import inspect
import threading
import time
import types
import warnings
from dataclasses import dataclass, field
from typing import Any

from . import _candidates, _nodecache, _numba_private, _prewarm

__all__ = [
    "INSTALL_HINT",
    "Compiled",
    "HelpersOnly",
    "argument_types",
    "build",
    "helpers_only",
    "rebind",
]

INSTALL_HINT = (
    "numba is not installed here, so nothing was compiled and the plain function ran. Install "
    "it in the notebook's environment (and the workers'): pip install numba"
)


@dataclass
class Compiled:
    """One compiled version of a function and its helpers."""

    dispatcher: Any
    parallel: bool
    helpers: list[str]
    seconds: float = 0.0  #: compiling, or loading when ``loaded``
    note: str = ""  #: why this rung was taken ("parallel=True found nothing to run in parallel")
    loaded: bool = False  #: loaded from the node cache instead of compiled
    caches: list[_nodecache.Folder] = field(default_factory=list)  #: its and its helpers'
    node_cache: str = ""  #: the node cache folder, or why there is none

    def loads(self) -> int:
        """Versions (of it and its helpers) loaded from the node cache so far."""
        return sum(c.loads for c in self.caches)

    @property
    def how(self) -> str:
        if isinstance(self.dispatcher, HelpersOnly):
            return self.dispatcher.how
        if not hasattr(self.dispatcher, "py_func"):  # offloaded: the runner of _offload
            return f"offloaded to the GPU ({self.dispatcher.xp.name})"
        mode = "parallel (numba.njit(parallel=True))" if self.parallel else "serial (numba.njit)"
        helpers = f", with the helpers {', '.join(self.helpers)}" if self.helpers else ""
        return mode + helpers

    def versions(self) -> list[str]:
        """Each argument-type signature compiled, in words numba uses."""
        return [", ".join(str(t) for t in sig) for sig in self.dispatcher.signatures]


def rebind(fn: types.FunctionType, names: dict[str, Any]) -> types.FunctionType:
    """A copy of ``fn`` that reads ``names`` in place of those globals (nothing else changes)."""
    namespace = dict(fn.__globals__)
    namespace.update(names)
    new = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    return new


def _self_bound(dispatcher: Any) -> Any:
    """A recursive function calls its compiled self (numba types self-recursion)."""
    fn = dispatcher.py_func
    if fn.__name__ in _candidates.global_names(fn):
        fn.__globals__[fn.__name__] = dispatcher
    return dispatcher


def _jit(
    numba: Any, fn: types.FunctionType, parallel: bool, caches: list[_nodecache.Folder],
    folder: Any,
) -> Any:  # fmt: skip
    if "print" in _candidates.global_names(fn) and "print" not in fn.__globals__:
        # ``fn`` is a copy made by rebind: its namespace is ours to bind the print numba types
        fn.__globals__["print"] = _numba_private.typed_print()
    dispatcher = numba.njit(fn, parallel=parallel, fastmath=False, cache=False)
    cache = _nodecache.attach(dispatcher, folder)
    if cache is not None:
        caches.append(cache)
    return dispatcher


def _jit_helpers(
    numba: Any, cands: _candidates.Candidates, caches: list[_nodecache.Folder], folder: Any
) -> dict[str, Any]:
    """Each helper as a (lazy) serial dispatcher, callees first, calling each other compiled."""
    compiled: dict[str, Any] = {}
    for name, helper in cands.helpers.items():
        jitted = _jit(numba, rebind(helper, compiled), False, caches, folder)
        compiled[name] = _self_bound(jitted)
    return compiled


_NOTHING_PARALLEL = "parallel=True found nothing to run in parallel, so the serial version is used"


def build(cands: _candidates.Candidates, signature: tuple[Any, ...], parallel: bool) -> Compiled:
    """Compile ``cands`` for ``signature`` (or load it from the node cache); raises numba's
    error when it cannot."""
    numba = _prewarm.import_numba()
    assert numba is not None
    folder, why = _nodecache.folder_for(cands.node_key(parallel))
    caches: list[_nodecache.Folder] = []
    compiled = _jit_helpers(numba, cands, caches, folder)
    dispatcher = _self_bound(_jit(numba, rebind(cands.fn, compiled), parallel, caches, folder))
    own = caches[-1] if folder is not None and caches else None
    if own is not None and parallel:
        own.hold()  # saved once it is known to be kept (it may find nothing parallel)
    loads = own.loads if own is not None else 0
    began = time.perf_counter()
    if parallel and _nodecache.marked(folder, "nothing-parallel"):  # found by another process
        raise _NothingParallel(_NOTHING_PARALLEL, 0.0)
    nothing = False
    if _loaded(dispatcher, own, signature):
        if own is not None and parallel:
            own.release(keep=True)  # a kept parallel version: later versions are saved
    else:
        # Not on the node yet: compile it; the node's other processes wait, then load it.
        with _nodecache.compiling(folder, signature):
            if parallel and _nodecache.marked(folder, "nothing-parallel"):
                raise _NothingParallel(_NOTHING_PARALLEL, time.perf_counter() - began)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                dispatcher.compile(signature)
            nothing = parallel and any("parallel" in str(w.message) for w in caught)
            if own is not None and parallel:
                own.release(keep=not nothing)
            if nothing:
                _nodecache.mark(folder, "nothing-parallel")
    seconds = time.perf_counter() - began
    if nothing:
        raise _NothingParallel(_NOTHING_PARALLEL, seconds)
    loaded = own is not None and own.loads > loads
    return Compiled(
        dispatcher, parallel, list(compiled), seconds, "", loaded, caches, str(folder or why)
    )


def _loaded(dispatcher: Any, own: _nodecache.Folder | None, signature: tuple[Any, ...]) -> bool:
    """Load ``signature`` from the node cache, without compiling; whether it was there."""
    if own is None:
        return False
    own.loading_only = True
    try:
        dispatcher.compile(signature)
    except _nodecache._Missing:
        return False
    finally:
        own.loading_only = False
    return True


class _Helper:
    """A compiled helper that turns back into its Python self if numba cannot type it."""

    def __init__(self, dispatcher: Any, py_func: types.FunctionType) -> None:
        self.dispatcher, self.py_func = dispatcher, py_func
        self.failed: BaseException | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failed is None:
            try:
                return self.dispatcher(*args, **kwargs)
            except Exception as exc:
                from numba.core.errors import NumbaError

                if not isinstance(exc, NumbaError):
                    raise  # the helper's own error, as Python would raise it
                self.failed = exc
        return self.py_func(*args, **kwargs)


class HelpersOnly:
    """The called function, kept Python, over compiled helpers (see the module docstring).

    Looks like a dispatcher to the call path: ``signatures`` and ``overloads`` are the helpers'
    (so a call that compiles a new helper version is checked against Python again).
    """

    def __init__(self, fn: types.FunctionType, helpers: dict[str, _Helper], why: str) -> None:
        self.helpers = helpers
        self.why = why  # why the function itself is not compiled
        self.py_func = rebind(fn, dict(helpers))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.py_func(*args, **kwargs)

    @property
    def compiled_helpers(self) -> list[str]:
        return [n for n, h in self.helpers.items() if h.failed is None and h.dispatcher.signatures]

    @property
    def signatures(self) -> list[tuple[Any, ...]]:
        return [sig for h in self.helpers.values() for sig in h.dispatcher.signatures]

    @property
    def overloads(self) -> dict[tuple[str, tuple[Any, ...]], None]:
        return {
            (name, tuple(sig)): None
            for name, h in self.helpers.items()
            for sig in h.dispatcher.signatures
        }

    @property
    def how(self) -> str:
        done = self.compiled_helpers
        kept = [n for n, h in self.helpers.items() if h.failed is not None]
        text = (
            f"the helper{'s' if len(done) != 1 else ''} {', '.join(done)} compiled (numba.njit)"
            if done
            else "no helper compiled yet"
        )
        if kept:
            text += f"; {', '.join(kept)} kept Python (numba could not type them)"
        return f"{text}; {self.py_func.__qualname__} itself runs as Python ({self.why})"


def helpers_only(cands: _candidates.Candidates, why: str) -> Compiled:
    """``cands.fn`` kept Python over its helpers compiled lazily (serial, never fastmath)."""
    numba = _prewarm.import_numba()
    assert numba is not None
    folder, no_cache = _nodecache.folder_for(cands.node_key(False))
    caches: list[_nodecache.Folder] = []
    compiled = _jit_helpers(numba, cands, caches, folder)
    helpers = {
        name: _Helper(compiled[name], cands.helpers[name])
        for name in cands.helpers
        if name in _candidates.global_names(cands.fn)
    }
    runner = HelpersOnly(cands.fn, helpers, why)
    node_cache = str(folder or no_cache)
    return Compiled(runner, False, list(helpers), 0.0, caches=caches, node_cache=node_cache)


class _NothingParallel(Exception):
    def __init__(self, note: str, seconds: float) -> None:
        super().__init__(note)
        self.note, self.seconds = note, seconds


def ladder(cands: _candidates.Candidates, signature: tuple[Any, ...], parallel_first: bool
           ) -> tuple[Compiled | None, list[tuple[str, BaseException]], float]:  # fmt: skip
    """The first rung that compiles: ``(compiled, failures, seconds spent on the rungs not
    taken)``; failures name each rung that did not compile, with numba's error. The rung taken
    holds its own seconds (``compiled.seconds``, a load's when ``compiled.loaded``)."""
    failures: list[tuple[str, BaseException]] = []
    spent = 0.0
    note = ""
    for parallel in (True, False) if parallel_first else (False,):
        began = time.perf_counter()
        try:
            result = build(cands, signature, parallel)
        except _NothingParallel as nothing:
            note, spent = nothing.note, spent + nothing.seconds
            continue
        except Exception as exc:  # noqa: BLE001 - numba's errors are the report's material
            failures.append(("parallel" if parallel else "serial", exc))
            spent += time.perf_counter() - began
            continue
        result.note = result.note or note
        return result, failures, spent
    return None, failures, spent


class Background:
    """One job on a daemon thread (numba's start and a compile) while the calls run Python;
    :meth:`done` says when its ``result`` (or ``error``) is there."""

    def __init__(self, job: Any, *args: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        thread = threading.Thread(target=self._run, args=(job, args), daemon=True,
                                  name="eugo-optimize-compile")  # fmt: skip
        thread.start()

    def _run(self, job: Any, args: tuple) -> None:
        try:
            # The calls beside it run Python: switch often, or numba's many file reads each
            # wait a whole switch interval for the interpreter lock (see _prewarm).
            with warnings.catch_warnings(), _prewarm.fast_switching():
                warnings.simplefilter("ignore")  # numba's notes, from a thread: shown nowhere
                self.result = job(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self.error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()


def bind(fn: types.FunctionType, args: tuple, kwargs: dict) -> tuple[Any, ...] | None:
    """The call's arguments as positional ones (defaults filled), or None if they do not bind."""
    if not kwargs and (fn.__defaults__ is None or len(args) >= fn.__code__.co_argcount):
        if not (fn.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)):
            return args
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    if bound.kwargs:
        return None  # **kwargs cannot be passed to a compiled function
    return tuple(bound.args)


Bad = tuple[str, Any, BaseException]


def argument_types(
    fn: types.FunctionType, args: tuple[Any, ...]
) -> tuple[tuple[Any, ...] | None, Bad | None]:
    """numba's types of ``args``, or the first argument it cannot type ``(name, value, error)``."""
    names = list(inspect.signature(fn).parameters)
    types_: list[Any] = []
    for i, value in enumerate(args):
        try:
            types_.append(_numba_private.typeof_argument(value))
        except Exception as exc:  # noqa: BLE001 - the argument is named in the report
            name = names[i] if i < len(names) else f"#{i}"
            return None, (name, value, exc)
    return tuple(types_), None
