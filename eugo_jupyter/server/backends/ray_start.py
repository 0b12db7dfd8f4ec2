"""The `ray start` toolkit: what every backend that runs `ray start` shares.

One builder of a node's arguments (:func:`node_arguments`, :func:`head_arguments`), used by the
local and ssh backends with ports picked here and by the batch schedulers' job scripts with the
job's shell variables; running one `ray start` in a session of its own (:func:`run_ray_start`)
and the line that says why it failed (:func:`why`); the node's environment, address and a free
port.

>>> args, port, _ = head_arguments(NodeSpec(num_cpus=2), "192.0.2.2", "/tmp/eugo-c-1")
>>> args[0], "--num-cpus=2" in args, "--temp-dir=/tmp/eugo-c-1/r" in args
('--head', True, True)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..._tempdirs import ray_temp_dir
from ...exceptions import LaunchError
from ..exporters import closed_exporters
from .processes import _kill_groups

__all__ = [
    "HEAD_PORTS", "NODE_PORTS", "REPORT_EVERY_MS", "SYSTEM_CONFIG", "NodeSpec", "describe",
    "distinct_ports", "environment", "free_port", "head_arguments", "node_arguments", "node_ip",
    "ray_executable", "run_ray_start", "why",
]  # fmt: skip

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


def environment() -> dict[str, str]:
    env = dict(os.environ)
    # A head started by `ray start` turns token auth on by itself, but a worker node only sends
    # the token when told to: say so for every node, so the cluster keeps auth on end to end.
    env["RAY_AUTH_MODE"] = "token"
    env.pop("RAY_ADDRESS", None)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.update(closed_exporters())
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


def node_arguments(
    spec: NodeSpec, ip: str, temp_dir: str, port: Callable[[str], int | str] | None = None
) -> list[str]:
    """The ``ray start`` arguments every node takes, whoever runs it.

    This is the one builder of them: the local and ssh backends call it with ports picked here
    (``port`` returns a free port), the batch schedulers' job scripts with shell variables that
    the job sets on its node (``port`` returns ``"$node_manager"``); by default each port is a
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


def why(output: str) -> str:
    """The most telling line of a failed ``ray start``."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and " INFO " not in line]
    for needle in ("address already in use", "already in use", "Error", "error", "Exception"):
        for line in reversed(lines):
            if needle in line:
                return line[:500]
    return lines[-1][:500] if lines else "no output"


def run_ray_start(args: list[str], timeout: float) -> int:
    """Run one ``ray start`` in a new session; returns its process group id (== its pid)."""
    proc = subprocess.Popen(
        [ray_executable(), "start", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment(),
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_groups([proc.pid])
        proc.communicate()
        raise LaunchError(
            f"`ray start` did not finish within {timeout:g} s; the machine may be overloaded. "
            "Try again, or launch fewer nodes."
        ) from None
    if proc.returncode != 0:
        _kill_groups([proc.pid])
        raise LaunchError(f"`ray start` failed (exit {proc.returncode}): {why(output)}")
    return proc.pid


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
