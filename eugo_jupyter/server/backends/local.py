"""The `local` backend: a head and worker nodes on this machine, `ray start` processes, each in
its own process group.

Blocking functions (the manager runs them in a thread). Every command is an argument list, never
a shell string. Each node gets free ports chosen up front, a dashboard bound to 127.0.0.1, token
authentication on, and the cluster's own ``--temp-dir``, so stopping a cluster means killing
exactly the process groups it started (never ``ray stop``, which would hit other clusters); how
those processes are found and stopped is :mod:`.processes`.

>>> head, workers = NodeSpec(num_cpus=1), [NodeSpec(num_cpus=1, num_gpus=1)]  # doctest: +SKIP
>>> nodes = launch(head, workers, "/tmp/eugo-c-1")                          # doctest: +SKIP
>>> stop(nodes.pgids, nodes.temp_dir)                                       # doctest: +SKIP
[]
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..._raytoken import secure_token_file
from ..._tempdirs import make_private, ray_temp_dir
from ...exceptions import ClusterError, LaunchError, OptionsError  # noqa: F401  (LaunchError re-exported)
from .. import requests
from ..exporters import closed_exporters
from .base import Backend, Observed, Plan, Spec

# The "x as x" imports: names the tests and benchmarks import from here, where they used to live.
from .processes import _cmdline as _cmdline
from .processes import _kill_groups, owned_groups, stop
from .processes import _processes as _processes
from .processes import cluster_processes as cluster_processes
from .processes import group_members as group_members

__all__ = [
    "LaunchError",
    "LocalBackend",
    "Launched",
    "NodeSpec",
    "group_members",
    "launch",
    "ray_executable",
    "stop",
]


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


@dataclass
class Launched:
    """A started cluster: where it answers and which process groups belong to it."""

    gcs_address: str
    dashboard_url: str
    temp_dir: str
    pgids: list[int] = field(default_factory=list)


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


def _environment() -> dict[str, str]:
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


def _free(_name: str) -> int:
    return free_port()


def _node_args(
    spec: NodeSpec, ip: str, temp_dir: str, port: Callable[[str], int | str] = _free
) -> list[str]:
    """The ``ray start`` arguments every node takes, whoever runs it.

    This is the one builder of them: the local and ssh backends call it with ports picked here
    (``port`` returns a free port), the batch schedulers' job scripts with shell variables that
    the job sets on its node (``port`` returns ``"$node_manager"``).
    """
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


def _why(output: str) -> str:
    """The most telling line of a failed ``ray start``."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and " INFO " not in line]
    for needle in ("address already in use", "already in use", "Error", "error", "Exception"):
        for line in reversed(lines):
            if needle in line:
                return line[:500]
    return lines[-1][:500] if lines else "no output"


