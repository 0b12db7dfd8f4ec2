"""The processes of a cluster on this machine: finding exactly them, and stopping exactly them.

Blocking functions, reading ``/proc``: this module is the one place that reads it
(:func:`table`, :func:`pids`, :func:`cmdline`, :func:`arguments`, :func:`environment`,
:func:`start_time`, :func:`session_id`, :func:`holders`, :func:`socket_holders`,
:func:`tcp_sockets`); other modules and the tests call these.
A cluster's processes are its nodes' process groups (each ``ray start`` runs in a session of its
own), their descendants, and the orphans whose command line names the cluster's temp folder; a
process is matched by (pid, start time), so a reused pid or process group id is never
signalled. Used by the local and ssh backends (their nodes on this machine), the batch
schedulers' stop, the found clusters' confirmed stop, and the embedded Ray's failed start
(:func:`stop_tree`: its node's processes and what they started, the agents included).

>>> stop(launched.pgids, launched.temp_dir)                                  # doctest: +SKIP
[]
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import TypeGuard

__all__ = [
    "arguments", "cgroup_memory_limit", "cluster_processes", "cmdline", "descendants",
    "environment", "group_members", "holders", "is_gcs", "owned_groups", "pids", "session_id",
    "socket_holders", "start_time", "stop", "stop_tree", "table", "tcp_sockets",
]  # fmt: skip


def table() -> dict[int, tuple[int, int, int]]:
    """Every live (not zombie) process: pid -> (parent pid, process group, start time)."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state, ppid, pgrp, ...; starttime is the 20th.
        rest = stat[stat.rfind(")") + 2 :].split()
        if len(rest) > 19 and rest[0] not in ("Z", "X"):
            found[int(entry.name)] = (int(rest[1]), int(rest[2]), int(rest[19]))
    return found


def cgroup_memory_limit(root: str = "/sys/fs/cgroup") -> int | None:
    """The memory limit of this process's cgroup (the lowest on its path), in bytes; None if
    there is none (v2's ``memory.max``, v1's ``memory.limit_in_bytes``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    found: list[int] = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            base, name = Path(root), "memory.max"
        elif "memory" in controllers.split(","):
            base, name = Path(root) / "memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):  # a parent's limit binds too
            try:
                value = (base.joinpath(*parts[:depth]) / name).read_text().strip()
            except OSError:
                continue
            if value.isdigit() and int(value) < 2**62:
                found.append(int(value))
    return min(found) if found else None


def _alive(ours: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Those of ``ours`` (pid, start time) still running: a reused pid is not ours."""
    return {(pid, start) for pid, (_, _, start) in table().items()} & ours


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes whose process group is ``pgid``."""
    return [pid for pid, (_, group, _) in table().items() if group == pgid]


def cmdline(pid: int) -> str:
    """Process ``pid``'s command line, arguments joined by spaces ("" once it is gone)."""
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def arguments(pid: int, own: bool = True) -> list[str] | None:
    """Process ``pid``'s argument list; None once it is gone, or (``own``) when it belongs to
    another user."""
    try:
        if own and os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return None
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")


def environment(pid: int) -> dict[str, str] | None:
    """Process ``pid``'s environment as it started; None once it is gone (or not readable)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0"))
    return {name: value for name, _, value in pairs if name}


def pids() -> list[int]:
    """Every process id on this machine now (zombies included)."""
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]


def start_time(pid: int) -> int | None:
    """Process ``pid``'s start time (clock ticks after boot); None once it is gone or a zombie.

    A (pid, start time) pair names one process for good: a reused pid has another start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return None if rest[0] in ("Z", "X") else int(rest[19])


