"""The session: connecting this process to the cluster :mod:`._target` chose (or starting the
embedded local Ray, kept for the life of the process), following Ray started again by the
program, and letting go (:func:`shutdown`, :func:`forget`) with listeners told of each change.
"""

from __future__ import annotations

import atexit
import logging
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _raystate
from .._rayaddress import mismatch_sentence
from .._raytoken import secure_token_file
from ..exceptions import ClusterError, EugoWarning
from . import _output, _target

__all__ = [
    "Connection",
    "connection",
    "ensure",
    "forget",
    "held",
    "init",
    "on_connect",
    "on_disconnect",
    "shutdown",
]


@dataclass(frozen=True)
class Connection:
    """Where this process is connected, and how that address was chosen."""

    address: str  # the GCS address, host:port
    # "explicit", "EUGO_CLUSTER_ADDRESS", "RAY_ADDRESS", "active cluster 'dev'", "embedded",
    # "existing"
    source: str
    embedded: bool
    dashboard_url: str | None


_connection: Connection | None = None
# The Ray session _connection describes: Ray started again by the program itself
# (ray.shutdown(), then ray.init(...)) is another one, which eugo follows (see ensure).
_ray_session: str | None = None
# Called after every connect (with the new Connection) and after every disconnect (with why):
# caches of the cluster's state register here.
_connect_listeners: list[Callable[[Connection], None]] = []
_disconnect_listeners: list[Callable[[str], None]] = []


def on_connect(listener: Callable[[Connection], None]) -> Callable[[Connection], None]:
    """Call ``listener(connection)`` after each connect (usable as a decorator)."""
    if listener not in _connect_listeners:
        _connect_listeners.append(listener)
    return listener


def on_disconnect(listener: Callable[[str], None]) -> Callable[[str], None]:
    """Call ``listener(reason)`` after each disconnect: shutdown, a cluster found gone, or Ray
    started again by the program itself (usable as a decorator).

    >>> @on_disconnect
    ... def _reset(reason: str) -> None: ...
    """
    if listener not in _disconnect_listeners:
        _disconnect_listeners.append(listener)
    return listener


def init(address: str | None = None, **ray_kwargs: Any) -> Connection:
    """Connect this process to a cluster (or start the embedded one) and return the connection.

    Calling it is optional: the first distributed call does it with no arguments. Pass
    ``address="host:port"`` (or ``"ray://host:10001"``) for an existing cluster; other keyword
    arguments go to ``ray.init`` (``num_cpus=2`` sizes the embedded Ray).

    >>> import eugo_jupyter as eugo
    >>> eugo.hpc.init(num_cpus=2)            # doctest: +SKIP
    Connection(address='127.0.0.1:...', source='embedded', embedded=True, ...)
    """
    import ray

    if ray.is_initialized():
        current = _current()
        if address and address not in (current.address, "auto"):
            raise ClusterError(
                f"This kernel is already connected to {current.address} ({current.source}). "
                "Call eugo.hpc.shutdown() first, then eugo.hpc.init(address=...)."
            )
        return current
    target, source, wants = _target.choose(address)
    context = _start(target, wants, ray_kwargs)
    secure_token_file()  # an embedded Ray may have just written a new token
    dashboard = context.dashboard_url or None
    if dashboard and "://" not in dashboard:
        dashboard = f"http://{dashboard}"
    # ray.init returns a RayContext; its annotation says BaseContext, which has no address_info.
    info = context.address_info  # type: ignore[attr-defined]
    address = info.get("gcs_address") or info["address"]
    return _connected(Connection(address, source, target is None, dashboard))


