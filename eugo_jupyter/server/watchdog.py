"""A process that stops the Jupyter server's lifetime-"server" clusters once the server is dead.

A clean exit hook runs only when the server exits cleanly; after a SIGKILL, an out-of-memory
kill or a crash nothing in the server runs. So the first launch of a "server" cluster starts
this watchdog: a small process in a session of its own (a signal to the server's process group
does not reach it) that blocks until the server's process ends, then stops every cluster whose
record says lifetime "server" and names that server's pid, removes their records and temp
folders, and exits. Persistent clusters are left alone for the next server to adopt.

:class:`ExitGuard` is how the manager uses it: armed at the first "server" launch, it stops
those clusters at a clean exit (``atexit``) and starts the watchdog for the other exits.

>>> guard = ExitGuard(manager.close_sync)   # doctest: +SKIP
>>> guard.arm()                             # doctest: +SKIP
>>> guard.disarm()                          # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import atexit
import os
import select
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from .._processes import start_time

__all__ = ["ExitGuard", "end", "orphans_of", "start", "stop_orphans", "wait_for_exit"]

_POLL = 0.5


def start(server_pid: int) -> subprocess.Popen[bytes]:
    """Start the watchdog of ``server_pid`` (this process); it outlives this process on purpose."""
    from jupyter_core.paths import jupyter_runtime_dir

    # The records are where this server writes them, whatever the watchdog's own settings.
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(Path(jupyter_runtime_dir()).resolve())}
    return subprocess.Popen(
        [sys.executable, "-m", "eugo_jupyter.server.watchdog", f"--pid={server_pid}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        close_fds=True,
    )


def end(handle: subprocess.Popen[bytes] | None) -> None:
    """The server stopped its clusters itself (clean exit): the watchdog is not needed."""
    if handle is None or handle.poll() is not None:
        return
    handle.terminate()
    try:
        handle.wait(timeout=10)
    except subprocess.TimeoutExpired:
        handle.kill()
        handle.wait()


class ExitGuard:
    """Stop this server's lifetime-"server" clusters however it exits, once :meth:`arm` ran.

    ``close_sync`` runs at a clean exit; the watchdog covers SIGKILL and crashes. A watchdog that
    cannot start must not cost the launch that arms the guard: the clean-exit path remains, and
    a warning says what is lost.
    """

    def __init__(self, close_sync: Callable[[], None]) -> None:
        self._close_sync = close_sync
        self._armed = False
        self._handle: subprocess.Popen[bytes] | None = None

    def arm(self) -> None:
        if self._armed:
            return
        atexit.register(self._close_sync)
        self._armed = True
        try:
            self._handle = start(os.getpid())
        except OSError as exc:
            warnings.warn(
                f"The EugoHPC Manager's watchdog did not start ({exc}): clusters of lifetime "
                "'server' stop with a clean server exit, but not if the server is killed.",
                RuntimeWarning,
                stacklevel=2,
            )

    def disarm(self) -> None:
        """The server stopped its clusters itself: the watchdog is not needed."""
        end(self._handle)


def wait_for_exit(pid: int) -> None:
    """Block until process ``pid`` has ended (a zombie counts as ended)."""
    began = start_time(pid)
    if began is None:
        return
    try:
        # A pidfd becomes readable the moment the process exits: no polling delay.
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            while start_time(pid) == began:
                select.select([fd], [], [], 5.0)
        finally:
            os.close(fd)
        return
    while start_time(pid) == began:  # a reused pid has another start time
        time.sleep(_POLL)


def orphans_of(server_pid: int) -> list[dict[str, object]]:
    """Records of the "server" clusters that the (dead) server ``server_pid`` owned."""
    from .. import records
    from .backends import default_backends

    # Every backend that starts processes (local, SLURM jobs, ssh hosts): not connected ones.
    owning = {kind for kind, backend in default_backends().items() if backend.owns_processes}
    return [
        record
        for record in records.list_records()
        if record.get("kind") in owning
        and record.get("lifetime") == "server"
        and record.get("server_pid") == server_pid
    ]


def stop_orphans(server_pid: int) -> list[str]:
    """Stop the clusters of a dead server; returns what would not stop (empty: all stopped)."""
    from .. import records
    from .backends import default_backends

    backends = default_backends()
    left: list[str] = []
    for record in orphans_of(server_pid):
        # A local launch cut short has no pgids yet: its `ray start` processes carry the temp
        # dir, which the local backend's stop looks for.
        try:
            late = backends[str(record["kind"])].stop(record)
        except Exception as exc:  # noqa: BLE001 - the other clusters must still be stopped
            late = [f"{record['id']}: {exc}"]
        if not late:
            records.forget(record)
        left += late
    return left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True, help="the Jupyter server's pid")
    args = parser.parse_args(argv)
    wait_for_exit(args.pid)
    return 1 if stop_orphans(args.pid) else 0


if __name__ == "__main__":
    sys.exit(main())
