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
import re
import shutil
import subprocess
import sys
import time
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from traitlets import Unicode

from ... import _processes as processes
from ..._raytoken import secure_token_file
from ...exceptions import OptionsError, SchedulerError
from .. import requests
from .base import Backend, Form, FormField, Observed, Plan, Spec
from .batch_fields import BatchSpec, check
from .batch_script import job_script
from .batch_state import JobState, observe

__all__ = ["BatchBackend", "JobState", "run_command"]


def run_command(
    args: list[str], label: str, timeout: float = 60.0, stdin: str | None = None
) -> str:
    """Run one scheduler command (an argument list), given ``stdin`` as its input (LSF's
    ``bsub < script``); its stdout, or SchedulerError with the scheduler's own message."""
    if shutil.which(args[0]) is None:
        raise SchedulerError(
            f"{label}'s `{args[0]}` command is not on this server's PATH. Run JupyterLab on a "
            "machine that can submit jobs (a login node of the cluster), or use kind 'local'."
        )
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, input=stdin or "",
        )  # fmt: skip
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
    #: True: the submit command reads the script on its standard input (LSF's ``bsub < x``).
    submit_through_stdin: ClassVar[bool] = False
    #: The form's fields, checked by :func:`.batch_fields.check`: the scheduler's own words,
    #: then the common ones (:mod:`.batch_fields`).
    fields: ClassVar[tuple[FormField, ...]]
    #: The panel's sentence under the wall time: where the head runs.
    hint: ClassVar[str] = ""
    rank: ClassVar[int] = 50
    # What the field checks read (:class:`.batch_fields.Scheduler`).
    directive: ClassVar[str]  # the directive's prefix in the job script: "#SBATCH"
    walltime_pattern: ClassVar[re.Pattern[str]]
    walltime_rule: ClassVar[str]
    extra_pattern: ClassVar[re.Pattern[str]]  # one extra line: (option, argument or None)
    extra_example: ClassVar[str]
    extra_joiner: ClassVar[str] = " "  # between an extra option and its argument
    own_options: ClassVar[frozenset[str]]  # the options the manager sets itself

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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "fields" in cls.__dict__:
            cls.form_fields = tuple(f.key for f in cls.fields)
            cls.form = Form(cls.fields, cls.hint, cls.rank)

    # -- what a scheduler supplies

    @staticmethod
    @abstractmethod
    def walltime_seconds(value: str) -> int:
        """A wall time of the scheduler's format (already matched) in seconds."""

    def extra_refused(self, option: str, argument: str) -> str | None:
        """What an extra line sets that the manager sets itself (Grid Engine's ``-l h_rt``)."""
        return None

    def field_default(self, key: str) -> Any:
        """An empty field's value: the backend's setting of the same name, if it has one."""
        return (getattr(self, key) or None) if self.has_trait(key) else None

    def check_fields(self, given: dict[str, Any]) -> BatchSpec:
        """The scheduler's part of the body, checked (OptionsError naming the bad field)."""
        return check(self, self.fields, given)

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

    def run(self, args: list[str], stdin: str | None = None) -> str:
        """Run one of the scheduler's commands; SchedulerError with its own words."""
        return run_command(args, self.label, stdin=stdin)

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
            "fields": list(self.form_fields),
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
        requests.keys(given, self.form_fields, self.kind)
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), self.kind),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=self.check_fields(given),
        )

    def script(self, fields: Any, role: str) -> str:
        """The exact script the scheduler gets for the head (``role="head"``) or a worker."""
        return job_script(self.directives(fields, role), self.label, self.script_note(),
                          self.node_temp_dir(), role, fields.cpus_per_node, fields.gpus_per_node,
                          self.python, self.ray)  # fmt: skip

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

    def record_part(self, record: dict[str, Any]) -> dict[str, Any]:
        return dict(record.get(self.kind) or {})

    def _folder(self, record: dict[str, Any]) -> Path:
        return Path(self.record_part(record)["dir"])

    def script_path(self, folder: str, role: str) -> str:
        return f"{folder}/{role}.{self.script_suffix}"

    def _submit(self, folder: Path, cluster_id: str, role: str) -> str:
        args = self.submit_command(str(folder), cluster_id, role)
        script = Path(self.script_path(str(folder), role))
        stdin = script.read_text() if self.submit_through_stdin else None
        return self.job_id_of(self.run(args, stdin))

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
        return [j["id"] for j in self.record_part(record).get("jobs", []) if j["role"] == "worker"]

    def add_node(self, record: dict[str, Any]) -> dict[str, Any]:
        part = self.record_part(record)
        jobs = list(part["jobs"])
        self._scale_to(self._folder(record), record["id"], jobs, len(self._workers(record)) + 1)
        return {self.kind: {**part, "jobs": jobs}}

    def remove_node(self, record: dict[str, Any], node: str) -> dict[str, Any]:
        part = self.record_part(record)
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

        jobs = [j["id"] for j in self.record_part(record).get("jobs", [])]
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
        jobs = [j["id"] for j in self.record_part(record).get("jobs", [])]
        with contextlib.suppress(SchedulerError):
            active = [j.id for j in self.query(jobs, record).values() if j.phase != "ended"]
            if active:
                self.run(self.cancel_command(active))

    # -- state

    def state(self, record: dict[str, Any]) -> Observed:
        """What the scheduler and the shared folder say now; reads only, changes nothing."""
        return observe(self, record)

    def adopt(self, record: dict[str, Any]) -> str | None:
        # "starting" while any job lives: the manager's launch loop then reads Ray's nodes and
        # says "running" only once every job's node has joined (at once if they all have).
        jobs = [j["id"] for j in self.record_part(record).get("jobs", [])]
        try:
            alive = [j for j in self.query(jobs, record).values() if j.phase != "ended"]
        except SchedulerError:
            return "starting"  # the scheduler is not answering now; keep the record, look again
        if not alive:
            self.stop(record)
            return None
        return "starting"