def _start(target: str | None, wants: bool | None, ray_kwargs: dict[str, Any]) -> Any:
    """``ray.init`` on the chosen target (None: a fresh embedded Ray); returns Ray's context."""
    import ray

    ray_kwargs.setdefault("logging_level", logging.WARNING)
    _output.quiet_startup()  # in a notebook: no token-authentication notice in the first cell
    secure_token_file()
    if target is None:
        # "local" forces a fresh Ray owned by this process: plain ray.init() would silently
        # attach to whatever `ray start` cluster ran last on this machine.
        ray_kwargs.setdefault("include_dashboard", None)
        ray_kwargs.setdefault("dashboard_host", "127.0.0.1")
        # Ray starts its workers at nice 15 (worker_niceness) to keep a driver responsive; but
        # these workers ARE the notebook's compute, and at 15 they lose the CPU to every nice-0
        # process on a shared machine, where a Pool or Dask doing the same work would not. Run
        # them at the kernel's priority; RAY_worker_niceness or _system_config still win.
        if "RAY_worker_niceness" not in os.environ:
            config = dict(ray_kwargs.get("_system_config") or {})
            config.setdefault("worker_niceness", 0)
            ray_kwargs["_system_config"] = config
        return _start_embedded(ray_kwargs)
    _keep_process_alive()  # before Ray reads its config (enable_token_auth does)
    _notice_lost_machines()
    # Send this account's Ray token (~/.ray/auth_token): a cluster started by `ray start` has
    # token authentication on, but a client only sends the token when RAY_AUTH_MODE=token;
    # Ray's own `ray start` enables it the same way when a token exists. An explicit
    # RAY_AUTH_MODE is left alone.
    _raystate.enable_token_auth()
    mismatch = None if wants is None else mismatch_sentence(target, wants)
    if mismatch:
        raise ClusterError(mismatch)
    return ray.init(address=target, **ray_kwargs)


def _connected(connection: Connection, announce: bool = True) -> Connection:
    """Remember ``connection`` as this process's, and tell the output hub and the listeners
    (``announce=False``: a Ray found initialised, as in a Ray worker, which starts no hub)."""
    global _connection, _ray_session
    _connection = connection
    _ray_session = _raystate.session_name()
    if announce:
        _output.connected()
        for listener in list(_connect_listeners):
            listener(connection)
    return connection


def _disconnected(reason: str) -> None:
    """Our side of a connection that ended (Ray's side already handled by the caller)."""
    global _connection, _ray_session
    held, _connection, _ray_session = _connection, None, None
    if held is not None:
        for listener in list(_disconnect_listeners):
            listener(reason)


def _start_embedded(ray_kwargs: dict[str, Any]) -> Any:
    """``ray.init`` of a fresh local Ray, tried twice; a failed try leaves no process behind.

    Ray waits a fixed 30 s for the new node's GCS to write its port and for its raylet to
    register, and on a busy machine the start (seven Python processes importing Ray) can take
    longer. The processes of a failed
    try would go on running in this kernel, slowing the next try and everything else: they
    are stopped before the one retry, and again if it fails (their temp folders go at
    shutdown: the raylet's agents end a moment after it and write their logs till then).
    A start that failed for another reason is not tried again (its processes are stopped too).
    """
    import ray

    from .._raystate import stop_failed_start

    # The dashboard, too, gives its module processes a fixed 30 s to come up, then exits: the
    # embedded Ray then runs without one. Give them the time a busy machine needs.
    os.environ.setdefault("RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT", "180")
    # And the GCS 30 s to write its port file (the first of its waits a busy machine misses).
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")
    failures: list[str] = []
    for _ in range(2):
        kwargs = dict(ray_kwargs)
        if "_temp_dir" not in kwargs:
            kwargs["_temp_dir"] = _private_temp_dir()
        try:
            return ray.init(address="local", **kwargs)
        except Exception as exc:
            timed_out = stop_failed_start(exc)
            _spend_own_temp()
            if not timed_out:
                raise  # bad arguments, a socket path too long, ...: Ray's own words say it
            failures.append(str(exc))
            if len(failures) == 1:
                warnings.warn(
                    f"The embedded local Ray did not start ({exc}); trying once more.",
                    EugoWarning,
                    stacklevel=3,
                )
    cpus = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    raise ClusterError(
        f"The embedded local Ray did not start, twice: {failures[-1]} This machine is busy "
        f"(load {load:.1f} on {cpus} CPUs). Stop other work here and call eugo.hpc.init() "
        "again, or connect to a cluster with eugo.hpc.init(address=...)."
    )


def _keep_process_alive() -> None:
    """Before connecting to a cluster: Ray must not end this process when the cluster dies.

    Ray's driver exits the process once the GCS has been unreachable for
    ``gcs_rpc_server_reconnect_timeout_s``; a kernel must outlive its cluster, and the waits
    in _watch notice the loss within seconds instead. An explicit setting is left alone.
    """
    os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", str(7 * 24 * 3600))


