"""An actor's handle and methods: ``proxy.method(...)`` returns a future; ``kill``, ``get_actor``.

A proxy wraps Ray's ``ActorHandle`` and is one too (see :class:`ActorProxy`), so Ray's own
functions (``ray.kill``, ``ray.util.ActorPool``) take it, and eugo's take Ray's handles.
"""

from __future__ import annotations

import functools
from typing import Any

from .. import _hooks, _raystate
from . import _freshness, _output, _session

__all__ = ["ActorMethod", "ActorProxy", "get_actor", "kill"]


class ActorMethod:
    """A method of a remote actor: calling it returns a future."""

    __slots__ = ("_method", "_name", "_proxy", "_attr", "_timed")

    def __init__(self, method: Any, name: str, proxy: Any = None, attr: str = "",
                 timed: bool = True) -> None:  # fmt: skip
        self._method = method
        self._name = name
        self._proxy, self._attr, self._timed = proxy, attr, timed

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        recorder = _hooks.recorder
        args, kwargs = travelling(args, kwargs)  # actors given as arguments
        if self._proxy is not None and self._proxy._globals is not None:
            self._proxy._globals.warn_if_stale(self._attr, stacklevel=2)
        if recorder is not None and self._proxy is not None:
            proxy = self._proxy
            ref = recorder.submit_method(
                proxy._cls, proxy.handle, self._attr, self._name,
                self._method, self._timed, args, kwargs,
            )  # fmt: skip
        else:
            ref = self._method.remote(*args, **kwargs)
        _output.track_method(ref, self._name)  # its prints go under the calling cell
        return ref

    #: Ray's spelling: ``actor.method.remote(x)`` is ``actor.method(x)``.
    remote = __call__

    def options(self, **options: Any) -> ActorMethod:
        """Ray's per-method options (``num_returns``, ``name``...)."""
        method = self._method.options(**options)
        return ActorMethod(method, self._name, self._proxy, self._attr, timed=False)

    def __repr__(self) -> str:
        return f"<remote method {self._name}>"


class ActorProxy:
    """A handle to a live actor; ``proxy.method(...)`` returns a future.

    The Ray handle is ``proxy.handle``; the actor lives as long as a handle to it does. A proxy
    is also a Ray ``ActorHandle`` (of a subclass made once Ray is loaded), so Ray's own
    functions take it: ``ray.kill(proxy)``, ``ActorPool([proxy, ...])``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> ActorProxy:
        if cls is ActorProxy:
            cls = _ray_proxy_class()
        return object.__new__(cls)

    def __init__(
        self,
        handle: Any,
        name: str,
        cls: type | None = None,
        reads: _freshness.Reads | None = None,
    ) -> None:
        self.handle = handle
        self._class_name = name
        self._cls = cls  # for a profile: the methods' code; never shipped (see __reduce__)
        # The globals its class was exported with, to warn when the notebook changes one.
        self._globals = _freshness.ActorGlobals(reads, name) if reads else None

    def __reduce__(self) -> tuple[Any, ...]:
        return (ActorProxy, (self.handle, self._class_name))

    def __del__(self) -> None:
        pass  # the Ray handle it holds counts the reference (ActorHandle.__del__ would, twice)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("handle", "_class_name", "_cls", "_globals"):
            raise AttributeError(attr)
        if attr.startswith("_ray_"):  # what Ray's functions read off an ActorHandle
            return getattr(self.__dict__["handle"], attr)
        try:
            method = getattr(self.handle, attr)
        except AttributeError:
            raise AttributeError(f"The actor {self._class_name} has no method {attr!r}.") from None
        return ActorMethod(method, f"{self._class_name}.{attr}", self, attr)

    def __repr__(self) -> str:
        return f"<actor {self._class_name} {_raystate.actor_id_hex(self.handle)[:12]}>"


@functools.cache
def _ray_proxy_class() -> type:
    """ActorProxy that is a Ray ActorHandle too, made once."""
    import ray

    attrs = {"__module__": __name__, "__doc__": ActorProxy.__doc__}
    return type("ActorProxy", (ActorProxy, ray.actor.ActorHandle), attrs)


class _Travelling:
    """A proxy given as an argument, as it travels: Ray sends a top-level argument that is an
    ``ActorHandle`` as a bare Ray handle, which a proxy is too; this one arrives as a proxy."""

    __slots__ = ("proxy",)

    def __init__(self, proxy: ActorProxy) -> None:
        self.proxy = proxy

    def __reduce__(self) -> tuple[Any, ...]:
        return self.proxy.__reduce__()


def travelling(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with each proxy among them wrapped to arrive as a proxy."""
    if any(isinstance(a, ActorProxy) for a in args):
        args = tuple(_Travelling(a) if isinstance(a, ActorProxy) else a for a in args)
    if any(isinstance(v, ActorProxy) for v in kwargs.values()):
        kwargs = {k: _Travelling(v) if isinstance(v, ActorProxy) else v for k, v in kwargs.items()}
    return args, kwargs


def kill(actor: Any, *, no_restart: bool = True) -> None:
    """Stop an actor now (Ray's ``ray.kill``): its pending and running calls fail with
    ``ray.exceptions.ActorDiedError``. Takes an eugo actor or a Ray handle. ``no_restart=False``
    lets an actor with ``max_restarts`` start again.

    >>> c = Counter()                      # doctest: +SKIP
    >>> eugo.hpc.kill(c)                   # doctest: +SKIP
    """
    import ray

    if not isinstance(actor, ray.actor.ActorHandle):
        raise ValueError(
            f"eugo.hpc.kill() takes an actor (what calling a @eugo.hpc.distribute class "
            f"returns, or eugo.hpc.get_actor(name)), not {type(actor).__name__}; to stop a "
            "call, use eugo.hpc.cancel(future)."
        )
    ray.kill(actor.handle if isinstance(actor, ActorProxy) else actor, no_restart=no_restart)


def get_actor(name: str, namespace: str | None = None) -> ActorProxy:
    """The named actor ``name`` (started with ``.options(name=...)``), as an eugo actor whose
    methods are called directly: ``get_actor("counter").incr(1)`` returns a future. Raises
    ``ValueError`` (as ``ray.get_actor`` does) when no such actor is alive.

    >>> c = Counter.options(name="counter", lifetime="detached")()   # doctest: +SKIP
    >>> eugo.hpc.get(eugo.hpc.get_actor("counter").incr(1))           # doctest: +SKIP
    1
    """
    import ray

    _session.ensure()
    handle = ray.get_actor(name, namespace=namespace)  # a bare Ray handle, never a proxy
    return ActorProxy(handle, _raystate.actor_class_name(handle))
