"""Found clusters: Ray heads running on this machine that the Manager did not start.

Blocking functions (the manager runs them in a thread). A head is found by its GCS process, not
by ``/tmp/ray/ray_current_cluster``: Ray writes that file into whatever ``--temp-dir`` it was
given, so a head started with another temp dir (another Jupyter server, a terminal) is only seen
from its process. The GCS command line names its session folder, node address and port (when
the port was chosen by Ray, the session folder holds it). Only processes of this user count.

The Manager never stops a found cluster unless the user confirms; :func:`stop` then ends exactly
the processes of that head's session (never ``ray stop``, which would end every cluster here).

>>> [f.address for f in scan()]                          # doctest: +SKIP
['192.0.2.2:6379']
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Found", "found_id", "scan", "stop"]


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


def _arguments(pid: int) -> list[str] | None:
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return None
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")


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
    heads: list[tuple[float, Found]] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        args = _arguments(int(entry.name))
        if not args or not args[0].endswith("/gcs_server"):
            continue
        session_dir = _option(args, "--session-dir", "--session_dir")
        ip = _option(args, "--node-ip-address", "--node_ip_address")
        if not session_dir or not ip:
            continue
        port = _port(args, session_dir)
        pgid = _pgid(int(entry.name))
        if port is None or pgid is None:
            continue  # still starting: found on the next scan
        try:
            started = entry.stat().st_mtime
        except OSError:
            continue
        heads.append((started, Found(f"{ip}:{port}", session_dir, int(entry.name), pgid)))
    return [found for _, found in sorted(heads, key=lambda pair: pair[0])]


def stop(found: Found, grace: float = 5.0) -> list[int]:
    """End every process of this head's session on this machine; returns the pids left.

    Only after the user confirmed: the Manager did not start this cluster.
    """
    from .backends.local import stop as stop_processes

    return stop_processes([found.pgid], found.session_dir, grace=grace)
