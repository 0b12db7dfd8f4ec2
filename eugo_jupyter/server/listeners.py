"""Who listens on a TCP port of this machine: the kernel's socket table and its owning processes.

Blocking functions, over the kernel's socket tables and open descriptors as
:mod:`eugo_jupyter._processes` (the one reader of ``/proc``) reads them. The kernel fills these in,
so a process cannot pretend to own a socket it does not hold: the dashboard proxy uses them to
prove that a dashboard port belongs to the cluster's own Ray session before it sends this
account's Ray token there (:mod:`.proxy_policy`).

Only processes whose ``/proc/<pid>/fd`` this account may read are seen (its own, or all as
root): a socket held by another account's process has no known owner, which a caller treats as
"not proven".

>>> [listener.port for listener in listening(8265)]                 # doctest: +SKIP
[8265]
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from .. import _processes as processes

__all__ = ["Listener", "listening", "session_of"]

_LISTEN = "0A"  # TCP_LISTEN in the kernel's socket table


@dataclass(frozen=True)
class Listener:
    """One listening TCP socket: where it is bound, the account that opened it, its inode."""

    host: str  # the bound address ("0.0.0.0" / "::" for every address)
    port: int
    uid: int
    inode: int


def _address(hex_address: str) -> str:
    """An address as the kernel's table writes it (little-endian words) in dotted/colon form."""
    raw = bytes.fromhex(hex_address)
    # Each 32-bit word is stored in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening(port: int) -> list[Listener]:
    """Every socket listening on TCP ``port`` of this machine (IPv4 and IPv6)."""
    found = []
    for fields in processes.tcp_sockets():
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        host, _, hex_port = fields[1].rpartition(":")
        if int(hex_port, 16) != port:
            continue
        found.append(Listener(_address(host), port, int(fields[7]), int(fields[9])))
    return found


def session_of(pid: int) -> tuple[int, str | None] | None:
    """``(session id, Ray session folder or None)`` of a process; None when it is gone.

    The session id comes from the kernel (a process cannot join another account's session);
    the folder is the ``--session-dir`` its command line names (every process of a Ray node
    names it).
    """
    session = processes.session_id(pid)
    args = processes.arguments(pid, own=False)
    if session is None or args is None:
        return None
    folder = None
    for arg in args:
        for name in ("--session-dir=", "--session_dir="):
            if arg.startswith(name):
                folder = arg[len(name) :].rstrip("/")
    return session, folder
