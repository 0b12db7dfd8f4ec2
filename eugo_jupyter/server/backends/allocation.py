"""``kind: "allocation"``: Ray across the batch job this process already runs in.

No job is submitted. The head starts on this node; every other node of the job gets one worker,
started with the scheduler's own launcher (``srun --overlap --nodes=1 --ntasks=1 -w NODE``,
``qrsh -inherit NODE``, ``pbsdsh -h NODE``), so the worker is a step of the job: it runs on the
job's CPUs and ends with the job. Resources come from the job, not the machine: each node's CPUs
as the scheduler counts them (``SLURM_JOB_CPUS_PER_NODE``, ``SLURM_CPUS_ON_NODE``, the PE or node
file's slots; this node's CPU set caps them), this node's GPUs (``CUDA_VISIBLE_DEVICES``,
``SLURM_JOB_GPUS``) and memory (the cgroup limit). Ports come from a block derived from the job
id (:func:`.allocation_env.ports_of`), the temp folder is the cluster's own, token auth is on.
Every node runs ``ray start --block`` under ``timeout``, so the whole cluster ends ``margin``
seconds (default 300) before the job's wall time even when nothing watches it, and in any case
with the job: its processes are the job's.

>>> from eugo_jupyter.server.backends.allocation_env import Allocation, Node
>>> job = Allocation("slurm", "42", (Node("n1", 4), Node("n2", 4)), launcher=("srun", "-w"))
>>> worker_command(job, job.nodes[1], 1, "192.0.2.2:20000", "/tmp/eugo-c-1", 600)[:3]
['srun', '-w', 'n2']
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..._processes import cgroup_memory_limit, owned_groups, stop
from ..._rayaddress import reachable
from ..._raytoken import secure_token_file
from ..._tempdirs import make_private
from ...exceptions import LaunchError
from .. import requests
from .allocation_env import Allocation, Node, detect, ports_of, seconds_left
from .base import Backend, Form, FormField, Observed, Plan, Spec
from .local import _pgids, _temp_dir
from .ray_start import (
    NodeSpec,
    environment,
    head_arguments,
    node_arguments,
    node_ip,
    node_settings,
    one_start,
    port_block,
    ray_executable,
    retrying,
    why,
)

__all__ = ["AllocationBackend", "AllocationSpec", "head_command", "worker_command"]

DEFAULT_MARGIN = 300
_KEYS = ("margin",)


@dataclass(frozen=True)
class AllocationSpec:
    """A checked allocation launch: the job and how long before its end the cluster stops."""

    job: Allocation
    margin: int

    def to_model(self) -> dict[str, Any]:
        return {
            "scheduler": self.job.scheduler,
            "job_id": self.job.job_id,
            "nodes": [{"name": n.name, "cpus": n.cpus} for n in self.job.nodes],
            "gpus": self.job.gpus,
            "margin": self.margin,
        }


def _timeout(run_for: float | None) -> list[str]:
    # coreutils' timeout ends the node before the job's wall time; TERM lets `ray start --block`
    # stop its processes, KILL follows 30 s later if they have not.
    return [] if run_for is None else ["timeout", "--kill-after=30", f"{int(run_for)}s"]


def _cpus_here(node: Node) -> int:
    # The job's count, capped by the CPU set this process may run on (an enforced cgroup).
    return max(1, min(node.cpus, len(os.sched_getaffinity(0))))


def head_spec(job: Allocation) -> NodeSpec:
    limit = cgroup_memory_limit()
    memory = store = None
    if limit is not None and limit >= 4 * requests.MIN_OBJECT_STORE:
        store = max(requests.MIN_OBJECT_STORE, int(limit * 0.25))
        memory = int(limit * 0.7) - store
    return NodeSpec(
        num_cpus=_cpus_here(job.nodes[0]), num_gpus=job.gpus, memory=memory,
        object_store_memory=store,
    )  # fmt: skip


def head_command(job: Allocation, ip: str, temp_dir: str, run_for: float | None) -> list[str]:
    """The head's exact command line on this node."""
    args, _, _ = head_arguments(head_spec(job), ip, temp_dir, port_block(ports_of(job.job_id, 0)))
    return [*_timeout(run_for), ray_executable(), "start", *args, "--block"]


def worker_command(
    job: Allocation, node: Node, index: int, address: str, temp_dir: str, run_for: float | None
) -> list[str]:
    """The exact command that starts node ``index``'s worker through the scheduler."""
    spec = NodeSpec(num_cpus=node.cpus)
    args = node_arguments(spec, "", temp_dir, port_block(ports_of(job.job_id, index)))
    args = [a for a in args if not a.startswith("--node-ip-address")]  # the node's own
    launcher = [part.format(cpus=node.cpus) for part in job.launcher]
    ray = [*_timeout(run_for), ray_executable(), "start", f"--address={address}", *args]
    if job.scheduler != "slurm":  # srun passes the environment; qrsh and pbsdsh are told
        env = node_settings()
        if os.environ.get("RAY_AUTH_TOKEN_PATH"):
            env["RAY_AUTH_TOKEN_PATH"] = os.environ["RAY_AUTH_TOKEN_PATH"]
        ray = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *ray]
    return [*launcher, node.name, *ray, "--block"]


