"""Noticing, while a kernel waits, that its cluster is gone, and letting go of it cleanly.

Ray's driver does not raise when the cluster it is attached to dies: a ``ray.get`` waits on,
and after ``gcs_rpc_server_reconnect_timeout_s`` (60 s) the driver ends the whole process, which
in a notebook is the user's kernel. So waits on a cluster (not the embedded Ray, which lives and
dies with the kernel) are cut into steps of :data:`STEP` seconds; between steps :func:`gone`
asks the head whether it still answers, and :func:`release` disconnects and builds the
:class:`~eugo_jupyter.exceptions.ClusterError` the user sees. The kernel stays alive, and its
next call connects again (to the active cluster, or the embedded Ray).

>>> reason = gone("10.0.0.5:6379")     # doctest: +SKIP
>>> reason                             # doctest: +SKIP
'its head stopped accepting connections'
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from ..exceptions import ClusterError

__all__ = [
    "STEP",
    "Watch",
    "get_watching",
    "gone",
    "raise_if_gone",
    "release",
    "watched_address",
]

#: Seconds a wait on a cluster runs before the head is asked again whether it is alive.
STEP = 1.0
#: Consecutive unanswered probes (while the port still accepts) before a head counts as hung.
HUNG_AFTER = 3
#: Why a cluster whose head still answers is gone for this kernel: Ray said the node on this
#: machine died (``LocalRayletDiedError``). A driver reaches the cluster only through that node
#: and never through another one, so nothing more can run from this process.
LOCAL_NODE_DIED = (
    "the Ray node on this machine, through which this kernel reaches the cluster, stopped"
)

_unanswered = 0


def watched_address() -> str | None:
    """The GCS address of the cluster this process waits on, or None when nothing is watched
    (not connected, the embedded Ray, or a ``ray://`` client connection)."""
    from . import _session

    conn = _session.held()
    if conn is None or conn.embedded or conn.address.startswith("ray://"):
        return None
    return conn.address


def gone(address: str) -> str | None:
    """Why the cluster at ``address`` is gone, or None while its head answers."""
    global _unanswered
    from .._rayaddress import speaks_gcs, tcp_answer

    answer = tcp_answer(address, timeout=3.0)
    if answer == "refused":
        return "its head stopped accepting connections"
    if answer != "open":
        return "its head cannot be reached any more"

    if not speaks_gcs(address, timeout=5.0):
        _unanswered += 1
        if _unanswered >= HUNG_AFTER:
            _unanswered = 0
            return "its head accepts connections but stopped answering"
        return None
    _unanswered = 0
    return None


def _shut_down_in_manager(address: str, source: str) -> bool:
    """Whether the EugoHPC Manager shut this cluster down: it was the active cluster, and no
    record has its address any more."""
    if not source.startswith("active cluster"):
        return False
    from .. import records

    try:
        return not any(r.get("address") == address for r in records.list_records())
    except Exception:  # noqa: BLE001 - records unreadable: say only what the probe saw
        return False


def release(address: str, reason: str) -> ClusterError:
    """Disconnect from the dead cluster; returns the error to raise (the kernel lives on)."""
    from . import _session

    when = datetime.now(timezone.utc).strftime("%H:%M:%S UTC")
    held = _session.held()
    source = held.source if held else ""
    if _shut_down_in_manager(address, source):
        reason = f"it was shut down (noticed at {when}; the EugoHPC Manager no longer lists it)"
    else:
        reason = f"{reason} (noticed at {when})"
    _session.forget(f"the cluster at {address} is gone: {reason}")
    return ClusterError(
        f"The cluster at {address} is gone: {reason}. Results not yet fetched from it are lost. "
        "This kernel is still running: the next eugo.hpc call connects again (to the cluster "
        "active in the EugoHPC Manager, else the embedded local Ray), or choose one with "
        "eugo.hpc.init(address=...)."
    )


def raise_if_gone(address: str | None, error: BaseException | None = None) -> None:
    """Raise the ClusterError of :func:`release` if the cluster at ``address`` is gone, or if
    ``error`` (what Ray raised) says that the node on this machine died."""
    if address is None:
        return
    from ray.exceptions import LocalRayletDiedError

    reason = gone(address)
    if reason is None and isinstance(error, LocalRayletDiedError):
        reason = LOCAL_NODE_DIED
    if reason is not None:
        raise release(address, reason) from None


class Watch:
    """For a polling wait loop: :meth:`check` asks the head at most every :data:`STEP` seconds.

    >>> watch = Watch()        # doctest: +SKIP
    >>> watch.check()          # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.address = watched_address()
        self.checked = time.monotonic()

    def check(self) -> None:
        """Raise ClusterError if the watched cluster is gone (cheap between probes)."""
        if self.address is not None and time.monotonic() - self.checked >= STEP:
            raise_if_gone(self.address)
            self.checked = time.monotonic()


def get_watching(target: Any, timeout: float | None = None) -> Any:
    """``ray.get``, in steps on a cluster so that a dead one raises ClusterError within seconds
    (Ray itself would wait, then end the kernel's process)."""
    import ray
    from ray.exceptions import GetTimeoutError as RayGetTimeoutError
    from ray.exceptions import RayError, RayTaskError

    address = watched_address()
    if address is None:
        return ray.get(target, timeout=timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return ray.get(target, timeout=STEP if left is None else min(STEP, left))
        except RayGetTimeoutError:
            if deadline is not None and time.monotonic() >= deadline:
                raise
        except RayTaskError:
            raise  # the user's own exception, from a task that ran
        except RayError as exc:
            raise_if_gone(address, exc)  # a lost node or object because the cluster died?
            raise
        raise_if_gone(address)
