"""The `slurm` backend: the cluster's Ray nodes are SLURM jobs, one job per node.

Where the head runs: in a SLURM job of its own, on a compute node, never on the login node.
Login nodes are shared by every user, often limit a process's CPU time and memory, and their
ports are often unreachable from compute nodes; the compute nodes of one allocation reach each
other (Ray's own SLURM guide puts the head there too). So a cluster of ``nodes`` nodes is one
*head job* plus ``nodes - 1`` *worker jobs*; **Add node** submits one more worker job, **Remove
node** cancels one. Every job runs ``ray start --block`` so SLURM tracks Ray's processes and
``scancel`` ends them (a daemonised Ray would escape the job).

How the address travels: each cluster has a folder on the shared file system (``shared_dir``,
``~/.eugo/slurm`` by default: the home folder is shared on HPC clusters), passed to ``sbatch`` as
``--chdir``. The head job picks free ports on its node (nodes may be shared with other users),
starts Ray, and when the GCS is up writes ``head`` (``ip:port dashboard-url``) there, by write
and rename; worker jobs wait for that file, and the server reads it. Nothing polls the network.

SLURM is driven only through ``sbatch --parsable``, ``squeue`` and ``scancel``, as argument
lists; every user value is checked before it reaches a job script (see :meth:`validate`).

>>> backend = SlurmBackend("/shared/eugo")
>>> spec = backend.validate({"kind": "slurm", "slurm": {"nodes": 2, "walltime": "00:30:00"}})
>>> print(backend.plan(spec).summary)
2 SLURM jobs of 1 node each (1 CPU per node), wall time 00:30:00: the Ray head, then 1 worker.
"""

from __future__ import annotations

import getpass
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...exceptions import ClusterError, OptionsError
from .. import requests
from .base import Backend, Observed, Plan, Spec
from .local import _processes

__all__ = ["SlurmBackend", "SlurmError", "SlurmSpec", "reason_sentence"]

MAX_NODES = 256
_SLURM_KEYS = (
    "partition", "account", "walltime", "nodes", "cpus_per_node", "gpus_per_node",
    "memory_per_node", "extra",
)  # fmt: skip
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# SLURM's own formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_WALLTIME_RE = re.compile(r"\d{1,5}|\d{1,4}:\d{2}|\d{1,3}:\d{2}:\d{2}|\d{1,3}-\d{1,2}(:\d{2}){0,2}")
# One `#SBATCH` option per line: --name or --name=value, no spaces, quotes or shell characters.
_EXTRA_RE = re.compile(r"(?:#SBATCH\s+)?(--[a-z][a-z0-9-]*(?:=[A-Za-z0-9_.,:@%/+=-]+)?)")
# Options the manager sets itself (or that would change what the job is): use the form's fields.
_OWN_OPTIONS = {
    "--job-name", "--output", "--error", "--chdir", "--nodes", "--ntasks", "--cpus-per-task",
    "--time", "--partition", "--account", "--mem", "--gpus-per-node", "--array", "--wrap",
    "--parsable", "--export", "--export-file", "--input", "--kill-on-invalid-dep", "--wait",
}  # fmt: skip
_ENDED = {
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
}  # fmt: skip
# Pending reasons that do not go away by waiting: the request must change.
_IMPOSSIBLE = {
    "PartitionNodeLimit", "PartitionConfig", "PartitionTimeLimit", "BadConstraints",
    "InvalidAccount", "InvalidQOS", "PartitionDown", "PartitionInactive", "QOSMaxCpuPerJobLimit",
    "QOSMaxNodePerJobLimit", "QOSMaxWallDurationPerJobLimit", "AssocMaxWallDurationPerJobLimit",
    "AssocMaxNodesPerJobLimit", "AssocMaxCpuPerJobLimit",
}  # fmt: skip


class SlurmError(ClusterError):
    """A SLURM command refused or failed; the message is SLURM's own."""


@dataclass(frozen=True)
class SlurmSpec:
    """A checked SLURM launch (``memory_per_node`` in bytes)."""

    partition: str | None
    account: str | None
    walltime: str
    nodes: int
    cpus_per_node: int
    gpus_per_node: int
    memory_per_node: int | None
    extra: tuple[str, ...]

    def to_model(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "account": self.account,
            "walltime": self.walltime,
            "nodes": self.nodes,
            "cpus_per_node": self.cpus_per_node,
            "gpus_per_node": self.gpus_per_node,
            "memory_per_node": self.memory_per_node,
            "extra": list(self.extra),
        }