def _run_for(job: Allocation, margin: int) -> float | None:
    """Seconds the cluster may run: to the job's wall time less ``margin``; None if unknown."""
    left = seconds_left(job)
    if left is None and job.scheduler == "slurm":
        from .slurm import SlurmBackend

        try:
            state = SlurmBackend().query([job.job_id], {}).get(job.job_id)
        except Exception:  # noqa: BLE001 - an unreadable queue leaves the end to the job
            state = None
        left = float(state.time_left) if state and state.time_left is not None else None
    return None if left is None else left - margin


def _spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # one log per try: what the last try said
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=environment(), start_new_session=True,
        )  # fmt: skip


def _nothing() -> None:
    return None  # a failed worker's `ray start` has exited: nothing of it is left to stop


#: What `ray start --block` prints once its node is up (then it blocks).
_UP = "block forever"


def _start(
    command: list[str],
    log: Path,
    temp_dir: str,
    timeout: float,
    up: Callable[[], bool],
    what: str,
    late: str,
) -> int:
    """Spawn ``command`` (a few node starts at a time in this process) and wait until ``up()``;
    its process group. LaunchError if it exits first (``what`` failed: what it printed and how
    it ended; the retry rule reads why) or takes longer than ``timeout`` (``late``)."""
    with one_start():
        proc = _spawn(command, log)
        deadline = time.monotonic() + timeout
        while not up():
            if proc.poll() is not None:
                text = log.read_text(errors="replace")
                raise LaunchError(f"{what} failed: {why(text, proc.returncode)}")
            if time.monotonic() > deadline:
                stop([proc.pid], temp_dir)
                raise LaunchError(late)
            time.sleep(0.5)
    return proc.pid


