"""``@distribute``: a function becomes a task whose call returns a future; a class, an actor.

A call validates its options, connects on first use, warns when no node can run its request,
submits through Ray (``ray.remote``) and returns Ray's own future (an ``ObjectRef``), so futures
pass into other calls and into ``ray.get`` unchanged. ``.remote(...)`` is an alias of each call
form, for code moved from Ray. The actor handles are in :mod:`._actors`.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from .. import _hooks
from ..exceptions import OptionsError
from . import _actors, _checks, _freshness, _output, _session, _static, _submissions
from ._actors import ActorProxy
from ._options import check_optimize_request, request_of, resolve_options, split_optimize

__all__ = ["ActorCreator", "BoundCall", "DistributedClass", "DistributedFunction", "distribute"]

T = TypeVar("T")


def _submission_failed(
    fn: Callable[..., Any], args: tuple, kwargs: dict, exc: BaseException
) -> None:
    """Turn Ray's pickling failure into an error naming the variable; re-raise anything else."""
    if isinstance(exc, (TypeError, pickle.PicklingError, AttributeError, ValueError)):
        explained = _checks.explain_unpicklable(fn, args, kwargs, exc)
        if explained is not None:
            raise explained from exc


class _Submitter:
    """Options validated once, the Ray handle built once: what a bound call needs to submit."""

    __slots__ = ("kind", "name", "options", "request", "key", "optimize")

    def __init__(self, name: str, options: dict[str, Any], kind: str) -> None:
        self.kind = kind
        self.name = name
        check_optimize_request(options)
        # optimize= is ours, not Ray's: None means "as the notebook says" (eugo.hpc.set_optimize).
        self.options, self.optimize = split_optimize(options)
        self.request = request_of(options, kind)
        self.key = _submissions.request_key(self.request)

    def check(self, stacklevel: int) -> None:
        _checks.warn_if_infeasible(self.name, self.key, self.request, stacklevel + 1)