def walltime_seconds(value: str) -> int:
    """SLURM's wall-time formats in seconds.

    >>> walltime_seconds("1-02:00:00"), walltime_seconds("90"), walltime_seconds("05:30")
    (93600, 5400, 330)
    """
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # D-HH[:MM[:SS]]
        parts += [0] * (3 - len(parts))
        return int(days) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


def _extra(value: Any) -> tuple[str, ...]:
    lines = value.splitlines() if isinstance(value, str) else value
    if lines is None:
        return ()
    if not isinstance(lines, list) or len(lines) > 32:
        raise OptionsError(
            f"slurm.extra={value!r} is not allowed: give up to 32 #SBATCH options, one per line."
        )
    out = []
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise OptionsError(f"slurm.extra[{i}]={line!r} is not allowed: give a line of text.")
        if not line.strip():
            continue
        match = _EXTRA_RE.fullmatch(line.strip())
        if match is None:
            raise OptionsError(
                f"slurm.extra line {i + 1} {line!r} is not allowed: give one option per line, "
                "such as --qos=short or #SBATCH --constraint=a100, without spaces, quotes or "
                "shell characters."
            )
        option = match.group(1)
        if option.split("=")[0] in _OWN_OPTIONS:
            raise OptionsError(
                f"slurm.extra line {i + 1} {line!r} is not allowed: the manager sets "
                f"{option.split('=')[0]} itself; use the form's fields instead."
            )
        out.append(option)
    return tuple(out)


# ---------------------------------------------------------------- the job scripts

_PICK = (
    "import socket, sys, ray.util\n"
    "ip = ray.util.get_node_ip_address()\n"
    "socks = [socket.socket() for _ in range(int(sys.argv[1]))]\n"
    "for s in socks: s.bind((ip, 0))\n"
    "print(ip, *(s.getsockname()[1] for s in socks))"
)

_PROLOGUE = """\
set -euo pipefail
export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0
unset RAY_ADDRESS
# Ray's sockets and logs on this node only, one folder per job; removed when the job ends.
temp_dir="/tmp/eugo-$SLURM_JOB_ID"
trap 'rm -rf "$temp_dir"' EXIT
# On scancel or the wall time, let Ray stop its own processes before this script ends: an
# orphaned Ray would leave the job's process tree, where SLURM can no longer find it.
ray_pid=""
trap '[ -n "$ray_pid" ] && kill -TERM "$ray_pid" 2>/dev/null; wait; exit 143' TERM
# This node's address and free ports, picked here: the node may be shared with other users.
pick='{pick}'
"""

_NODE_ARGS = """\
    --node-manager-port="$nm" --object-manager-port="$om" \\
    --dashboard-agent-listen-port="$agent_http" --dashboard-agent-grpc-port="$agent_grpc" \\
    --runtime-env-agent-port="$runtime_env" --metrics-export-port="$metrics" \\
    --num-cpus={cpus} --num-gpus={gpus} --temp-dir="$temp_dir" \\
    --disable-usage-stats --log-style=record --log-color=false &
  ray_pid=$!
"""

_HEAD_BODY = """\
# A busy machine can make Ray's start time out (it waits 30 s for its own node): three tries.
for attempt in 1 2 3; do
  rm -f "$temp_dir/ray_current_cluster"
  read -r ip port dashboard client nm om agent_http agent_grpc runtime_env metrics \\
    < <({python} -c "$pick" 9)
  # --block keeps Ray inside this job, so scancel and the wall time end it.
  {ray} start --head --block --node-ip-address="$ip" --port="$port" \\
    --dashboard-host="$ip" --dashboard-port="$dashboard" --include-dashboard=true \\
    --ray-client-server-port="$client" \\
{node_args}  # Ray writes ray_current_cluster once the head is up: then publish the address.
  until [ -s "$temp_dir/ray_current_cluster" ] || ! kill -0 "$ray_pid" 2>/dev/null; do
    sleep 1
  done
  if kill -0 "$ray_pid" 2>/dev/null; then
    printf '%s:%s http://%s:%s\\n' "$ip" "$port" "$ip" "$dashboard" > head.tmp
    mv head.tmp head
    wait "$ray_pid"
    exit
  fi
  echo "ray start ended before the head was up, try $attempt of 3" >&2
done
exit 1
"""

