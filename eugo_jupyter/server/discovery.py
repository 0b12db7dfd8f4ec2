"""Found clusters: Ray heads running on this machine that the Manager did not start.

:func:`scan` and :func:`stop` block (the manager runs them in a thread); :class:`FoundClusters`
is the manager's async view of them. A head is found by its GCS process, not by
``/tmp/ray/ray_current_cluster``: Ray writes that file into whatever ``--temp-dir`` it was given,
so a head started with another temp dir (another Jupyter server, a terminal) is only seen from
its process. The GCS command line names its session folder, node address and port (when the port
was chosen by Ray, the session folder holds it). Only processes of this user count.

The Manager lists the heads that are not its own clusters, as kind "found", and never stops one
unless the user confirms; :func:`stop` then ends exactly the processes of that head's session
(never ``ray stop``, which would end every cluster here).

>>> [f.address for f in scan()]                          # doctest: +SKIP
['192.0.2.2:6379']
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _processes as processes
from ..exceptions import ClusterError, ConfirmationError
from . import monitor
from .models import ClusterModel, make_cluster_model

__all__ = ["Found", "FoundClusters", "found_id", "scan", "stop"]

_LOOPBACK = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Found:
    """One head found on this machine."""

    address: str  # the GCS, host:port, as kernels connect to it
    session_dir: str  # <temp dir>/session_<date>_<pid>: every process of the head names it
    pid: int  # the GCS process
    pgid: int

    @property
    def id(self) -> str:
        return found_id(self.address)

    @property
    def temp_dir(self) -> str:
        return str(Path(self.session_dir).parent)


def found_id(address: str) -> str:
    """A stable id for a found head ("f-" and 8 hex digits of its address).

    >>> found_id("192.0.2.2:6379")
    'f-832d9d48'
    """
    return "f-" + hashlib.sha256(address.encode()).hexdigest()[:8]


def _option(args: list[str], *names: str) -> str | None:
    for arg in args:
        for name in names:
            if arg.startswith(f"{name}="):
                return arg.split("=", 1)[1]
    return None


def _port(args: list[str], session_dir: str) -> int | None:
    port = _option(args, "--gcs_server_port", "--gcs-server-port")
    if port and port != "0":
        return int(port)
    node_id = _option(args, "--node-id", "--node_id")
    # Ray picked the port itself: it wrote it into the session folder for `ray start` to read.
    for path in Path(session_dir).glob(f"gcs_server_port_{node_id or ''}*"):
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    return None


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def scan() -> list[Found]:
    """Every Ray head (GCS process) of this user on this machine, oldest first."""
    heads: list[tuple[int, Found]] = []
    for pid in processes.pids():
        args = processes.arguments(pid)
        if not processes.is_gcs(args):
            continue
        session_dir = _option(args, "--session-dir", "--session_dir")
        ip = _option(args, "--node-ip-address", "--node_ip_address")
        if not session_dir or not ip:
            continue
        port = _port(args, session_dir)
        pgid = _pgid(pid)
        started = processes.start_time(pid)
        if port is None or pgid is None or started is None:
            continue  # still starting (found on the next scan), or gone
        heads.append((started, Found(f"{ip}:{port}", session_dir, pid, pgid)))
    return [found for _, found in sorted(heads, key=lambda pair: pair[0])]


def stop(found: Found) -> list[int]:
    """End every process of this head's session on this machine; returns the pids left.

    Only after the user confirmed: the Manager did not start this cluster.
    """
    from .._processes import stop as stop_processes

    return stop_processes([found.pgid], found.session_dir)


def _found_model(found: Found, dashboard: str | None) -> ClusterModel:
    """The model of a head the manager did not start: Connect to use it; never ours to stop."""
    model = make_cluster_model(
        {
            "id": found.id,
            "name": f"found at {found.address}",
            "kind": "found",
            "address": found.address,
            "dashboard_url": dashboard,
        },
        "running",
    )
    model["expiry"] = None
    model["found"] = {
        "temp_dir": found.temp_dir,
        "session_dir": found.session_dir,
        "pid": found.pid,
    }
    return model


class FoundClusters:
    """The found clusters the manager lists: the last scan, less the manager's own clusters.

    ``own`` returns the records of the manager's clusters (a head at one of their addresses, or
    inside one of their temp folders, is theirs, not found); ``pool`` runs the slow stop.

    >>> found = FoundClusters(own=lambda: [], max_age=2.0, pool=None)
    >>> await found.scan()                                     # doctest: +SKIP
    >>> [model["address"] for model in found.models()]        # doctest: +SKIP
    ['192.0.2.2:6379']
    """

    def __init__(
        self,
        own: Callable[[], Iterable[dict[str, Any]]],
        max_age: float,
        pool: Executor | None,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.max_age = max_age  # a scan reads /proc: at most once per max_age seconds
        self._own = own
        self._pool = pool
        self._found: dict[str, tuple[Found, str | None]] = {}  # id -> (head, its dashboard)
        self._found_at = 0.0
        self._dashboards: dict[str, str | None] = {}  # address -> dashboard, asked once per head

    async def scan(self) -> None:
        """Scan again if the last scan is older than ``max_age`` (never when disabled)."""
        if not self.enabled or time.monotonic() - self._found_at < self.max_age:
            return
        self._found_at = time.monotonic()
        loop = asyncio.get_running_loop()
        heads = await loop.run_in_executor(None, scan)
        own = list(self._own())
        known = {str(record.get("address")) for record in own}
        temp_dirs = [str(record["temp_dir"]) for record in own if record.get("temp_dir")]
        found = {}
        for head in heads:
            port = head.address.rpartition(":")[2]
            if (
                head.address in known
                or any(head.session_dir.startswith(f"{d}/") for d in temp_dirs)
                or any(a.endswith(f":{port}") and a.split(":")[0] in _LOOPBACK for a in known)
            ):
                continue
            if head.address not in self._dashboards:
                self._dashboards[head.address] = await loop.run_in_executor(
                    None, monitor.dashboard_of, head.address, 3.0
                )
            found[head.id] = (head, self._dashboards[head.address])
        self._found = found

    def models(self) -> list[ClusterModel]:
        """The models of the last scan's heads, oldest first."""
        return [_found_model(found, dashboard) for found, dashboard in self._found.values()]

    async def get(self, cluster_id: str) -> ClusterModel | None:
        """One found cluster's model after a scan, or None if no such head is found."""
        await self.scan()
        return _found_model(*self._found[cluster_id]) if cluster_id in self._found else None

    def head(self, cluster_id: str) -> Found | None:
        """The head of the last scan with this id, or None."""
        return self._found[cluster_id][0] if cluster_id in self._found else None

    def dashboard(self, cluster_id: str) -> str | None:
        """The dashboard of a head of the last scan (None when unknown or without one)."""
        return self._found[cluster_id][1] if cluster_id in self._found else None

    async def stop(self, cluster_id: str, confirm: bool) -> bool:
        """Stop a found head after a fresh scan: False if unknown, ConfirmationError unconfirmed."""
        self._found_at = 0.0
        await self.scan()
        if cluster_id not in self._found:
            return False
        head, _ = self._found[cluster_id]
        if not confirm:
            raise ConfirmationError(
                f"The Ray cluster at {head.address} (temp folder {head.temp_dir}) was not started "
                "by the EugoHPC Manager, so it is not shut down unasked: someone may be using it. "
                "To stop it anyway, confirm (DELETE with ?confirm=true; the panel asks you first), "
                "or Connect to it instead."
            )
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(self._pool, stop, head)
        self._found_at = 0.0
        if left:
            raise ClusterError(f"{len(left)} processes did not stop: pids {left[:10]}.")
        self._found.pop(cluster_id, None)
        return True
