"""The batch-scheduler base: a Ray cluster as jobs of a scheduler (SLURM, Grid Engine...).

What every scheduler shares lives here; a scheduler (:mod:`.slurm`, :mod:`.gridengine`) supplies
only what differs: its submit, query and cancel commands (argument lists), the directive lines
of its job script, the mapping of its states and pending reasons to sentences, and the checks
of its fields.

Where the head runs: in a job of its own, on a compute node, never on the login node. Login
nodes are shared by every user, often limit a process's CPU time and memory, and their ports
are often unreachable from compute nodes; the compute nodes reach each other (Ray's own SLURM
guide puts the head there too). So a cluster of ``nodes`` nodes is one *head job* plus
``nodes - 1`` *worker jobs*; scaling diffs the wanted worker jobs against those that run (as
distributed's ``SpecCluster`` does): **Add node** submits one more, **Remove node** cancels one.
Every job runs ``ray start --block`` (the arguments from the same builder the local and ssh
backends use, :func:`.ray_start.head_arguments`), so the scheduler tracks Ray's processes and its
cancel ends them (a daemonised Ray would escape the job).

How the address travels: each cluster has a folder on the shared file system (``shared_dir``;
the home folder is shared on HPC clusters). The head job picks free ports on its node (nodes may
be shared with other users), starts Ray, and once the GCS is up writes ``head`` (``ip:port
dashboard-url``) there, by write and rename; worker jobs wait for that file, and the server
reads it. Ray's sockets and logs stay in a 0700 folder of the job's on its node.

The preview (:meth:`BatchBackend.plan`) shows the very scripts :meth:`BatchBackend.start` writes
and submits: both come from :meth:`BatchBackend.script`.

>>> from eugo_jupyter.server.backends.slurm import SlurmBackend
>>> backend = SlurmBackend("/shared/eugo")
>>> spec = backend.validate({"kind": "slurm", "slurm": {"nodes": 2}})
>>> backend.plan(spec).scripts[0]["text"] == backend.script(spec.fields, "head")
True
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import sys
import time
from abc import abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from traitlets import Unicode

from ..._raytoken import secure_token_file
from ...exceptions import OptionsError, SchedulerError
from .. import requests
from ..exporters import closed_exporters
from . import processes
from .base import Backend, Observed, Plan, Spec
from .ray_start import HEAD_PORTS, NODE_PORTS, NodeSpec, head_arguments, node_arguments

__all__ = ["BatchBackend", "BatchFields", "JobState", "extra_lines", "run_command"]

MAX_NODES = 256


class BatchFields(Protocol):
    """What the base reads of a scheduler's checked fields."""

    @property
    def walltime(self) -> str: ...
    @property
    def nodes(self) -> int: ...
    @property
    def cpus_per_node(self) -> int: ...
    @property
    def gpus_per_node(self) -> int: ...
    def to_model(self) -> dict[str, Any]: ...


@dataclass
class JobState:
    """One job as the scheduler reports it, in its own words and in the base's.

    ``phase`` is what the base acts on: "pending", "running" or "ended"; ``end`` says how an
    ended job ended when the scheduler knows ("timeout", "cancelled", "failed", "completed").
    """

    id: str
    state: str  # the scheduler's own word (RUNNING, PENDING, qw, r...), shown on the card
    phase: str
    reason: str = ""  # the scheduler's pending reason or message, raw
    nodes: list[str] = field(default_factory=list)
    time_left: int | None = None
    end: str | None = None