class DistributedFunction:
    """A function whose calls run as Ray tasks and return futures.

    >>> @distribute
    ... def square(x):
    ...     return x * x
    >>> fut = square(4)                       # doctest: +SKIP
    >>> get(fut)                              # doctest: +SKIP
    16
    >>> get(square.options(num_cpus=2)(5))    # doctest: +SKIP
    25
    """

    def __init__(self, fn: Callable[..., Any], options: Mapping[str, Any] | None = None) -> None:
        if hasattr(fn, "remote"):
            raise TypeError(
                f"{fn!r} is already a Ray remote function; apply eugo.hpc.distribute to the plain "
                "function instead of the @ray.remote one."
            )
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._defaults = resolve_options(options or {}, "task")
        self._default = _Submitter(self._label, self._defaults, "task")
        if self._default.optimize and _hooks.optimizer is not None:
            _hooks.optimizer.declared()  # the workers may start numba before the first call
        self._remote: Any = None
        self._default_remote: Any = None
        self._reads: _freshness.Reads | None = None  # the globals it was exported with

    @property
    def _label(self) -> str:
        return getattr(self._fn, "__qualname__", getattr(self._fn, "__name__", repr(self._fn)))

    def __reduce__(self) -> tuple[Any, ...]:
        # Workers rebuild the wrapper from the plain function; Ray handles are not shipped.
        return (DistributedFunction, (self._fn, self._defaults))

    def __repr__(self) -> str:
        extra = f" {self._defaults}" if self._defaults else ""
        return f"<distributed function {self._label}{extra}>"

    def _ray_remote(self) -> Any:
        # Exported again when a global it reads changed since: a call sees the notebook's state.
        if self._remote is None or (self._reads is not None and self._reads.stale()):
            import ray

            self._reads = _freshness.reads_of(self._fn)
            self._remote = ray.remote(_output.prepare(self._fn, self._label))
            ray_defaults = self._default.options
            self._default_remote = (
                self._remote.options(**ray_defaults) if ray_defaults else self._remote
            )
        return self._remote

    def _submit(self, submitter: _Submitter, remote: Any, args: tuple, kwargs: dict) -> Any:
        submitter.check(stacklevel=3)
        fn = self._fn
        mode = submitter.optimize
        if mode or (mode is None and _hooks.optimize_default):  # ship the optimizer in fn's place
            fn, remote = _hooks.the_optimizer().for_task(
                fn, mode or _hooks.optimize_default, submitter.options, self._label
            )
        sent, named = _actors.travelling(args, kwargs)  # actors given as arguments
        try:
            # The profile and the audit plug in through _hooks (None costs one lookup each).
            audit, recorder = _hooks.audit, _hooks.recorder
            if audit is not None and "GPU" in submitter.request:
                # The audit measures GPU calls; a profile running at the same time sees them
                # through the audit's records instead of its own timing.
                refs = audit(fn, submitter, sent, named)
            elif recorder is not None:
                refs = recorder.submit(
                    submitter.name, fn, submitter.options, submitter.request, sent, named
                )
            else:
                refs = remote.remote(*sent, **named)
        except Exception as exc:
            _submission_failed(self._fn, args, kwargs, exc)
            raise
        for ref in refs if isinstance(refs, list) else (refs,):
            ref = _output.task_ref(ref)  # a streaming generator: its task's own future
            if hasattr(ref, "binary"):
                _submissions.remember(ref, submitter.name, submitter.key)
        return refs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Submit one call with the decorator's options; returns a future at once."""
        _session.ensure()
        self._ray_remote()
        return self._submit(self._default, self._default_remote, args, kwargs)

    #: Ray's spelling, for code moved from Ray: ``f.remote(x)`` is ``f(x)``.
    remote = __call__

    def options(self, **options: Any) -> BoundCall:
        """The same function with per-call resources; the call site wins over the decorator.

        >>> heavy = square.options(num_cpus=4, num_gpus=0.25)   # doctest: +SKIP
        >>> fut = heavy(3)                                      # doctest: +SKIP
        """
        merged = {**self._defaults, **resolve_options(options, "task")}
        return BoundCall(self, merged)

    def local(self, *args: Any, **kwargs: Any) -> Any:
        """Run the plain function here, in this process (for debugging and tests)."""
        return self._fn(*args, **kwargs)


class BoundCall:
    """A distributed function with options applied; call it to submit."""

    def __init__(self, function: DistributedFunction, options: dict[str, Any]) -> None:
        self._function = function
        self._submitter = _Submitter(function._label, options, "task")
        self._remote: Any = None
        self._base: Any = None  # the function's Ray handle self._remote was made from

    @property
    def options_dict(self) -> dict[str, Any]:
        """The validated options this call submits with."""
        return dict(self._submitter.options)

    def __repr__(self) -> str:
        return f"<distributed function {self._function._label} with {self._submitter.options}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _session.ensure()
        base = self._function._ray_remote()
        if self._base is not base:
            self._base, self._remote = base, base.options(**self._submitter.options)
        return self._function._submit(self._submitter, self._remote, args, kwargs)

    #: Ray's spelling: ``f.options(num_cpus=2).remote(x)`` is ``f.options(num_cpus=2)(x)``.
    remote = __call__