_WORKER_BODY = """\
# Wait for the head job to publish its address in this cluster's folder.
until [ -s head ]; do sleep 1; done
read -r address dashboard_url < head
# A busy head can miss a node's registration (Ray waits 30 s for it): up to three tries.
for attempt in 1 2 3; do
  read -r ip nm om agent_http agent_grpc runtime_env metrics < <({python} -c "$pick" 6)
  {ray} start --block --address="$address" --node-ip-address="$ip" \\
{node_args}  status=0
  wait "$ray_pid" || status=$?
  echo "ray start ended (exit $status), try $attempt of 3" >&2
done
exit 1
"""


def _directives(spec: SlurmSpec) -> list[str]:
    lines = [
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={spec.cpus_per_node}",
        f"--time={spec.walltime}",
    ]
    if spec.partition:
        lines.append(f"--partition={spec.partition}")
    if spec.account:
        lines.append(f"--account={spec.account}")
    if spec.gpus_per_node:
        lines.append(f"--gpus-per-node={spec.gpus_per_node}")
    if spec.memory_per_node:
        lines.append(f"--mem={max(1, spec.memory_per_node // 2**20)}M")
    lines.append("--output=%x-%j.log")  # in the cluster's folder (the job's --chdir)
    lines.extend(spec.extra)
    return lines


def job_script(spec: SlurmSpec, role: str, python: str, ray: str) -> str:
    """The exact script ``sbatch`` gets for the head (``role="head"``) or a worker."""
    python, ray = shlex.quote(python), shlex.quote(ray)
    what = "the Ray head" if role == "head" else "a Ray worker node"
    header = "\n".join(
        ["#!/bin/bash", *(f"#SBATCH {line}" for line in _directives(spec))]
        + [
            f"# EugoHPC Manager: {what}. sbatch runs it with --chdir set to the cluster's folder",
            "# on the shared file system, where the head job publishes its address.",
        ]
    )
    node_args = _NODE_ARGS.format(cpus=spec.cpus_per_node, gpus=spec.gpus_per_node)
    body = _HEAD_BODY if role == "head" else _WORKER_BODY
    return "\n".join(
        [
            header,
            _PROLOGUE.format(pick=_PICK),
            body.format(python=python, ray=ray, node_args=node_args),
        ]
    )


# ---------------------------------------------------------------- SLURM's commands


def _slurm(args: list[str], timeout: float = 60.0) -> str:
    """Run one SLURM command (an argument list); SLURM's own message on failure."""
    if shutil.which(args[0]) is None:
        raise SlurmError(
            f"SLURM's `{args[0]}` command is not on this server's PATH. Run JupyterLab on a "
            "machine that can submit jobs (a login node of the cluster), or use kind 'local'."
        )
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"`{args[0]}` did not answer within {timeout:g} s; SLURM's controller may be busy."
        ) from None
    if done.returncode != 0:
        message = " ".join(
            line.removeprefix(f"{args[0]}: error: ").strip()
            for line in done.stderr.splitlines()
            if line.strip()
        )
        raise SlurmError(f"SLURM refused it ({args[0]}): {message or f'exit {done.returncode}'}")
    return done.stdout


@dataclass
class JobState:
    id: str
    state: str
    reason: str
    nodes: list[str]
    time_left: int | None


def _seconds(left: str) -> int | None:
    if not left or left in ("INVALID", "UNLIMITED", "NOT_SET"):
        return None
    try:
        return walltime_seconds(left) if "-" in left or ":" in left else int(left)
    except ValueError:
        return None


