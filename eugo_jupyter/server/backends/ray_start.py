"""The `ray start` toolkit: what every backend that runs `ray start` shares.

One builder of a node's arguments (:func:`node_arguments`, :func:`head_arguments`), used by the
local backend with free ports picked here, by the ssh and allocation backends with a block of
ports (:func:`port_block`) and by the batch schedulers' job scripts with the job's shell
variables; running one `ray start` in a session of its own (:func:`run_ray_start`)
and the line that says why it failed (:func:`why`); the node's environment, address and a free
port.

>>> args, port, _ = head_arguments(NodeSpec(num_cpus=2), "192.0.2.2", "/tmp/eugo-c-1")
>>> args[0], "--num-cpus=2" in args, "--temp-dir=/tmp/eugo-c-1/r" in args
('--head', True, True)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..._processes import _kill_groups
from ..._raystate import startup_timed_out
from ..._tempdirs import ray_temp_dir
from ...exceptions import LaunchError
from ..exporters import closed_exporters

__all__ = [
    "HEAD_PORTS", "NODE_PORTS", "REPORT_EVERY_MS", "SYSTEM_CONFIG", "NodeSpec", "describe",
    "RETRY_DELAYS", "STARTS_AT_ONCE", "busy_sentence", "distinct_ports", "environment",
    "free_port", "head_arguments", "node_arguments", "node_ip", "node_settings", "one_start",
    "port_block", "ray_executable", "retrying", "run_ray_start", "why",
]  # fmt: skip

_T = TypeVar("_T")

#: Node starts this process runs at the same time: several launches asked at once on one
#: machine start their nodes a few at a time, so that each start gets the CPU it needs (four
#: at once on a busy 2-core machine all missed Ray's fixed 30 s registration window).
STARTS_AT_ONCE = 2
_starts = threading.BoundedSemaphore(STARTS_AT_ONCE)
#: Pauses before the second and third try of a start that timed out on a busy machine.
RETRY_DELAYS = (2.0, 6.0)


def one_start() -> threading.BoundedSemaphore:
    """Hold this while a node starts (``with one_start(): ...``)."""
    return _starts


def busy_sentence(what: str, tries: int) -> str:
    """The card's sentence when a start gave up on a busy machine: the load, and what to do."""
    cpus = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{what} timed out during startup {tries} times: this machine is busy (load {load:.1f} "
        f"on {cpus} CPUs). Launch again when it is quieter, with fewer nodes, or on a batch "
        "scheduler's nodes."
    )


def retrying(
    start: Callable[[], _T],
    cleanup: Callable[[], None],
    say: Callable[[str | None], None],
    what: str,
    any_error: bool = False,
) -> _T:
    """``start()``, tried again (after ``cleanup()``, with a pause) while it fails by timing
    out during startup (:func:`~eugo_jupyter._raystate.startup_timed_out`, the embedded Ray's
    rule), or on any LaunchError with ``any_error``; ``say`` tells the card each retry."""
    tries = len(RETRY_DELAYS) + 1
    for attempt in range(1, tries + 1):
        try:
            result = start()
        except LaunchError as exc:
            timed_out = startup_timed_out(str(exc))
            if not (timed_out or any_error):
                raise
            cleanup()
            if attempt == tries:
                raise LaunchError(busy_sentence(what, tries) if timed_out else str(exc)) from None
            delay = RETRY_DELAYS[attempt - 1]
            cause = "timed out during startup (a busy machine)" if timed_out else str(exc)
            say(f"{what}: `ray start` {cause}; try {attempt + 1} of {tries} in {delay:g} s.")
            time.sleep(delay)
            continue
        say(None)
        return result
    raise AssertionError("unreachable")


#: How often the cluster's workers and drivers send their task events to the GCS (Ray's default
#: is every second). The panel's task counts can only be as fresh as these reports; the GCS's
#: cost is per event, and the reports carry the same events in smaller batches (measured: about
#: 5 microseconds more per task for 250 ms). Set in the head's system config, which every node
#: and every driver that connects takes.
REPORT_EVERY_MS = 250

#: The head's system config (every node and every driver that connects takes it). Besides the
#: task events, two reports behind what waits, so that a run's end shows within a report
#: interval instead of Ray's second each: a driver's backlog of tasks not yet handed to a node
#: (each worker and driver tells its node), and the nodes' resource load the GCS pulls from each
#: node (one small request per node per interval). Measured: with Ray's seconds, the waiting
#: list and the CPUs in use still showed a finished run for up to 1.2 s, and the final count
#: read waited for that.
SYSTEM_CONFIG = {
    "task_events_report_interval_ms": REPORT_EVERY_MS,
    "report_worker_backlog_interval_ms": REPORT_EVERY_MS,
    "gcs_pull_resource_loads_period_milliseconds": REPORT_EVERY_MS,
}