class AllocationBackend(Backend):
    """Ray on the nodes of the job this process runs in (the module's docstring)."""

    kind = "allocation"
    label = "This job's nodes"
    form_fields = _KEYS
    form = Form(
        (FormField("margin", "Stop before the wall time (s)", "count", 300, low=0, high=604800),),
        "Ray across the batch job this server runs in: the head on this node, a worker on each "
        "other node through the scheduler's own launcher (srun, qrsh -inherit, pbsdsh), on the "
        "job's CPUs only. No job is submitted.",
        rank=30,
    )
    stop_effect = (
        "Every Ray process of this cluster stops; the job itself goes on. Running tasks and "
        "objects in its store are lost."
    )

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "lifetime", "allocation"), "an allocation launch")
        given = requests.mapping(body.get("allocation", {}), "allocation", '{"margin": 300}')
        requests.keys(given, _KEYS, "allocation")
        margin = requests.count(given.get("margin", DEFAULT_MARGIN), "margin", "allocation",
                                0, 7 * 86400)  # fmt: skip
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), "allocation"),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=AllocationSpec(detect(), margin),
        )

    def facts(self) -> dict[str, Any]:
        return {**super().facts(), "available": self.available()}

    @staticmethod
    def available() -> bool:
        """Whether this process runs inside a batch job (the panel offers the kind only then)."""
        try:
            detect()
        except Exception:  # noqa: BLE001 - any reason means "not here"
            return False
        return True

    def plan(self, spec: Spec) -> Plan:
        fields: AllocationSpec = spec.fields
        job, ip, temp_dir = fields.job, node_ip(), f"{tempfile.gettempdir()}/eugo-<id>"
        run_for = _run_for(job, fields.margin)
        address = f"{ip}:{ports_of(job.job_id, 0)}"
        commands = [head_command(job, ip, temp_dir, run_for)]
        commands += [
            worker_command(job, node, i, address, temp_dir, run_for)
            for i, node in enumerate(job.nodes[1:], start=1)
        ]
        here = job.nodes[0]
        summary = (
            f"Ray on the {len(job.nodes)} node{'s' * (len(job.nodes) > 1)} of {job.label} job "
            f"{job.job_id}: the head on {here.name} ({head_spec(job).num_cpus} CPUs"
            + (f", {job.gpus} GPUs" if job.gpus else "")
            + ")"
            + "".join(f", a worker on {n.name} ({n.cpus} CPUs)" for n in job.nodes[1:])
            + (
                f"; it stops {fields.margin} s before the job's wall time"
                if run_for is not None
                else "; it ends with the job"
            )
            + ". No job is submitted."
        )
        return Plan(summary=summary, commands=commands)

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        fields: AllocationSpec = spec.fields
        job = fields.job
        run_for = _run_for(job, fields.margin)
        if run_for is not None and run_for < 60:
            raise LaunchError(
                f"{job.label} job {job.job_id} has {int(run_for + fields.margin)} s left, "
                f"too little beside the margin of {fields.margin} s: lower allocation.margin, "
                "or start a longer job."
            )
        secure_token_file(create=True)
        temp_dir = f"{tempfile.gettempdir()}/eugo-{record['id']}"
        make_private(temp_dir)
        ip = node_ip()
        gcs = f"{ip}:{ports_of(job.job_id, 0)}"
        if reachable(gcs, timeout=1.0):
            raise LaunchError(
                f"Port {gcs} of job {job.job_id} is taken (another allocation cluster of this "
                "job?): shut that one down first."
            )
        log = Path(temp_dir) / "head.log"

        def start_head() -> int:
            return _start(
                head_command(job, ip, temp_dir, run_for), log, temp_dir, timeout,
                lambda: reachable(gcs, timeout=1.0), "The head's `ray start`",
                f"The head did not answer at {gcs} within {timeout:g} s; the node may be "
                "overloaded. Try again.",
            )  # fmt: skip

        def reset() -> None:
            stop([], temp_dir)
            make_private(temp_dir)

        say = lambda text: record.__setitem__("progress", text)  # noqa: E731 - the card's line
        pgids = [retrying(start_head, reset, say, "The head")]
        try:
            for index, node in enumerate(job.nodes[1:], start=1):
                command = worker_command(job, node, index, gcs, temp_dir, run_for)
                start = functools.partial(
                    self._worker, command, node.name, index, temp_dir, timeout
                )
                # any failure: a busy GCS can miss a raylet's first registration (as local's)
                what = f"The worker on {node.name}"
                pgids.append(retrying(start, _nothing, say, what, any_error=True))
        except BaseException:
            self.stop({"pgids": pgids, "temp_dir": temp_dir})
            raise
        stops_at = None if run_for is None else time.time() + run_for
        return {
            "address": gcs,
            "dashboard_url": f"http://127.0.0.1:{ports_of(job.job_id, 0) + 1}",
            "temp_dir": temp_dir,
            "pgids": pgids,
            "pids": pgids,
            "allocation": {**fields.to_model(), "stops_at": stops_at},
        }

    @staticmethod
    def _worker(command: list[str], node: str, index: int, temp_dir: str, timeout: float) -> int:
        """Start one worker through the launcher; its process group once its node is up (its
        `ray start` says so through the launcher's output)."""
        log = Path(temp_dir) / f"worker-{index}.log"
        return _start(
            command, log, temp_dir, timeout, lambda: _UP in log.read_text(errors="replace"),
            f"`ray start` on {node}",
            f"`ray start` on {node} did not come up within {timeout:g} s.",
        )  # fmt: skip

    def state(self, record: dict[str, Any]) -> Observed:
        part = cast("dict[str, Any]", record.get("allocation") or {})
        nodes = part.get("nodes") or (record.get("spec") or {}).get("nodes") or [{}]
        stops_at = part.get("stops_at")
        observed = Observed(
            address=record.get("address"),
            dashboard_url=record.get("dashboard_url"),
            nodes_expected=len(nodes),
            detail={
                "job_id": part.get("job_id"),
                "scheduler": part.get("scheduler"),
                "nodes": nodes,
                "stops_in": None if stops_at is None else max(0, int(stops_at - time.time())),
            },
        )
        pgids = _pgids(record)
        if pgids and not owned_groups(pgids[:1], _temp_dir(record)):
            observed.ended = (
                "The cluster's head stopped: the job's wall time margin was reached, the job "
                "ended, or its processes were killed. Launch it again inside a job with time left."
            )
        return observed

    def stop(self, record: dict[str, Any]) -> list[str]:
        pgids = _pgids(record)
        # The launchers first: srun/qrsh/pbsdsh pass the TERM on, and the node's step ends.
        left = stop(pgids[1:], _temp_dir(record))
        left += stop(pgids[:1], _temp_dir(record))
        return [f"pid {pid}" for pid in left]

    def release(self, record: dict[str, Any]) -> None:
        self.stop(record)

    def adopt(self, record: dict[str, Any]) -> str | None:
        pgids, temp_dir = _pgids(record), str(record.get("temp_dir"))  # "None" when it has none
        alive = bool(owned_groups(pgids[:1], temp_dir))
        if alive and record.get("address") and reachable(str(record["address"])):
            return "running"
        if alive:
            stop(pgids, temp_dir)
        return None