def extra_lines(value: Any, field: str, directive: str) -> list[tuple[int, str]]:
    """The non-blank lines of a form's ``extra`` field, numbered from 1, as the user wrote them.

    What every scheduler checks the same way: a list of lines (or one text), at most 32, each a
    line of text. The scheduler then checks each line against its own option syntax.

    >>> extra_lines(["--qos=short", " ", "#SBATCH --constraint=a100"], "slurm.extra", "#SBATCH")
    [(1, '--qos=short'), (3, '#SBATCH --constraint=a100')]
    >>> extra_lines([1], "gridengine.extra", "#$")
    Traceback (most recent call last):
    ...
    eugo_jupyter.exceptions.OptionsError: gridengine.extra[0]=1 is not allowed: give a line of text.
    """
    lines = value.splitlines() if isinstance(value, str) else value
    if lines is None:
        return []
    if not isinstance(lines, list) or len(lines) > 32:
        raise OptionsError(
            f"{field}={value!r} is not allowed: give up to 32 {directive} options, one per line."
        )
    numbered = []
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise OptionsError(f"{field}[{i}]={line!r} is not allowed: give a line of text.")
        if line.strip():
            numbered.append((i + 1, line))
    return numbered


def run_command(args: list[str], label: str, timeout: float = 60.0) -> str:
    """Run one scheduler command (an argument list); its stdout, or SchedulerError with the
    scheduler's own message."""
    if shutil.which(args[0]) is None:
        raise SchedulerError(
            f"{label}'s `{args[0]}` command is not on this server's PATH. Run JupyterLab on a "
            "machine that can submit jobs (a login node of the cluster), or use kind 'local'."
        )
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise SchedulerError(
            f"`{args[0]}` did not answer within {timeout:g} s; {label}'s controller may be busy."
        ) from None
    if done.returncode != 0:
        message = " ".join(
            line.removeprefix(f"{args[0]}: error: ").removeprefix("error: ").strip()
            for line in (done.stderr or done.stdout).splitlines()
            if line.strip()
        )
        raise SchedulerError(
            f"{label} refused it ({args[0]}): {message or f'exit {done.returncode}'}"
        )
    return done.stdout


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
# No Prometheus exporter answering without a token on the node's network.
export {exporters}
unset RAY_ADDRESS
# Ray's sockets and logs on this node only, one folder per job; removed when the job ends.
# Ray makes its own folders 0777: they go inside a 0700 folder of ours, which other users of
# this (possibly shared) node cannot enter.
temp_dir="{temp_dir}"
ray_dir="$temp_dir/r"
mkdir -m 700 -- "$temp_dir" 2>/dev/null || true
if [ -L "$temp_dir" ] || [ ! -d "$temp_dir" ] || [ ! -O "$temp_dir" ]; then
  echo "$temp_dir exists and is not a folder of this account; remove it and launch again" >&2
  exit 1
fi
chmod 700 -- "$temp_dir"
trap 'rm -rf "$temp_dir"' EXIT
# On a cancel or the wall time, let Ray stop its own processes before this script ends: an
# orphaned Ray would leave the job's process tree, where the scheduler can no longer find it.
ray_pid=""
trap '[ -n "$ray_pid" ] && kill -TERM "$ray_pid" 2>/dev/null; wait; exit 143' TERM
# This node's address and free ports, picked here: the node may be shared with other users.
pick='{pick}'
"""

_HEAD_BODY = """\
# A busy machine can make Ray's start time out (it waits 30 s for its own node): five tries.
for attempt in 1 2 3 4 5; do
  rm -f "$ray_dir/ray_current_cluster"
  read -r ip {head_ports} {node_ports} < <({python} -c "$pick" {count})
  # Workers may start as soon as the GCS listens (the rest of the head starts meanwhile, as
  # Ray's guide overlaps them with a fixed `sleep 10`): publish its address now.
  printf '%s:%s\\n' "$ip" "$gcs" > gcs.tmp
  mv gcs.tmp gcs
  # --block keeps Ray inside this job, so a cancel and the wall time end it.
  {ray_start} &
  ray_pid=$!
  # Ray writes ray_current_cluster once the head is up: then publish the address.
  until [ -s "$ray_dir/ray_current_cluster" ] || ! kill -0 "$ray_pid" 2>/dev/null; do
    sleep 1
  done
  if kill -0 "$ray_pid" 2>/dev/null; then
    printf '%s:%s http://%s:%s\\n' "$ip" "$gcs" "$ip" "$dashboard" > head.tmp
    mv head.tmp head
    wait "$ray_pid"
    exit
  fi
  echo "ray start ended before the head was up, try $attempt of 5" >&2
