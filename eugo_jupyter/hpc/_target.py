"""Choosing the cluster a process connects to: where the address comes from, whether what
answers there is a usable Ray cluster, and the fallback from a dead active cluster.

Order (first match wins): an explicit ``init(address=...)``, ``$EUGO_CLUSTER_ADDRESS``,
``$RAY_ADDRESS``, the cluster marked active in the EugoHPC Manager (its record on disk), else
the embedded local Ray (``None``). Starting it is :mod:`._session`'s job.
"""

from __future__ import annotations

import os
import warnings

from .._rayaddress import gcs_wants_token, reachable, speaks_gcs
from .._raystate import enable_token_auth, snapshot
from ..exceptions import ClusterError, EugoWarning

__all__ = ["answers", "choose", "is_gcs_address", "probe", "resolve_address"]


def resolve_address(address: str | None = None) -> tuple[str | None, str]:
    """The address to connect to and where it came from; ``(None, "embedded")`` for the default.

    >>> resolve_address("10.0.0.5:6379")
    ('10.0.0.5:6379', 'explicit')
    """
    if address:
        return address, "explicit"
    for variable in ("EUGO_CLUSTER_ADDRESS", "RAY_ADDRESS"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value, variable
    from ..records import active_record

    active = active_record()
    if active:
        return str(active["address"]), f"active cluster {active.get('name') or active['id']!r}"
    return None, "embedded"


def is_gcs_address(address: str) -> bool:
    """A ``host:port`` of a GCS, which can be asked before connecting (a ``ray://`` client
    server, "auto" or "local": only ray.init can tell)."""
    return not address.startswith("ray://") and address not in ("auto", "local")


def answers(address: str, timeout: float = 3.0) -> bool:
    return not is_gcs_address(address) or reachable(address, timeout)


def probe(address: str, timeout: float = 5.0) -> str | None:
    """Why this process could not switch to the cluster at ``address``, or None if it could.

    Asks without touching the current connection (a TCP connect, then, for a GCS address, a
    read of the cluster's state), so a caller can try a new cluster first and switch only on
    success.

    >>> probe("127.0.0.1:1")                 # doctest: +SKIP
    'No Ray cluster answers at 127.0.0.1:1.'
    """
    if not answers(address, timeout=min(timeout, 3.0)):
        return f"No Ray cluster answers at {address}."
    if not is_gcs_address(address):
        return None  # a Ray client server: only ray.init can tell
    if not speaks_gcs(address, timeout):  # Ray's own client takes 40 s to say so
        return (
            f"Something answers at {address}, but not as a Ray cluster's GCS (no answer to a "
            f"GCS request within {timeout:g} s)."
        )
    enable_token_auth()
    try:
        snapshot(address, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - whatever the reason, it is not usable now
        return f"Something answers at {address}, but not as a Ray cluster's GCS ({exc})."
    return None


def choose(address: str | None) -> tuple[str | None, str, bool | None]:
    """The cluster to connect to (None: the embedded Ray), where that came from, and whether its
    GCS wants a token (asked once, None when not asked); an active cluster that does not answer
    falls back to the embedded Ray with a warning, any other target that does not raises."""
    target, source = resolve_address(address)
    if target is None:
        _say_active_gone()
    message, wants = None, None
    if target and not answers(target):
        message = f"No Ray cluster answers at {target} (from {source})."
    elif target and is_gcs_address(target):
        wants = gcs_wants_token(target)  # Ray's own client takes 40 s to fail on a non-GCS
        if wants is None:
            message = (
                f"Something answers at {target} (from {source}), but not as a Ray cluster's GCS."
            )
    if not (target and message):
        return target, source, wants
    if source.startswith("active cluster"):
        warnings.warn(
            f"{message} Using an embedded local Ray instead; make another cluster active "
            "in the EugoHPC Manager, or relaunch this one.",
            EugoWarning,
            stacklevel=3,
        )
        return None, "embedded", None
    raise ClusterError(
        f"{message} Check the address (host:port of the head's GCS, as printed by "
        "`ray start --head`), or unset it to use the embedded local Ray."
    )


_told_gone: set[str] = set()  # the gone active clusters this process has spoken of


def _say_active_gone() -> None:
    """Falling back to the embedded Ray: if the active cluster ended by itself, say so once.

    The Manager keeps the active marker of a cluster that was killed outside it (or reached a
    limit) with the reason, so that a kernel started afterwards does not run on its embedded
    Ray without a word.
    """
    from ..records import gone_active

    gone = gone_active()
    if gone is None or str(gone.get("id")) in _told_gone:
        return
    _told_gone.add(str(gone.get("id")))
    name = gone.get("name") or gone.get("id")
    warnings.warn(
        f"The active cluster {name!r} ({gone.get('address')}) is gone: {gone['gone']} This "
        "kernel uses an embedded local Ray instead. Make another cluster active in the EugoHPC "
        "Manager (or relaunch this one) and restart the kernel to use it.",
        EugoWarning,
        stacklevel=4,
    )
