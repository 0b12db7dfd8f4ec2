"""Idle timeout and maximum lifetime of a launched cluster: when it should stop by itself, and why.

Both are optional and set at launch (``"idle_timeout"`` and ``"max_lifetime"``, in seconds, in
the body of ``POST /eugo/clusters``). A cluster is *idle* when it has no running or pending task
and no connected driver (a kernel that called ``eugo.hpc.init``, a job). The manager observes it
every few seconds (:func:`watch`, a task of its own) with :func:`busy` (whether a driver is
connected: a cheap read; the task counts only to confirm an idle verdict before stopping), feeds
:meth:`Expiry.observe`, and stops the cluster when a reason comes back; the model's ``expiry``
says what will happen and, afterwards, what happened.

Off by default for local clusters: a local cluster costs nothing while idle, and stopping it
would silently drop what a kernel keeps on it between cells (actors, objects put with ``put``).

>>> e = Expiry(idle_timeout=60, max_lifetime=None, started=0.0)
>>> e.observe(busy=False, now=10.0), e.observe(busy=False, now=71.0)
(None, 'idle')
>>> e.to_model(now=71.0)["reason"]
'Stopped after 60 s without tasks or connected kernels (idle timeout).'
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from ..exceptions import OptionsError

__all__ = [
    "MAX_SECONDS",
    "Expiry",
    "ExpiryModel",
    "Watched",
    "busy",
    "check_interval",
    "parse_limits",
    "watch",
]

MAX_SECONDS = 30 * 24 * 3600


class ExpiryModel(TypedDict):
    """The ``expiry`` part of a cluster model (null when neither limit is set)."""

    idle_timeout: float | None  # seconds, as asked at launch
    max_lifetime: float | None
    idle_for: float | None  # seconds idle so far; null while busy or not yet observed
    stops_in: float | None  # seconds to the earlier of the two limits, for the card's countdown
    stops_because: str | None  # "idle" | "max_lifetime": which limit stops_in counts down to
    fired: str | None  # "idle" | "max_lifetime" once it fired
    reason: str | None  # the sentence recorded when it fired


def _seconds(value: Any, key: str) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not 0 < value <= MAX_SECONDS
    ):
        raise OptionsError(
            f"{key}={value!r} is not allowed: give seconds above 0 and at most {MAX_SECONDS} "
            "(30 days), or leave it out to keep the cluster until you shut it down."
        )
    return float(value)


def parse_limits(body: dict[str, Any]) -> dict[str, float | None]:
    """``idle_timeout`` and ``max_lifetime`` from a launch body; OptionsError on bad values.

    >>> parse_limits({"idle_timeout": 600})
    {'idle_timeout': 600.0, 'max_lifetime': None}
    """
    return {key: _seconds(body.get(key), key) for key in ("idle_timeout", "max_lifetime")}


def check_interval(idle_timeout: float | None, max_lifetime: float | None) -> float:
    """How often to look: often enough that a limit fires within a few percent of it."""
    limits = [x for x in (idle_timeout, max_lifetime) if x]
    return max(0.5, min(5.0, *(x / 10 for x in limits))) if limits else 5.0


@dataclass
class Expiry:
    """The limits of one cluster and what was observed so far (times are ``time.time()``).

    ``started`` is when the cluster began running (None before): a slow launch does not eat
    into the lifetime, and the launch has its own timeout.
    """

    idle_timeout: float | None
    max_lifetime: float | None
    started: float | None
    idle_since: float | None = None
    fired: str | None = None

    @classmethod
    def from_limits(cls, limits: dict[str, Any] | None) -> Expiry | None:
        """The limits of a launch (or of a record, with its ``started``); None if neither is set.

        >>> Expiry.from_limits({"idle_timeout": 60.0}).idle_timeout, Expiry.from_limits({})
        (60.0, None)
        """
        if not limits or not (limits.get("idle_timeout") or limits.get("max_lifetime")):
            return None
        return cls(
            idle_timeout=limits.get("idle_timeout"),
            max_lifetime=limits.get("max_lifetime"),
            started=limits.get("started"),
        )

    def observe(self, busy: bool, now: float) -> str | None:
        """Record one look at the cluster; returns "idle" or "max_lifetime" when one fires."""
        if self.fired:
            return None
        if self.started is None:
            self.started = now
        self.idle_since = None if busy else (self.idle_since if self.idle_since else now)
        if self.max_lifetime is not None and now - self.started >= self.max_lifetime:
            self.fired = "max_lifetime"
        elif self.idle_due(now):
            self.fired = "idle"
        return self.fired

    def idle_due(self, now: float) -> bool:
        """Whether one more idle look at ``now`` would stop the cluster for idleness.

        >>> e = Expiry(idle_timeout=60, max_lifetime=None, started=0.0, idle_since=5.0)
        >>> e.idle_due(30.0), e.idle_due(65.0)
        (False, True)
        """
        return (
            not self.fired
            and self.idle_timeout is not None
            and self.idle_since is not None
            and now - self.idle_since >= self.idle_timeout
        )

    def reason(self) -> str | None:
        if self.fired == "idle":
            return (
                f"Stopped after {self.idle_timeout:g} s without tasks or connected kernels "
                "(idle timeout)."
            )
        if self.fired == "max_lifetime":
            return f"Stopped when it reached its maximum lifetime of {self.max_lifetime:g} s."
        return None

    def to_model(self, now: float) -> ExpiryModel:
        countdowns = {}
        if self.max_lifetime is not None and self.started is not None:
            countdowns["max_lifetime"] = self.started + self.max_lifetime - now
        if self.idle_timeout is not None and self.idle_since is not None:
            countdowns["idle"] = self.idle_since + self.idle_timeout - now
        soonest = min(countdowns, key=countdowns.__getitem__) if countdowns else None
        return {
            "idle_timeout": self.idle_timeout,
            "max_lifetime": self.max_lifetime,
            "idle_for": None if self.idle_since is None else round(now - self.idle_since, 1),
            "stops_in": None
            if soonest is None or self.fired
            else round(max(0.0, countdowns[soonest]), 1),
            "stops_because": None if self.fired else soonest,
            "fired": self.fired,
            "reason": self.reason(),
        }

    def to_record(self) -> dict[str, Any]:
        return {
            "idle_timeout": self.idle_timeout,
            "max_lifetime": self.max_lifetime,
            "started": self.started,
        }


def busy(
    gcs_address: str, dashboard_url: str | None, timeout: float = 5.0, counts: bool = True
) -> bool:
    """Whether the cluster has a connected driver or a running or pending task (blocking).

    With ``counts=False``, only whether a driver is connected: one job-table read. The task
    counts make the GCS copy its whole task table (most of a second of the head's CPU at
    100,000 records), so :func:`watch` reads them only to confirm an idle verdict before it
    stops the cluster (a task that a detached actor runs has no driver). A cluster that cannot
    be read counts as busy: never stop on a guess.
    """
    from .._raystate import has_live_driver
    from .monitor import _tasks_or_none, _use_token_auth

    _use_token_auth()
    try:
        if has_live_driver(gcs_address, timeout):
            return True
    except Exception:  # noqa: BLE001 - not readable now: busy, look again later
        return True
    if not counts:
        return False
    tasks = _tasks_or_none(gcs_address, dashboard_url, int(max(1, timeout)))
    if tasks is None:
        return True
    return tasks["running"] + tasks["pending"] > 0


def _busy_now(
    cluster: Watched, dashboard: Callable[[], str | None] | None, timeout: float, counts: bool
) -> bool:
    address = str(cluster.record["address"])
    if not counts:
        return busy(address, None, timeout, counts=False)
    url = dashboard() if dashboard else cluster.record.get("dashboard_url")
    if url is None and cluster.record.get("dashboard_url"):
        return True  # its dashboard may not get the token now: no task counts, so never idle
    return busy(address, url, timeout)


class Watched(Protocol):
    """What :func:`watch` reads of a cluster (the manager's own cluster state)."""

    status: str
    record: dict[str, Any]


async def watch(
    cluster: Watched,
    limit: Expiry,
    *,
    known: Callable[[], bool],
    save: Callable[[], None],
    expire: Callable[[str | None], Awaitable[None]],
    read_timeout: float,
    dashboard: Callable[[], str | None] | None = None,
) -> None:
    """Look at the cluster every few seconds, whether or not anyone polls the panel.

    Runs while ``known()`` (the manager still has the cluster) and no limit fired. The lifetime
    counts from the first look at a running cluster (``save()`` then writes the record); when a
    limit fires, ``expire(reason)`` stops the cluster and records the reason.

    >>> task = asyncio.ensure_future(watch(cluster, limit, known=..., save=..., expire=...,
    ...                                    read_timeout=5.0))   # doctest: +SKIP
    """
    loop = asyncio.get_running_loop()
    interval = check_interval(limit.idle_timeout, limit.max_lifetime)
    while known() and not limit.fired:
        await asyncio.sleep(interval)
        if cluster.status != "running":
            continue
        if limit.started is None:  # the lifetime counts from the moment it runs
            limit.started = time.time()
            cluster.record["expiry"] = limit.to_record()
            save()
        # The task counts go to the dashboard with this account's token: ``dashboard()`` (run
        # in the thread, it may read /proc) says which one may receive it.
        is_busy = await loop.run_in_executor(
            None, _busy_now, cluster, dashboard, read_timeout, False
        )
        if not is_busy and limit.idle_due(time.time()):
            # About to stop it for idleness: the task counts confirm first (one table pass).
            is_busy = await loop.run_in_executor(
                None, _busy_now, cluster, dashboard, read_timeout, True
            )
        if cluster.status == "running" and limit.observe(is_busy, time.time()):
            await expire(limit.reason())