def squeue(job_ids: list[str]) -> dict[str, JobState]:
    """The state of these jobs (finished ones too, while SLURM remembers them)."""
    if not job_ids:
        return {}
    out = _slurm(
        [
            "squeue", f"--user={getpass.getuser()}", "--states=all", "--noheader",
            "--format=%i|%T|%r|%N|%L",
        ]
    )  # fmt: skip
    wanted, found = set(job_ids), {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5 and parts[0] in wanted:
            job_id, state, reason, nodes, left = parts
            found[job_id] = JobState(
                id=job_id,
                state=state,
                reason="" if reason in ("None", "(null)") else reason,
                nodes=[n for n in nodes.split(",") if n],
                time_left=_seconds(left) if state in ("RUNNING", "PENDING") else None,
            )
    return found


def reason_sentence(reason: str, partition: str | None) -> str:
    """SLURM's pending reason as a sentence a user can act on.

    >>> reason_sentence("Resources", "gpu")
    'waiting for free nodes in partition gpu (Resources)'
    """
    where = f"partition {partition}" if partition else "the default partition"
    known = {
        "None": "waiting for SLURM to schedule it",
        "Resources": f"waiting for free nodes in {where}",
        "Priority": f"waiting behind jobs with a higher priority in {where}",
        "PartitionNodeLimit": f"asks for more nodes than {where} has or allows; launch with "
        "fewer nodes",
        "PartitionConfig": f"asks for more CPUs, GPUs or memory per node than {where} has; "
        "launch with less per node",
        "PartitionTimeLimit": f"the wall time is longer than {where} allows; shorten it",
        "QOSMaxJobsPerUserLimit": "your account has reached its job limit",
        "AssocMaxJobsLimit": "your account has reached its job limit",
        "AssocGrpCpuLimit": "your account's group has used up its CPU allowance for now",
        "AssocGrpGRES": "your account's group has used up its GPU allowance for now",
        "ReqNodeNotAvail": "a node it needs is unavailable (down, drained or reserved)",
        "Dependency": "waiting for another job to finish",
        "BeginTime": "waiting for its start time",
        "JobHeldUser": "held by you (scontrol release to let it start)",
        "JobHeldAdmin": "held by an administrator",
        "PartitionDown": f"{where} is down",
        "PartitionInactive": f"{where} is inactive",
        "InvalidAccount": "the account is not valid for this partition; check the account field",
        "InvalidQOS": "the QOS is not valid for this account; check the extra options",
        "BadConstraints": "its constraints cannot be met by any node; check the extra options",
    }
    return f"{known.get(reason, 'pending')} ({reason})"


# ---------------------------------------------------------------- the backend


class SlurmBackend(Backend):
    """``kind: "slurm"``. The record keeps ``slurm: {"dir", "jobs": [{"id", "role"}]}``.

    The model's ``slurm`` key::

        {"dir": "/home/u/.eugo/slurm/c-3f9a2b1c", "walltime": "01:00:00",
         "jobs": [{"id": "4211", "role": "head", "state": "RUNNING", "reason": null,
                   "nodes": ["cn012"], "time_left": 3540},
                  {"id": "4212", "role": "worker", "state": "PENDING",
                   "reason": "waiting for free nodes in partition gpu (Resources)",
                   "nodes": [], "time_left": 3600}]}
    """

    kind = "slurm"
    scalable = True
    starts_quickly = True

    def __init__(self, shared_dir: str | None = None, python: str | None = None) -> None:
        self.shared_dir = Path(shared_dir or Path.home() / ".eugo" / "slurm")
        # The job runs the server's own Python and Ray: their environment must be on the shared
        # file system too (as it is on clusters where JupyterLab runs from a shared home).
        self.python = python or sys.executable
        self.ray = str(Path(self.python).with_name("ray"))

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "lifetime", "slurm"), "a slurm launch")
        where = "slurm"
        given = requests.mapping(body.get("slurm", {}), where, '{"partition": "gpu", "nodes": 2}')
        requests.keys(given, _SLURM_KEYS, where)
        words = "use letters, digits, '.', '_' or '-' (as SLURM spells it)"

        def word(key: str) -> str | None:
            value = given.get(key)
            return None if value in (None, "") else requests.text(value, key, where, _WORD_RE, words)

        memory = given.get("memory_per_node")
        if memory not in (None, ""):
            from ...hpc._options import parse_memory

            memory = parse_memory(memory, "slurm.memory_per_node")
        fields = SlurmSpec(
            partition=word("partition"),
            account=word("account"),
            walltime=requests.text(
                given.get("walltime", "01:00:00"), "walltime", where, _WALLTIME_RE,
                "give it as SLURM does: minutes, HH:MM:SS or D-HH:MM:SS (for example 01:00:00)",
            ),  # fmt: skip
            nodes=requests.count(given.get("nodes", 1), "nodes", where, 1, MAX_NODES),
            cpus_per_node=requests.count(given.get("cpus_per_node", 1), "cpus_per_node", where, 1, 4096),
            gpus_per_node=requests.count(given.get("gpus_per_node", 0), "gpus_per_node", where, 0, 64),
            memory_per_node=int(memory) if memory not in (None, "") else None,
            extra=_extra(given.get("extra")),
        )
        if walltime_seconds(fields.walltime) < 60:
            raise OptionsError(
                f"slurm.walltime={fields.walltime!r} is too short: give at least one minute."
            )
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), "slurm"),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=fields,
        )

    # -- plan

    def _sbatch(self, folder: str, cluster_id: str, role: str) -> list[str]:
        return [
            "sbatch", "--parsable", f"--job-name=eugo-{cluster_id}-{role}", f"--chdir={folder}",
            f"{folder}/{role}.sbatch",
        ]  # fmt: skip

    def plan(self, spec: Spec) -> Plan:
        fields: SlurmSpec = spec.fields
        workers = fields.nodes - 1
        scripts = [{"name": "head", "count": 1, "text": self.script(fields, "head")}]
        if workers:
            scripts.append({"name": "worker", "count": workers, "text": self.script(fields, "worker")})
        folder = f"{self.shared_dir}/<cluster id>"
        commands = [self._sbatch(folder, "<cluster id>", "head")]
        commands += [self._sbatch(folder, "<cluster id>", "worker")] * workers
        gpus = f", {fields.gpus_per_node} GPU{'s' * (fields.gpus_per_node > 1)}" * bool(
            fields.gpus_per_node
        )
        summary = (
            f"{fields.nodes} SLURM job{'s' * (fields.nodes > 1)} of 1 node each "
            f"({fields.cpus_per_node} CPU{'s' * (fields.cpus_per_node > 1)}{gpus} per node), "
            f"wall time {fields.walltime}: the Ray head"
            + (f", then {workers} worker{'s' * (workers > 1)}." if workers else ".")
        )
        return Plan(summary=summary, scripts=scripts, commands=commands)

    def script(self, fields: SlurmSpec, role: str) -> str:
        return job_script(fields, role, self.python, self.ray)

    # -- start, scale, stop

    def _folder(self, record: dict[str, Any]) -> Path:
        return Path(record["slurm"]["dir"])

    def _submit(self, folder: Path, cluster_id: str, role: str) -> str:
        out = _slurm(self._sbatch(str(folder), cluster_id, role))
        return out.strip().split(";")[0]

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        fields: SlurmSpec = spec.fields
        folder = self.shared_dir / str(record["id"])
        folder.mkdir(parents=True, mode=0o700)
        for role in ("head", "worker"):
            (folder / f"{role}.sbatch").write_text(self.script(fields, role))
        jobs: list[dict[str, str]] = []
        try:
            jobs.append({"id": self._submit(folder, record["id"], "head"), "role": "head"})
            for _ in range(fields.nodes - 1):
                jobs.append({"id": self._submit(folder, record["id"], "worker"), "role": "worker"})
        except BaseException:
            if jobs:
                _slurm(["scancel", *(j["id"] for j in jobs)])
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return {"slurm": {"dir": str(folder), "jobs": jobs, "walltime": fields.walltime}}

    def add_node(self, record: dict[str, Any]) -> dict[str, Any]:
        job = self._submit(self._folder(record), record["id"], "worker")
        slurm = record["slurm"]
        return {"slurm": {**slurm, "jobs": [*slurm["jobs"], {"id": job, "role": "worker"}]}}

    def remove_node(self, record: dict[str, Any], node: str) -> dict[str, Any]:
        slurm = record["slurm"]
        workers = [j["id"] for j in slurm["jobs"] if j["role"] == "worker"]
        if node not in workers:
            raise OptionsError(
                f"node={node!r} is not a worker job of this cluster; its worker jobs: "
                f"{', '.join(workers) or 'none'} (the head's job ends the cluster: shut it down)."
            )
        self._cancel([node])
        return {"slurm": {**slurm, "jobs": [j for j in slurm["jobs"] if j["id"] != node]}}

    def _cancel(self, job_ids: list[str], timeout: float = 120.0) -> list[str]:
        """scancel, then wait until SLURM has finished them; returns the jobs still there."""
        if not job_ids:
            return []
        _slurm(["scancel", *job_ids])
        deadline = time.monotonic() + timeout
        while True:
            left = [j.id for j in squeue(job_ids).values() if j.state not in _ENDED]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def stop(self, record: dict[str, Any]) -> list[str]:
        from .. import monitor

        jobs = [j["id"] for j in record.get("slurm", {}).get("jobs", [])]
        left = [f"SLURM job {j}" for j in self._cancel(jobs)]
        # SLURM ends the jobs' process trees (SIGTERM, then SIGKILL after its KillWait); a Ray
        # process of them still on this machine once that is over is proof it did not. Their
        # temp folders are named after the job.
        marks = tuple(f"/tmp/eugo-{j}/" for j in jobs)
        deadline = time.monotonic() + 90.0
        while True:
            pids = [pid for pid in _processes() if any(m in _cmdline(pid) for m in marks)]
            if not pids or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        left += [f"pid {pid}: {_cmdline(pid)[:120]}" for pid in pids]
        address = record.get("address")
        if address and not left and monitor.reachable(str(address), 2.0):
            left.append(f"a Ray head still answering at {address}")
        if not left and record.get("slurm"):
            shutil.rmtree(self._folder(record), ignore_errors=True)
        return left

    # -- state

    def state(self, record: dict[str, Any]) -> Observed:
        slurm = record.get("slurm") or {}
        jobs = slurm.get("jobs", [])
        spec = record.get("spec") or {}
        observed = Observed(address=record.get("address"), dashboard_url=record.get("dashboard_url"))
        head_file = Path(slurm.get("dir", "/nonexistent")) / "head"
        if observed.address is None and head_file.exists():
            address, _, dashboard = head_file.read_text().strip().partition(" ")
            observed.address, observed.dashboard_url = address, dashboard or None
        try:
            states = squeue([j["id"] for j in jobs])
        except SlurmError as exc:
            observed.waiting = True
            observed.detail = {**_public(slurm), "jobs": [], "error": str(exc)}
            return observed
        rows = []
        for job in jobs:
            seen = states.get(job["id"])
            state = seen.state if seen else "GONE"
            reason = None
            if state == "PENDING" and seen is not None:
                reason = reason_sentence(seen.reason or "None", spec.get("partition"))
                if seen.reason in _IMPOSSIBLE:
                    observed.blocked = (
                        f"SLURM cannot run job {job['id']} ({job['role']}) as asked: {reason}."
                    )
                observed.waiting = True
            elif job["role"] == "worker" and state in _ENDED:
                log = self._log(slurm, job)
                reason = _last_line(log) or None
                observed.blocked = (
                    f"Worker job {job['id']} ended ({state})"
                    + (f": {reason}" if reason else "")
                    + f". Its log: {log}. Shut the cluster down and launch again."
                )
            rows.append(
                {
                    "id": job["id"],
                    "role": job["role"],
                    "state": state,
                    "reason": reason,
                    "nodes": seen.nodes if seen else [],
                    "time_left": seen.time_left if seen else None,
                }
            )
        observed.detail = {**_public(slurm), "jobs": rows}
        observed.nodes_expected = sum(r["state"] not in _ENDED | {"GONE"} for r in rows)
        head = next((r for r in rows if r["role"] == "head"), None)
        if head is not None and (head["state"] in _ENDED or head["state"] == "GONE"):
            observed.ended = self._ended_sentence(head, slurm)
            others = [r["id"] for r in rows if r["state"] not in _ENDED | {"GONE"}]
            if others:  # without a head the workers serve nothing
                _slurm(["scancel", *others])
        return observed

    def _ended_sentence(self, head: dict[str, Any], slurm: dict[str, Any]) -> str:
        job, state = head["id"], head["state"]
        if state == "TIMEOUT":
            return (
                f"The wall time ({slurm.get('walltime')}) ran out: SLURM ended job {job} (the "
                "Ray head), and the cluster with it. Launch again with a longer wall time."
            )
        if state == "CANCELLED":
            return f"Job {job} (the Ray head) was cancelled outside the manager; the cluster ended."
        if state == "GONE":
            return f"SLURM no longer knows job {job} (the Ray head): the cluster has ended."
        log = self._log(slurm, head)
        last = _last_line(log)
        return (
            f"Job {job} (the Ray head) ended with SLURM state {state}"
            + (f": {last}" if last else "")
            + f". Its log: {log}."
        )

    def _log(self, slurm: dict[str, Any], job: dict[str, Any]) -> Path:
        folder = Path(slurm.get("dir", ""))
        return folder / f"eugo-{folder.name}-{job['role']}-{job['id']}.log"  # --output=%x-%j.log

    def adopt(self, record: dict[str, Any]) -> str | None:
        from .. import monitor

        jobs = [j["id"] for j in record.get("slurm", {}).get("jobs", [])]
        try:
            alive = [j for j in squeue(jobs).values() if j.state not in _ENDED]
        except SlurmError:
            return "starting"  # SLURM is not answering now; keep the record and look again
        if not alive:
            self.stop(record)
            return None
        observed = self.state(record)
        address = observed.address
        return "running" if address and monitor.reachable(address, 2.0) else "starting"


def _public(slurm: dict[str, Any]) -> dict[str, Any]:
    return {"dir": slurm.get("dir"), "walltime": slurm.get("walltime")}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""