def session_id(pid: int) -> int | None:
    """Process ``pid``'s session id, as the kernel keeps it; None once it is gone.

    A process cannot join another account's session: the id is proof of where it came from.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command: state, ppid, pgrp, session, ...
    return int(stat[stat.rfind(")") + 2 :].split()[3])


def descriptor(pid: int, fd: int) -> str | None:
    """What descriptor ``fd`` of process ``pid`` points at (a file's path), or None."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:  # gone, closed, or another account's process
        return None


def holders(target: str) -> list[int]:
    """The pids holding ``target`` open, or a file under it when it is a folder: a socket
    (``socket:[inode]``), a cluster's temp folder (those whose descriptors this account may
    read). A process that renamed itself (Ray's ``ray::...``) still holds its log files."""
    folder = target.rstrip("/") + "/"
    found = []
    for pid in pids():
        try:
            descriptors = os.scandir(f"/proc/{pid}/fd")
        except OSError:  # gone, or another account's process
            continue
        with descriptors:
            for fd in descriptors:
                try:
                    held = os.readlink(fd.path)
                except OSError:
                    continue
                if held == target or held.startswith(folder):
                    found.append(pid)
                    break
    return found


def socket_holders(inode: int) -> list[int]:
    """The pids holding socket ``inode`` open (those whose descriptors this account may read)."""
    return holders(f"socket:[{inode}]")


def tcp_sockets() -> list[list[str]]:
    """The kernel's TCP socket tables (IPv4, then IPv6), one list of fields per socket."""
    rows = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        rows += [line.split() for line in lines]
    return rows


def owned_groups(pgids: list[int], temp_dir: str) -> list[int]:
    """The groups that still hold a process of this cluster (one whose command names temp_dir).

    A process group id can be reused once its processes are gone: a group with no process that
    mentions the cluster's temp dir is somebody else's and is never signalled.
    """
    return [pgid for pgid in pgids if any(temp_dir in cmdline(pid) for pid in group_members(pgid))]


def cluster_processes(pgids: list[int], temp_dir: str) -> set[tuple[int, int]]:
    """Every live process of the cluster, as (pid, start time): its nodes' process groups and
    all their descendants.

    Ray starts each worker process (tasks, actors) in a process group of its own, under the
    raylet; those are found as descendants, or, once orphaned, by the cluster's temp dir in their
    command line (their raylet socket lives there).
    """
    procs = table()
    groups = set(owned_groups(pgids, temp_dir))
    found = descendants({pid for pid, (_, group, _) in procs.items() if group in groups}, procs)
    if temp_dir:
        found |= {pid for pid in procs if pid not in found and temp_dir in cmdline(pid)}
    return {(pid, procs[pid][2]) for pid in found}


def descendants(pids: set[int], procs: dict[int, tuple[int, int, int]] | None = None) -> set[int]:
    """``pids`` and every live process under them."""
    procs = table() if procs is None else procs
    found = set(pids)
    grew = True
    while grew:
        children = {pid for pid, (parent, _, _) in procs.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


def _signal(ours: set[tuple[int, int]], sig: int) -> None:
    for pid, _ in _alive(ours):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def _kill_groups(pgids: list[int], sig: int = signal.SIGKILL) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            continue


def _wait_gone(ours: set[tuple[int, int]], deadline: float) -> None:
    while time.monotonic() < deadline and _alive(ours):
        time.sleep(0.05)


def stop_tree(pids: set[int], timeout: float = 10.0) -> list[int]:
    """Kill ``pids`` and every process under them, for processes whose work is worth nothing
    (a node whose start failed); returns the pids still alive after ``timeout`` seconds.

    Each is first stopped (SIGSTOP) while the tree is read, until it no longer grows: a stopped
    process forks nothing, and what it forked stays under it, so nothing is missed (a raylet
    still starting forks its agents a moment later, and once it is gone they would be adopted
    by init); then all get SIGKILL. Matched by start time: a reused pid is never signalled.

    >>> stop_tree(set())
    []
    """
    ours: set[tuple[int, int]] = set()
    for _ in range(100):  # each round stops a generation; a tree is not 100 deep
        procs = table()
        tree = descendants(pids | {pid for pid, _ in ours}, procs)
        new = {(pid, procs[pid][2]) for pid in tree if pid in procs} - ours
        if not new:
            break
        _signal(new, signal.SIGSTOP)
        ours |= new
    _signal(ours, signal.SIGKILL)
    _wait_gone(ours, time.monotonic() + timeout)
    return sorted(pid for pid, _ in _alive(ours))


def is_gcs(args: list[str] | None) -> TypeGuard[list[str]]:
    """Whether a process's argument list (:func:`arguments`) is a Ray head's GCS."""
    return args is not None and len(args) > 0 and os.path.basename(args[0]) == "gcs_server"


def stop(pgids: list[int], temp_dir: str, timeout: float = 30.0) -> list[int]:
    """Stop every process of the cluster: its GCS first, then all the others, with SIGKILL.

    That is its nodes' process groups plus the worker processes Ray started under them (see
    :func:`cluster_processes`); nothing else is signalled. The GCS goes first, so that a kernel
    attached to the cluster finds it gone before any of its tasks fails for a node that went
    (it says "the cluster is gone", not a task's lost worker). The others get no SIGTERM: told
    to stop without their GCS, a raylet, the autoscaler's monitor and the dashboard wait on it
    for as long as they are let (5 s a stop before SIGKILL came), and a stopped cluster keeps
    nothing they could save (its temp dir is deleted). Returns the pids still alive at the end:
    an empty list is the proof that nothing is left.
    """
    groups = owned_groups(pgids, temp_dir)
    ours = cluster_processes(pgids, temp_dir)
    gcs = {(pid, started) for pid, started in ours if is_gcs(arguments(pid, own=False))}
    _signal(gcs, signal.SIGKILL)
    _wait_gone(gcs, time.monotonic() + 2.0)
    _signal(ours, signal.SIGKILL)
    _kill_groups(groups, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while True:
        # A process forked before the kill (a worker starting) is caught by the rescan.
        late = cluster_processes(pgids, temp_dir) | _alive(ours)
        if not late or time.monotonic() > deadline:
            break
        ours |= late
        _signal(late, signal.SIGKILL)
        time.sleep(0.2)
    if not late:
        shutil.rmtree(temp_dir, ignore_errors=True)
    return sorted(pid for pid, _ in late)