def _run_ray_start(args: list[str], timeout: float) -> int:
    """Run one ``ray start`` in a new session; returns its process group id (== its pid)."""
    proc = subprocess.Popen(
        [ray_executable(), "start", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=_environment(),
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
        raise LaunchError(f"`ray start` failed (exit {proc.returncode}): {_why(output)}")
    return proc.pid


def head_arguments(
    spec: NodeSpec,
    ip: str,
    temp_dir: str,
    port: Callable[[str], int | str] = _free,
    dashboard_host: str = "127.0.0.1",
) -> tuple[list[str], int | str, int | str]:
    """``ray start`` arguments of a head node, with its GCS and dashboard ports."""
    gcs_port, dashboard_port = port("gcs"), port("dashboard")
    args = [
        "--head",
        f"--port={gcs_port}",
        f"--dashboard-host={dashboard_host}",
        f"--dashboard-port={dashboard_port}",
        "--include-dashboard=true",
        f"--ray-client-server-port={port('client')}",
        *_node_args(spec, ip, temp_dir, port),
    ]
    return args, gcs_port, dashboard_port


def _start_worker(
    spec: NodeSpec, address: str, ip: str, temp_dir: str, timeout: float, index: int
) -> int:
    """Start one worker node, trying twice: a busy GCS can miss a raylet's first registration."""
    for attempt in (1, 2):
        try:
            return _run_ray_start(
                [f"--address={address}", *_node_args(spec, ip, temp_dir)], timeout
            )
        except LaunchError as exc:
            if attempt == 2:
                raise LaunchError(f"Worker node {index + 1} did not start: {exc}") from None
    raise AssertionError("unreachable")


#: `ray start --head` failures worth one more try: a port taken between our pick and Ray's bind,
#: and a busy machine where the node misses Ray's fixed registration window.
_RETRIED = ("already in use", "during startup", "Failed to get node info")


def launch(
    head: NodeSpec, workers: list[NodeSpec], temp_dir: str, timeout: float = 180
) -> Launched:
    """Start a head and ``workers`` on this machine; every node up, or nothing left running."""
    ip = node_ip()
    secure_token_file(create=True)  # `ray start` would write a missing token world-readable
    make_private(temp_dir)  # Ray's own folders (0777) go inside, at ray_temp_dir(temp_dir)
    for attempt in (1, 2):
        head_args, gcs_port, dashboard_port = head_arguments(head, ip, temp_dir)
        try:
            pgids = [_run_ray_start(head_args, timeout)]
            break
        except LaunchError as exc:
            # Ports are picked free, but another program can take one before Ray binds it; and
            # on a busy machine the raylet can miss `ray start`'s fixed 30 s registration window.
            if attempt == 1 and any(s in str(exc) for s in _RETRIED):
                stop([], temp_dir)  # what the failed start left (its daemons name temp_dir)
                make_private(temp_dir)
                continue
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise
        except BaseException:
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise
    address = f"{ip}:{gcs_port}"
    try:
        # One after the other: on a small, busy machine parallel starts only make each slower.
        for index, worker in enumerate(workers):
            pgids.append(_start_worker(worker, address, ip, temp_dir, timeout, index))
    except BaseException:
        stop(pgids, temp_dir)
        raise
    return Launched(
        gcs_address=address,
        dashboard_url=f"http://127.0.0.1:{dashboard_port}",
        temp_dir=temp_dir,
        pgids=pgids,
    )


# ---------------------------------------------------------------- the backend


MAX_WORKERS = 32
MAX_CPUS = 1024
MAX_GPUS = 64
_NODE_KEYS = ("num_cpus", "num_gpus", "memory", "object_store_memory")


@dataclass(frozen=True)
class LocalSpec:
    """A checked local launch: the head and the worker nodes."""

    head: NodeSpec
    workers: tuple[NodeSpec, ...]

    def to_model(self) -> dict[str, object]:
        return {"head": self.head.to_model(), "workers": [w.to_model() for w in self.workers]}


def parse_node(value: object, where: str, most: int | None = None) -> NodeSpec:
    """Check one node of a local launch body; its memory sizes at most ``most`` bytes (default:
    this machine's memory, where a local node runs).

    >>> parse_node({"num_cpus": 2}, "head")
    NodeSpec(num_cpus=2, num_gpus=0, memory=None, object_store_memory=None)
    """
    from ..._units import parse_memory

    node = requests.mapping(value, where, '{"num_cpus": 1, "num_gpus": 0}')
    requests.keys(node, _NODE_KEYS, where)
    memory, store = node.get("memory"), node.get("object_store_memory")
    memory = None if memory is None else parse_memory(memory, f"{where}.memory")
    store = None if store is None else parse_memory(store, f"{where}.object_store_memory")
    requests.check_node_memory(memory, store, where, most)
    return NodeSpec(
        num_cpus=requests.count(node.get("num_cpus", 1), "num_cpus", where, 0, MAX_CPUS),
        num_gpus=requests.count(node.get("num_gpus", 0), "num_gpus", where, 0, MAX_GPUS),
        memory=memory,
        object_store_memory=store,
    )


def _describe(spec: NodeSpec) -> str:
    parts = [f"{spec.num_cpus} CPU{'s' if spec.num_cpus != 1 else ''}"]
    if spec.num_gpus:
        parts.append(f"{spec.num_gpus} GPU{'s' if spec.num_gpus != 1 else ''}")
    return " and ".join(parts)


class LocalBackend(Backend):
    """``kind: "local"``: a head and worker nodes on this machine (the code above)."""

    kind = "local"
    label = "local"

    def validate(self, body: dict[str, object]) -> Spec:
        requests.keys(body, ("kind", "name", "head", "workers", "lifetime"), "a local launch")
        head = parse_node(body.get("head", {}), "head")
        workers_in = body.get("workers", [])
        if not isinstance(workers_in, list):
            raise OptionsError(
                f'workers must be a list of nodes such as [{{"num_cpus": 1}}], not {workers_in!r}.'
            )
        if len(workers_in) > MAX_WORKERS:
            raise OptionsError(
                f"{len(workers_in)} worker nodes is too many: at most {MAX_WORKERS} on one machine."
            )
        workers = tuple(parse_node(w, f"workers[{i}]") for i, w in enumerate(workers_in))
        for i, worker in enumerate(workers):
            if worker.num_cpus == 0 and worker.num_gpus == 0:
                raise OptionsError(
                    f"workers[{i}] offers nothing: give it num_cpus or num_gpus above 0."
                )
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), "local"),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=LocalSpec(head=head, workers=workers),
        )

    def plan(self, spec: Spec) -> Plan:
        fields: LocalSpec = spec.fields
        summary = f"A head with {_describe(fields.head)}"
        if fields.workers:
            summary += " and " + ", ".join(f"a worker with {_describe(w)}" for w in fields.workers)
        commands = [[ray_executable(), "start", "--head", "..."]]
        commands += [[ray_executable(), "start", "--address=HEAD", "..."] for _ in fields.workers]
        return Plan(summary=summary + " on this machine.", commands=commands)

    def start(self, spec: Spec, record: dict[str, object], timeout: float) -> dict[str, object]:
        fields: LocalSpec = spec.fields
        # Short on purpose: Ray puts unix sockets under it (108-byte limit).
        temp_dir = f"{tempfile.gettempdir()}/eugo-{record['id']}"
        started = launch(fields.head, list(fields.workers), temp_dir, timeout)
        return {
            "address": started.gcs_address,
            "dashboard_url": started.dashboard_url,
            "temp_dir": temp_dir,
            "pgids": started.pgids,
            "pids": started.pgids,
        }

    def state(self, record: dict[str, object]) -> Observed:
        spec = cast("dict[str, Any]", record.get("spec") or {})
        observed = Observed(
            address=_str_or_none(record.get("address")),
            dashboard_url=_str_or_none(record.get("dashboard_url")),
            nodes_expected=1 + len(spec.get("workers", [])),
        )
        if record.get("pgids") and not owned_groups(_pgids(record), _temp_dir(record)):
            observed.ended = (
                "The cluster's processes are gone (stopped outside the manager, or killed). "
                "Remove it and launch a new one."
            )
        return observed

    def stop(self, record: dict[str, object]) -> list[str]:
        return [f"pid {pid}" for pid in stop(_pgids(record), _temp_dir(record))]

    def adopt(self, record: dict[str, object]) -> str | None:
        from .. import monitor

        pgids, temp_dir = _pgids(record), _temp_dir(record)
        alive = bool(temp_dir) and bool(owned_groups(pgids, temp_dir))
        address = _str_or_none(record.get("address"))
        if alive and address and monitor.reachable(address):
            return "running"
        if alive:  # half a cluster: its head is gone, so nothing can use the rest
            stop(pgids, temp_dir)
        return None


def _pgids(record: dict[str, object]) -> list[int]:
    return [int(p) for p in cast("list[int | str]", record.get("pgids", []))]


def _temp_dir(record: dict[str, object]) -> str:
    return str(record.get("temp_dir") or "")


def _str_or_none(value: object) -> str | None:
    return None if value is None else str(value)