done
exit 1
"""

_WORKER_BODY = """\
# A busy head can miss a node's registration (Ray waits 30 s for it): up to five tries.
for attempt in 1 2 3 4 5; do
  # The head job publishes its GCS address in this cluster's folder before the rest of the head
  # is up; start once that GCS accepts connections. Read again each time: a head that had to
  # try again has new ports.
  until read -r address 2>/dev/null < gcs \\
      && (exec 3<>"/dev/tcp/${{address%:*}}/${{address##*:}}") 2>/dev/null; do
    sleep 0.5
  done
  read -r ip {node_ports} < <({python} -c "$pick" {count})
  {ray_start} &
  ray_pid=$!
  # A head that had to try again publishes new ports; this node's Ray would keep retrying the
  # old ones for many minutes: follow the head instead.
  while kill -0 "$ray_pid" 2>/dev/null; do
    read -r now 2>/dev/null < gcs || now="$address"
    if [ "$now" != "$address" ]; then
      echo "the head moved to $now; starting again" >&2
      kill -TERM "$ray_pid" 2>/dev/null || true
      break
    fi
    sleep 1
  done
  status=0
  wait "$ray_pid" || status=$?
  echo "ray start ended (exit $status), try $attempt of 5" >&2
done
exit 1
"""


def _shell_port(name: str) -> str:
    return f'"${name}"'


def ray_start_line(role: str, cpus: int, gpus: int, ray: str) -> str:
    """The job's ``ray start --block`` line, its ports and address the job's shell variables.

    >>> ray_start_line("worker", 2, 0, "ray").splitlines()[0]
    'ray start --block --address="$address" \\\\'
    """
    spec = NodeSpec(num_cpus=cpus, num_gpus=gpus)
    if role == "head":
        args, _, _ = head_arguments(spec, '"$ip"', '"$temp_dir"', _shell_port, '"$ip"')
        first, args = f"{ray} start --head --block", args[1:]
    else:
        first = f'{ray} start --block --address="$address"'
        args = node_arguments(spec, '"$ip"', '"$temp_dir"', _shell_port)
    # The arguments are flags, numbers, JSON and quoted shell variables: nothing a user typed.
    # The JSON is quoted for the shell; the variables stay as they are, to be expanded.
    args = [arg if "$" in arg else shlex.quote(arg) for arg in args]
    return " \\\n    ".join([first, *args])


class BatchBackend(Backend):
    """A cluster as one head job and ``nodes - 1`` worker jobs of a batch scheduler.

    The record keeps ``{kind: {"dir", "walltime", "jobs": [{"id", "role"}]}}``; the model's key
    of the same name adds each job's ``state``, ``reason``, ``nodes`` and ``time_left``.
    """

    scalable = True
    starts_quickly = True
    node_label = "job"
    #: The variable a job's script reads its own id from.
    job_id_variable: ClassVar[str]
    #: The job scripts' file suffix in the cluster's folder.
    script_suffix: ClassVar[str] = "sh"
    #: The body's keys of the scheduler's part.
    field_keys: ClassVar[tuple[str, ...]]

    shared_dir = Unicode(
        "",
        config=True,
        help="Folder on a file system every node shares, where the clusters keep their job "
        "scripts, logs and the head's address (default: ~/.eugo/<kind>).",
    )
    python = Unicode(
        "",
        config=True,
        help="The Python the jobs run (default: the server's own); its environment, with Ray, "
        "must be on the shared file system too.",
    )

    def __init__(
        self, shared_dir: str | None = None, python: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if shared_dir:
            self.shared_dir = shared_dir
        if python:
            self.python = python
        #: Where the clusters' folders go.
        self.root = Path(self.shared_dir or Path.home() / ".eugo" / self.kind)
        # The job runs the server's own Python and Ray: their environment must be on the shared
        # file system too (as it is on clusters where JupyterLab runs from a shared home).
        self.python = self.python or sys.executable
        self.ray = str(Path(self.python).with_name("ray"))

    # -- what a scheduler supplies

    @abstractmethod
    def check_fields(self, given: dict[str, Any]) -> BatchFields:
        """The scheduler's part of the body, checked (OptionsError naming the bad field)."""

    @abstractmethod
    def directives(self, fields: Any, role: str) -> list[str]:
        """The job script's directive lines (``#SBATCH ...``, ``#$ ...``), in order."""

    @abstractmethod
    def submit_command(self, folder: str, cluster_id: str, role: str) -> list[str]:
        """The argument list that submits ``role``'s script from the cluster's ``folder``."""

    @abstractmethod
    def job_id_of(self, submitted: str) -> str:
        """The job id in the submit command's output."""

    @abstractmethod
    def query(self, job_ids: list[str], record: dict[str, Any]) -> dict[str, JobState]:
        """The state of these jobs (ended ones too, while the scheduler remembers them)."""

    @abstractmethod
    def cancel_command(self, job_ids: list[str]) -> list[str]:
        """The argument list that cancels these jobs."""

    @abstractmethod
    def pending_sentence(self, job: JobState, spec: dict[str, Any]) -> tuple[str, bool]:
        """Why ``job`` waits, as a sentence, and whether waiting can never help (the request
        must change)."""

    @abstractmethod
    def run(self, args: list[str]) -> str:
        """Run one of the scheduler's commands; SchedulerError with its own words."""

    def node_temp_dir(self) -> str:
        """The job's private folder on its node, as a shell word of the job script."""
        return f"/tmp/eugo-${self.job_id_variable}"

    def temp_mark(self, job_id: str) -> str:
        """What names that folder in the command line of the job's processes."""
        return f"/tmp/eugo-{job_id}/"

    def log_path(self, folder: Path, job: dict[str, Any]) -> Path:
        """Where the job's output goes (in the cluster's folder)."""
        return folder / f"eugo-{folder.name}-{job['role']}-{job['id']}.log"

    def script_note(self) -> list[str]:
        return [
            "# It runs in the cluster's folder on the shared file system, where the head job",
            "# publishes its address.",
        ]

    def facts(self) -> dict[str, Any]:
        cancel = self.cancel_command([])[0]
        return {
            **super().facts(),
            "stop_effect": f"Its {self.label} jobs are cancelled ({cancel}); running tasks and "
            "objects are lost.",
            "fields": list(self.field_keys),
        }

    def summary_detail(self, fields: Any) -> str:
        """What a node asks for, in the plan's summary (``1 CPU per node``)."""
        cpus = fields.cpus_per_node
        gpus = f", {fields.gpus_per_node} GPU{'s' * (fields.gpus_per_node > 1)}" * bool(
            fields.gpus_per_node
        )
        return f"{cpus} CPU{'s' * (cpus > 1)}{gpus} per node"

    # -- validate and plan

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "lifetime", self.kind), f"a {self.kind} launch")
        given = requests.mapping(body.get(self.kind, {}), self.kind, '{"nodes": 2}')
        requests.keys(given, self.field_keys, self.kind)
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), self.kind),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=self.check_fields(given),
        )

    def script(self, fields: Any, role: str) -> str:
        """The exact script the scheduler gets for the head (``role="head"``) or a worker."""
        what = "the Ray head" if role == "head" else "a Ray worker node"
        python, ray = shlex.quote(self.python), shlex.quote(self.ray)
        header = [
            "#!/bin/bash",
            *self.directives(fields, role),
            f"# EugoHPC Manager: {what}, a {self.label} job.",
            *self.script_note(),
        ]
        exporters = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(closed_exporters().items()))
        prologue = _PROLOGUE.format(pick=_PICK, exporters=exporters, temp_dir=self.node_temp_dir())
        line = ray_start_line(role, fields.cpus_per_node, fields.gpus_per_node, ray)
        if role == "head":
            ports = {"head_ports": " ".join(HEAD_PORTS), "count": len(HEAD_PORTS + NODE_PORTS)}
            body = _HEAD_BODY.format(
                python=python, ray_start=line, node_ports=" ".join(NODE_PORTS), **ports
            )
        else:
            body = _WORKER_BODY.format(
                python=python,
                ray_start=line,
                node_ports=" ".join(NODE_PORTS),
                count=len(NODE_PORTS),
            )
        return "\n".join(["\n".join(header), prologue, body])

    def plan(self, spec: Spec) -> Plan:
        fields = spec.fields
        workers = fields.nodes - 1
        scripts = [{"name": "head", "count": 1, "text": self.script(fields, "head")}]
        if workers:
            scripts.append(
                {"name": "worker", "count": workers, "text": self.script(fields, "worker")}
            )
        folder = f"{self.root}/<cluster id>"
        commands = [self.submit_command(folder, "<cluster id>", "head")]
        commands += [self.submit_command(folder, "<cluster id>", "worker")] * workers
        summary = (
            f"{fields.nodes} {self.label} job{'s' * (fields.nodes > 1)} of 1 node each "
            f"({self.summary_detail(fields)}), wall time {fields.walltime}: the Ray head"
            + (f", then {workers} worker{'s' * (workers > 1)}." if workers else ".")
        )
        return Plan(summary=summary, scripts=scripts, commands=commands)

    # -- start, scale, stop

    def _part(self, record: dict[str, Any]) -> dict[str, Any]:
        return dict(record.get(self.kind) or {})

    def _folder(self, record: dict[str, Any]) -> Path:
        return Path(self._part(record)["dir"])

    def script_path(self, folder: str, role: str) -> str:
        return f"{folder}/{role}.{self.script_suffix}"

    def _submit(self, folder: Path, cluster_id: str, role: str) -> str:
        return self.job_id_of(self.run(self.submit_command(str(folder), cluster_id, role)))

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        fields = spec.fields
        folder = self.root / str(record["id"])
        folder.mkdir(parents=True, mode=0o700)
        # The jobs' `ray start` reads this account's token from the shared home: make it 0600
        # (and write a missing one) before any job can, since Ray would write it world-readable.
        secure_token_file(create=True)
        for role in ("head", "worker"):
            Path(self.script_path(str(folder), role)).write_text(self.script(fields, role))
        jobs: list[dict[str, str]] = []
        try:
            jobs = self._scale_to(folder, record["id"], jobs, fields.nodes - 1)
        except BaseException:
            if jobs:
                with contextlib.suppress(SchedulerError):
                    self.run(self.cancel_command([j["id"] for j in jobs]))
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return {self.kind: {"dir": str(folder), "jobs": jobs, "walltime": fields.walltime}}

    def _scale_to(
        self, folder: Path, cluster_id: str, jobs: list[dict[str, str]], workers: int
    ) -> list[dict[str, str]]:
        """Diff the wanted jobs (a head, ``workers`` workers) against ``jobs``: submit what is
        missing (appending to ``jobs`` as it goes, so a failure leaves it exact), cancel the
        workers beyond it (the newest first)."""
        if not any(j["role"] == "head" for j in jobs):
            jobs.append({"id": self._submit(folder, cluster_id, "head"), "role": "head"})
        running = [j for j in jobs if j["role"] == "worker"]
        for _ in range(workers - len(running)):
            jobs.append({"id": self._submit(folder, cluster_id, "worker"), "role": "worker"})
        extra = [j["id"] for j in running[workers:]] if workers < len(running) else []
        if extra:
            self._end_jobs(extra)
            jobs[:] = [j for j in jobs if j["id"] not in extra]
        return jobs

    def _workers(self, record: dict[str, Any]) -> list[str]:
        return [j["id"] for j in self._part(record).get("jobs", []) if j["role"] == "worker"]

    def add_node(self, record: dict[str, Any]) -> dict[str, Any]:
        part = self._part(record)
        jobs = list(part["jobs"])
        self._scale_to(self._folder(record), record["id"], jobs, len(self._workers(record)) + 1)
        return {self.kind: {**part, "jobs": jobs}}

    def remove_node(self, record: dict[str, Any], node: str) -> dict[str, Any]:
        part = self._part(record)
        workers = self._workers(record)
        if node not in workers:
            raise OptionsError(
                f"node={node!r} is not a worker job of this cluster; its worker jobs: "
                f"{', '.join(workers) or 'none'} (the head's job ends the cluster: shut it down)."
            )
        self._end_jobs([node])
        return {self.kind: {**part, "jobs": [j for j in part["jobs"] if j["id"] != node]}}

    def _end_jobs(self, job_ids: list[str]) -> None:
        left = self._cancel(job_ids) + [str(pid) for pid in self._wait_gone(job_ids)]
        if left:
            raise SchedulerError(
                f"{self.label} job {', '.join(job_ids)} did not end: {', '.join(left)}."
            )

    def _cancel(self, job_ids: list[str], timeout: float = 120.0) -> list[str]:
        """Cancel, then wait until the scheduler has finished them; returns the jobs still there."""
        active = [j.id for j in self.query(job_ids, {}).values() if j.phase != "ended"]
        if not active:
            return []
        with contextlib.suppress(SchedulerError):  # a job that ended meanwhile is refused
            self.run(self.cancel_command(active))
        deadline = time.monotonic() + timeout
        while True:
            left = [j.id for j in self.query(job_ids, {}).values() if j.phase != "ended"]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def _wait_gone(self, job_ids: list[str], timeout: float = 90.0) -> list[int]:
        """Wait until no process of these jobs is left on this machine; returns those still there.

        The scheduler ends a job's process tree; a Ray process of the job still running here
        after that is proof it did not. Their temp folders are named after the job; on other
        machines the scheduler's own accounting is the proof.
        """
        marks = tuple(self.temp_mark(j) for j in job_ids)
        deadline = time.monotonic() + timeout
        while True:
            pids = [
                pid for pid in processes.table() if any(m in processes.cmdline(pid) for m in marks)
            ]
            if not pids or time.monotonic() > deadline:
                return pids
            time.sleep(0.5)

    def stop(self, record: dict[str, Any]) -> list[str]:
        from .. import monitor

        jobs = [j["id"] for j in self._part(record).get("jobs", [])]
        left = [f"{self.label} job {j}" for j in self._cancel(jobs)]
        left += [f"pid {pid}: {processes.cmdline(pid)[:120]}" for pid in self._wait_gone(jobs)]
        address = record.get("address")
        if address and not left and monitor.reachable(str(address), 2.0):
            left.append(f"a Ray head still answering at {address}")
        if not left and record.get(self.kind):
            shutil.rmtree(self._folder(record), ignore_errors=True)
        return left

    def release(self, record: dict[str, Any]) -> None:
        """The head's job ended by itself: cancel the worker jobs, which serve nothing without
        it (the folder and its logs stay, for the sentence that names them)."""
        jobs = [j["id"] for j in self._part(record).get("jobs", [])]
        with contextlib.suppress(SchedulerError):
            active = [j.id for j in self.query(jobs, record).values() if j.phase != "ended"]
            if active:
                self.run(self.cancel_command(active))

    # -- state

    def state(self, record: dict[str, Any]) -> Observed:
        """What the scheduler and the shared folder say now; reads only, changes nothing."""
        part = self._part(record)
        jobs = part.get("jobs", [])
        spec = record.get("spec") or {}
        observed = Observed(
            address=record.get("address"), dashboard_url=record.get("dashboard_url")
        )
        head_file = Path(part.get("dir", "/nonexistent")) / "head"
        if observed.address is None and head_file.exists():
            address, _, dashboard = head_file.read_text().strip().partition(" ")
            observed.address, observed.dashboard_url = address, dashboard or None
        public = {"dir": part.get("dir"), "walltime": part.get("walltime")}
        try:
            states = self.query([j["id"] for j in jobs], record)
        except SchedulerError as exc:
            observed.waiting = True
            observed.detail = {**public, "jobs": [], "error": str(exc)}
            return observed
        rows = []
        for job in jobs:
            seen = states.get(job["id"]) or JobState(job["id"], "GONE", "ended")
            reason = None
            if seen.phase == "pending":
                reason, never = self.pending_sentence(seen, spec)
                if never:
                    observed.blocked = (
                        f"{self.label} cannot run job {job['id']} ({job['role']}) as asked: "
                        f"{reason}."
                    )
                observed.waiting = True
            elif job["role"] == "worker" and seen.phase == "ended":
                log = self.log_path(Path(part.get("dir", "")), job)
                reason = _last_line(log) or None
                observed.blocked = (
                    f"Worker job {job['id']} ended ({seen.state})"
                    + (f": {reason}" if reason else "")
                    + f". Its log: {log}. Shut the cluster down and launch again."
                )
            rows.append(
                {
                    "id": job["id"],
                    "role": job["role"],
                    "state": seen.state,
                    "reason": reason,
                    "nodes": seen.nodes,
                    "time_left": seen.time_left,
                    "_end": seen.end,
                    "_phase": seen.phase,
                }
            )
        observed.nodes_expected = sum(r["_phase"] != "ended" for r in rows)
        head = next((r for r in rows if r["role"] == "head"), None)
        if head is not None and head["_phase"] == "ended":
            observed.ended = self.ended_sentence(head, part)
        observed.detail = {
            **public,
            "jobs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
        }
        return observed

    def ended_sentence(self, head: dict[str, Any], part: dict[str, Any]) -> str:
        """Why the cluster ended, from how its head's job ended."""
        job, state, end = head["id"], head["state"], head.get("_end")
        if end == "timeout":
            return (
                f"The wall time ({part.get('walltime')}) ran out: {self.label} ended job {job} "
                "(the Ray head), and the cluster with it. Launch again with a longer wall time."
            )
        if end == "cancelled":
            return f"Job {job} (the Ray head) was cancelled outside the manager; the cluster ended."
        if state == "GONE":
            return f"{self.label} no longer knows job {job} (the Ray head): the cluster has ended."
        log = self.log_path(Path(part.get("dir", "")), head)
        last = _last_line(log)
        return (
            f"Job {job} (the Ray head) ended with {self.label} state {state}"
            + (f": {last}" if last else "")
            + f". Its log: {log}."
        )

    def adopt(self, record: dict[str, Any]) -> str | None:
        # "starting" while any job lives: the manager's launch loop then reads Ray's nodes and
        # says "running" only once every job's node has joined (at once if they all have).
        jobs = [j["id"] for j in self._part(record).get("jobs", [])]
        try:
            alive = [j for j in self.query(jobs, record).values() if j.phase != "ended"]
        except SchedulerError:
            return "starting"  # the scheduler is not answering now; keep the record, look again
        if not alive:
            self.stop(record)
            return None
        return "starting"


def count(given: dict[str, Any], key: str, where: str, default: int, low: int, high: int) -> int:
    return requests.count(given.get(key, default), key, where, low, high)


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""