@dataclass(frozen=True)
class NodeSpec:
    """What one node offers to the scheduler (declared resources; GPUs need not exist)."""

    num_cpus: int = 1
    num_gpus: int = 0
    memory: int | None = None
    object_store_memory: int | None = None

    def to_model(self) -> dict[str, int | None]:
        return {
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "memory": self.memory,
            "object_store_memory": self.object_store_memory,
        }


def ray_executable() -> str:
    """The ``ray`` command of the Python running this server (its venv first)."""
    beside = Path(sys.executable).with_name("ray")
    if beside.exists():
        return str(beside)
    found = shutil.which("ray")
    if not found:
        raise LaunchError(
            "The `ray` command was not found. Install Ray into the server's environment: "
            "pip install 'ray[default]'."
        )
    return found


def free_port() -> int:
    """A TCP port free on this machine right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def node_ip() -> str:
    """The address Ray registers nodes under (Ray refuses 127.0.0.1 for a node it starts)."""
    import ray.util

    return str(ray.util.get_node_ip_address())


def node_settings() -> dict[str, str]:
    """The environment every node's ``ray start`` gets, whatever starts it (this process, a job
    script, ssh, srun or qrsh).

    - Token auth for every node: a head started by ``ray start`` turns it on by itself, but a
      worker node only sends the token when told to.
    - No usage stats, and Ray's Prometheus exporters closed (they answer without a token).
    - A node that stops at once on SIGTERM: Ray 2.60 first drains it for up to 30 s (for Ray
      Serve's proxies), so a scheduler's cancel or a stop waited that long for nothing (a
      cancelled SLURM job's head lingered 30 s, until the scheduler's kill).

    >>> node_settings()["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"]
    '0'
    """
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        **closed_exporters(),
    }


def environment() -> dict[str, str]:
    """This process's environment for a ``ray start`` it runs: :func:`node_settings`, and no
    ``RAY_ADDRESS`` of the server's own."""
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.update(node_settings())
    return env


#: The ports a `ray start` node listens on besides the head's own; ``port(name)`` picks each.
NODE_PORTS = (
    "node_manager", "object_manager", "agent_http", "agent_grpc", "runtime_env", "metrics",
)  # fmt: skip
#: The head's own ports, before the node ports.
HEAD_PORTS = ("gcs", "dashboard", "client")


def distinct_ports() -> Callable[[str], int]:
    """A picker of free ports that never gives the same one twice.

    Each :func:`free_port` closes its socket before the next is opened, so the OS may hand
    out the same port again, and ``ray start`` then refuses ("trying to use a port number
    that is used by other components"); one node's ports come from one picker.
    """
    given: set[int] = set()

    def pick(_name: str) -> int:
        for _ in range(100):  # bounded: a repeat is rare, a hundred in a row unheard of
            found = free_port()
            if found not in given:
                given.add(found)
                return found
        raise LaunchError("No free TCP port could be found on this machine for a Ray node.")

    return pick


def port_block(base: int) -> Callable[[str], int]:
    """A picker of consecutive ports from ``base``, one per name of :data:`HEAD_PORTS` and
    :data:`NODE_PORTS`, for a node whose free ports cannot be checked from here (another
    machine, a batch job's node).

    >>> pick = port_block(20000)
    >>> pick("gcs"), pick("node_manager")
    (20000, 20003)
    """
    names = HEAD_PORTS + NODE_PORTS
    return lambda name: base + names.index(name)


def node_arguments(
    spec: NodeSpec, ip: str, temp_dir: str, port: Callable[[str], int | str] | None = None
) -> list[str]:
    """The ``ray start`` arguments every node takes, whoever runs it.

    This is the one builder of them: the local backend calls it with ports picked here
    (``port`` returns a free port), the ssh and allocation backends with a block of ports on the
    node (:func:`port_block`), the batch schedulers' job scripts with shell variables that the
    job sets on its node (``port`` returns ``"$node_manager"``); by default each port is a
    distinct free one (:func:`distinct_ports`).
    """
    if port is None:
        port = distinct_ports()
    args = [
        f"--node-ip-address={ip}",
        f"--num-cpus={spec.num_cpus}",
        f"--num-gpus={spec.num_gpus}",
        f"--temp-dir={ray_temp_dir(temp_dir)}",
        f"--node-manager-port={port('node_manager')}",
        f"--object-manager-port={port('object_manager')}",
        f"--dashboard-agent-listen-port={port('agent_http')}",
        f"--dashboard-agent-grpc-port={port('agent_grpc')}",
        f"--runtime-env-agent-port={port('runtime_env')}",
        f"--metrics-export-port={port('metrics')}",
        "--disable-usage-stats",
        "--log-style=record",
        "--log-color=false",
    ]
    if spec.memory is not None:
        args.append(f"--memory={spec.memory}")
    if spec.object_store_memory is not None:
        args.append(f"--object-store-memory={spec.object_store_memory}")
    return args


#: A launcher's own report that the command it ran failed (srun's "task 0: Exited with exit
#: code 1"): it says only that, so the command's own lines come first.
_LAUNCHER_EXIT = re.compile(r"srun: error: .*: tasks? [\d,-]+: (Exited with exit code|Killed)")


def why(output: str, returncode: int | None = None) -> str:
    """The most telling line of a failed ``ray start``; with its exit status when it printed
    no error (a process killed from outside prints nothing).

    A launcher's line that the command failed never hides what the command printed:

    >>> why("raylet: the node ran out of ports\\nsrun: error: n2: task 0: Exited with exit code 1")
    'raylet: the node ran out of ports'
    """
    printed = [line.strip() for line in output.splitlines() if line.strip()]
    lines = [line for line in printed if " INFO " not in line and not _LAUNCHER_EXIT.match(line)]
    needles = ("timed out during startup", "address already in use", "already in use", "Error",
               "error", "Exception")  # fmt: skip
    for needle in needles:
        for line in reversed(lines):
            if needle in line:
                return line[:500]
    if lines:
        return lines[-1][:500]
    status = "" if returncode is None else f" and ended with {_status(returncode)}"
    if printed:
        return f"it printed no error{status}; its last line: {printed[-1][:400]}"
    return f"it printed nothing{status}"


def _status(returncode: int) -> str:
    # Popen's negative code is the signal; a shell or coreutils' timeout reports 128 + signal.
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        name = signal.Signals(number).name if number else ""
    except ValueError:
        name = ""
    return f"exit {returncode}" + (f" (killed by {name})" if name else "")


def run_ray_start(args: list[str], timeout: float) -> int:
    """Run one ``ray start`` in a new session; returns its process group id (== its pid).

    At most :data:`STARTS_AT_ONCE` run at a time in this process."""
    with _starts:
        started = time.time()
        temp_dir = next((a.split("=", 1)[1] for a in args if a.startswith("--temp-dir=")), None)
        proc = subprocess.Popen(
            [ray_executable(), "start", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=environment(),
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:  # a communicate that timed out keeps what was read: asking again loses nothing
                output, _ = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                fatal = _fatal_line(temp_dir, started) if temp_dir else None
                if fatal is None and time.monotonic() < deadline:
                    continue
            _kill_groups([proc.pid])  # `ray start` would wait on for a dying process
            proc.communicate()
            raise LaunchError(
                f"`ray start` failed: {fatal}"
                if fatal is not None
                else f"`ray start` did not finish within {timeout:g} s; the machine may be "
                "overloaded. Try again, or launch fewer nodes."
            )
        if proc.returncode != 0:
            _kill_groups([proc.pid])
            raise LaunchError(f"`ray start` failed (exit {proc.returncode}): {why(output)}")
        return proc.pid


#: A Ray process's fatal log line: ``[time C pid tid] (gcs_server) file.cc:N: message``.
_FATAL = re.compile(r"^\[[^\]]* C \d+ \d+\] \((\w+)\) [\w./-]+:\d+:\s*(.*)$")
#: What Ray puts before any failed check's own words.
_BOILERPLATE = re.compile(
    r"An unexpected system state has occurred\..*?fix it\.\s*(Check failed: \S+ )?"
)


def _fatal_line(temp_dir: str, since: float) -> str | None:
    """What a node's GCS or raylet said as it failed (its fatal log line, Ray's boilerplate
    dropped), in the sessions under ``temp_dir`` begun since ``since``; None if neither did.

    Ray's crash handler can take half a minute to end such a process, and `ray start` waits
    for it: a port taken before the GCS bound it kept a launch waiting 40 s for its error."""
    for name in ("gcs_server.err", "raylet.err"):
        for path in Path(temp_dir).glob(f"session_*/logs/{name}"):
            try:
                if path.stat().st_mtime < since:
                    continue  # an earlier try's
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for match in filter(None, map(_FATAL.match, lines)):
                return f"its {match[1]} stopped: {_BOILERPLATE.sub('', match[2])}"[:500]
    return None


def head_arguments(
    spec: NodeSpec,
    ip: str,
    temp_dir: str,
    port: Callable[[str], int | str] | None = None,
    dashboard_host: str = "127.0.0.1",
) -> tuple[list[str], int | str, int | str]:
    """``ray start`` arguments of a head node, with its GCS and dashboard ports (by default
    all distinct free ones, the node's too)."""
    if port is None:
        port = distinct_ports()
    gcs_port, dashboard_port = port("gcs"), port("dashboard")
    args = [
        "--head",
        f"--port={gcs_port}",
        f"--dashboard-host={dashboard_host}",
        f"--dashboard-port={dashboard_port}",
        "--include-dashboard=true",
        f"--ray-client-server-port={port('client')}",
        "--system-config=" + json.dumps(SYSTEM_CONFIG, separators=(",", ":")),
        *node_arguments(spec, ip, temp_dir, port),
    ]
    return args, gcs_port, dashboard_port


def describe(spec: NodeSpec) -> str:
    parts = [f"{spec.num_cpus} CPU{'s' if spec.num_cpus != 1 else ''}"]
    if spec.num_gpus:
        parts.append(f"{spec.num_gpus} GPU{'s' if spec.num_gpus != 1 else ''}")
    return " and ".join(parts)