class DistributedClass:
    """A class whose instances live as Ray actors.

    >>> @distribute
    ... class Counter:
    ...     def __init__(self):
    ...         self.n = 0
    ...     def incr(self, k=1):
    ...         self.n += k
    ...         return self.n
    >>> c = Counter()             # doctest: +SKIP
    >>> get(c.incr(2))            # doctest: +SKIP
    2
    """

    def __init__(self, cls: type, options: Mapping[str, Any] | None = None) -> None:
        functools.update_wrapper(self, cls, updated=())
        self._cls = cls
        self._defaults = resolve_options(options or {}, "actor")
        self._remote: Any = None
        self._reads: _freshness.Reads | None = None  # the globals it was exported with

    def __reduce__(self) -> tuple[Any, ...]:
        return (DistributedClass, (self._cls, self._defaults))

    def __repr__(self) -> str:
        return f"<distributed class {self._cls.__qualname__}>"

    def _ray_remote(self) -> Any:
        # A new actor starts with the notebook's current globals (a live one keeps its own).
        if self._remote is None or (self._reads is not None and self._reads.stale()):
            import ray

            self._reads = _freshness.reads_of(self._cls)
            self._remote = ray.remote(_output.prepare_class(self._cls, self._cls.__qualname__))
        return self._remote

    def _create(self, options: dict[str, Any], args: tuple, kwargs: dict) -> ActorProxy:
        _session.ensure()
        submitter = _Submitter(self._cls.__qualname__, options, "actor")
        submitter.check(stacklevel=3)
        remote = self._ray_remote()
        try:
            sent, named = _actors.travelling(args, kwargs)
            handle = (remote.options(**options) if options else remote).remote(*sent, **named)
        except Exception as exc:
            _submission_failed(self._cls.__init__, args, kwargs, exc)  # type: ignore[misc]
            raise
        _output.track_actor(handle, self._cls.__qualname__)  # __init__'s prints, this cell
        return ActorProxy(handle, self._cls.__qualname__, self._cls, self._reads)

    def __call__(self, *args: Any, **kwargs: Any) -> ActorProxy:
        """Start an actor with the decorator's options."""
        return self._create(self._defaults, args, kwargs)

    #: Ray's spelling: ``Counter.remote(1)`` is ``Counter(1)``.
    remote = __call__

    def options(self, **options: Any) -> ActorCreator:
        """Per-actor resources: ``Counter.options(num_cpus=1)()``."""
        return ActorCreator(self, {**self._defaults, **resolve_options(options, "actor")})


class ActorCreator:
    """A distributed class with options applied; call it to start an actor."""

    __slots__ = ("_cls", "_options")

    def __init__(self, cls: DistributedClass, options: dict[str, Any]) -> None:
        self._cls, self._options = cls, options

    def __call__(self, *args: Any, **kwargs: Any) -> ActorProxy:
        return self._cls._create(self._options, args, kwargs)

    #: Ray's spelling: ``Counter.options(num_cpus=1).remote()``.
    remote = __call__

    def __repr__(self) -> str:
        return f"<distributed class {self._cls._cls.__qualname__} with {self._options}>"


@overload
def distribute(target: type[T]) -> DistributedClass: ...  # type: ignore[overload-overlap]
@overload
def distribute(target: Callable[..., Any]) -> DistributedFunction: ...
@overload
def distribute(target: None = None, **options: Any) -> Callable[[Any], Any]: ...


def distribute(target: Any = None, **options: Any) -> Any:
    """Turn a function into a task (a call returns a future) or a class into an actor.

    Use it bare (``@distribute``) or with default resources (``@distribute(num_cpus=2)``); the
    options given at the call site (``f.options(num_gpus=1)(x)``) win over these.

    >>> @distribute
    ... def add(a, b):
    ...     return a + b
    >>> get(add(1, 2))                         # doctest: +SKIP
    3
    """
    if target is None:
        # Fail at the decorator line, not at the first call; what it decorates is not known
        # yet, so a task's and an actor's options are both allowed here, and checked as the
        # one or the other once the function or class comes.
        resolve_options(options, "either")
        return functools.partial(distribute, **options)
    if isinstance(target, (DistributedFunction, DistributedClass)):
        if not options:
            return target
        target = target._fn if isinstance(target, DistributedFunction) else target._cls
    _static.warn_global_writes(target)  # before it bites: the change would never be shared
    if isinstance(target, type):
        return DistributedClass(target, options)
    if callable(target):
        return DistributedFunction(target, options)
    raise OptionsError(
        f"distribute() takes a function or a class, not {type(target).__name__}; "
        "use it as @eugo.hpc.distribute or @eugo.hpc.distribute(num_cpus=2)."
    )
