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

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ..._processes import owned_groups, stop
from ..._raytoken import secure_token_file
from ..._tempdirs import make_private
from ...exceptions import LaunchError, OptionsError
from .. import requests
from .base import Backend, Form, Observed, Plan, Spec
from .ray_start import (
    NodeSpec,
    describe,
    head_arguments,
    node_arguments,
    node_ip,
    ray_executable,
    retrying,
    run_ray_start,
)

__all__ = ["LocalBackend", "Launched", "launch", "parse_node"]


@dataclass
class Launched:
    """A started cluster: where it answers and which process groups belong to it."""

    gcs_address: str
    dashboard_url: str
    temp_dir: str
    pgids: list[int] = field(default_factory=list)


def _start_worker(
    spec: NodeSpec,
    address: str,
    ip: str,
    temp_dir: str,
    timeout: float,
    index: int,
    say: Callable[[str | None], None],
) -> int:
    """Start one worker node, tried again (with a pause) if it fails: a busy GCS can miss a
    raylet's first registration."""
    try:
        return retrying(
            lambda: run_ray_start(
                [f"--address={address}", *node_arguments(spec, ip, temp_dir)], timeout
            ),
            lambda: None,  # a failed `ray start` leaves nothing: its group was killed
            say, f"Worker node {index + 1}", any_error=True,
        )  # fmt: skip
    except LaunchError as exc:
        said = str(exc)
        if said.startswith(f"Worker node {index + 1} "):  # the busy machine's sentence
            raise
        raise LaunchError(f"Worker node {index + 1} did not start: {said}") from None


#: `ray start --head` failures worth one more try with new ports: a port taken between our pick
#: and Ray's bind. (A start that timed out on a busy machine is :func:`.ray_start.retrying`'s.)
_PORT_RACE = ("already in use", "Failed to get node info")


def _quiet(_: str | None) -> None:
    return None


def launch(
    head: NodeSpec, workers: list[NodeSpec], temp_dir: str, timeout: float = 180,
    say: Callable[[str | None], None] = _quiet,
) -> Launched:  # fmt: skip
    """Start a head and ``workers`` on this machine; every node up, or nothing left running.

    ``say`` hears each retry of a start (the card shows it) and None once a start went on.
    """
    ip = node_ip()
    secure_token_file(create=True)  # `ray start` would write a missing token world-readable
    make_private(temp_dir)  # Ray's own folders (0777) go inside, at ray_temp_dir(temp_dir)

    def reset() -> None:
        stop([], temp_dir)  # what the failed start left (its daemons name temp_dir)
        make_private(temp_dir)

    def start_head() -> tuple[int, int | str, int | str]:
        for attempt in (1, 2):
            head_args, gcs, dashboard = head_arguments(head, ip, temp_dir)
            try:
                return run_ray_start(head_args, timeout), gcs, dashboard
            except LaunchError as exc:
                # Ports are picked free, but another program can take one before Ray binds it.
                if attempt == 1 and any(s in str(exc) for s in _PORT_RACE):
                    reset()
                    continue
                raise
        raise AssertionError("unreachable")

    try:
        pgid, gcs_port, dashboard_port = retrying(start_head, reset, say, "The head")
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    pgids = [pgid]
    address = f"{ip}:{gcs_port}"
    try:
        # One after the other: on a small, busy machine parallel starts only make each slower.
        for index, worker in enumerate(workers):
            pgids.append(_start_worker(worker, address, ip, temp_dir, timeout, index, say))
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


class LocalBackend(Backend):
    """``kind: "local"``: a head and worker nodes on this machine (the code above)."""

    kind = "local"
    label = "local"
    form = Form(label="Local", widget="nodes", rank=0)

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
        summary = f"A head with {describe(fields.head)}"
        if fields.workers:
            summary += " and " + ", ".join(f"a worker with {describe(w)}" for w in fields.workers)
        commands = [[ray_executable(), "start", "--head", "..."]]
        commands += [[ray_executable(), "start", "--address=HEAD", "..."] for _ in fields.workers]
        return Plan(summary=summary + " on this machine.", commands=commands)

    def start(self, spec: Spec, record: dict[str, object], timeout: float) -> dict[str, object]:
        fields: LocalSpec = spec.fields
        # Short on purpose: Ray puts unix sockets under it (108-byte limit).
        temp_dir = f"{tempfile.gettempdir()}/eugo-{record['id']}"
        started = launch(
            fields.head, list(fields.workers), temp_dir, timeout,
            say=lambda text: record.__setitem__("progress", text),
        )  # fmt: skip
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