def _notice_lost_machines() -> None:
    """Before connecting to a cluster: notice a machine that vanished within about a minute.

    A machine that loses power or network sends no reset, so a call running there waits on
    gRPC's keepalive before Ray retries it elsewhere: 5 min of quiet, then 2 min for an answer,
    by Ray's defaults. Ping every 60 s (the most often Ray's servers accept: they refuse pings
    more frequent than ``min(60 s, their own setting)``) and give up after 30 s without an
    answer. An explicit setting is left alone.
    """
    os.environ.setdefault("RAY_grpc_client_keepalive_time_ms", "60000")
    os.environ.setdefault("RAY_grpc_client_keepalive_timeout_ms", "30000")


_own_temp: str | None = None
_spent_temps: list[str] = []  # the temp folders of embedded starts that failed


def _private_temp_dir() -> str:
    """Ray's temp dir for the embedded Ray, inside a fresh 0700 folder of this process.

    Ray makes its folders 0777 (under the shared /tmp/ray by default): inside a folder only
    this account can enter, other local users cannot reach its sockets and logs.
    """
    global _own_temp
    import tempfile

    from .._tempdirs import ray_temp_dir

    _own_temp = tempfile.mkdtemp(prefix="eugo-k-")  # mode 0700, owned by us
    atexit.register(_at_exit)
    return ray_temp_dir(_own_temp)


def _existing() -> Connection:
    """The user (or a Ray worker) initialised Ray without us: describe that connection."""
    import ray

    return Connection(
        address=ray.get_runtime_context().gcs_address,
        source="existing",
        embedded=False,
        dashboard_url=None,
    )


def _current() -> Connection:
    """The connection Ray has now (Ray is initialised): ours, unless the program started Ray
    again itself (``ray.shutdown()``, then ``ray.init(runtime_env=...)``, as Ray's documentation
    changes a job's environment); then that new one, as under Ray."""
    if _connection is not None and _raystate.session_name() == _ray_session:
        return _connection
    if _connection is None:
        return _connected(_existing(), announce=False)
    _output.disconnect()  # the output hub lived on the Ray that is gone
    _disconnected("Ray was started again by the program")
    return _connected(_existing())


def ensure() -> None:
    """Connect on first use; a no-op afterwards (and always inside a Ray worker), except that
    a Ray the program started again itself is followed (see :func:`_current`)."""
    import ray

    if not ray.is_initialized():
        init()
    elif _connection is not None:
        _current()


def held() -> Connection | None:
    """The connection this process holds now, without connecting (None: not connected)."""
    return _connection


def connection() -> Connection:
    """The current connection, connecting first if needed."""
    ensure()
    return _current()


def shutdown() -> None:
    """Disconnect; an embedded Ray stops with it. The next call connects again.

    >>> eugo.hpc.shutdown()                  # doctest: +SKIP
    """
    forget("shut down")
    _remove_own_temp()


def forget(reason: str) -> None:
    """Let go of the cluster: the output hub, Ray's side, then ours (the disconnect listeners
    hear ``reason``). :func:`shutdown` ends here, and so does a cluster found gone
    (``_watch.release``), whose Ray side may fail to stop: the kernel lives on regardless.
    """
    import ray

    _output.disconnect()  # first: its pump must not start a new Ray on a dead one's address
    try:
        ray.shutdown()
    except Exception:  # a cluster that is gone: only our side is torn down
        if _connection is None or _connection.embedded:
            raise
    _disconnected(reason)


def _at_exit() -> None:
    # Ray's own exit hook may run after this one and would write its logs again: stop it first.
    import ray

    _output.disconnect()
    ray.shutdown()
    _remove_own_temp()


def _spend_own_temp() -> None:
    """The temp folder of a start that failed: removed with the others at shutdown."""
    global _own_temp
    if _own_temp is not None:
        _spent_temps.append(_own_temp)
        _own_temp = None


def _remove_own_temp() -> None:
    global _own_temp
    import shutil

    for folder in [*_spent_temps, _own_temp]:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    _spent_temps.clear()
    _own_temp = None
