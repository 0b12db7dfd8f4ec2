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

import contextlib
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ..._raytoken import secure_token_file
from ...exceptions import OptionsError
from .. import requests
from .base import Backend, Observed, Plan, Spec
from .local import _processes
from .slurm_queue import ENDED, IMPOSSIBLE, SlurmError, reason_sentence, slurm, squeue
from .slurm_script import SlurmSpec, job_script, walltime_seconds

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
            if value in (None, ""):
                return None
            return requests.text(value, key, where, _WORD_RE, words)

        memory = given.get("memory_per_node")
        if memory not in (None, ""):
            from ..._units import parse_memory

            memory = parse_memory(memory, "slurm.memory_per_node")
        fields = SlurmSpec(
            partition=word("partition"),
            account=word("account"),
            walltime=requests.text(
                given.get("walltime", "01:00:00"),
                "walltime",
                where,
                _WALLTIME_RE,
                "give it as SLURM does: minutes, HH:MM:SS or D-HH:MM:SS (for example 01:00:00)",
            ),  # fmt: skip
            nodes=requests.count(given.get("nodes", 1), "nodes", where, 1, MAX_NODES),
            cpus_per_node=requests.count(
                given.get("cpus_per_node", 1), "cpus_per_node", where, 1, 4096
            ),
            gpus_per_node=requests.count(
                given.get("gpus_per_node", 0), "gpus_per_node", where, 0, 64
            ),
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
            worker = self.script(fields, "worker")
            scripts.append({"name": "worker", "count": workers, "text": worker})
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
        out = slurm(self._sbatch(str(folder), cluster_id, role))
        return out.strip().split(";")[0]

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        fields: SlurmSpec = spec.fields
        folder = self.shared_dir / str(record["id"])
        folder.mkdir(parents=True, mode=0o700)
        # The jobs' `ray start` reads this account's token from the shared home: make it 0600
        # (and write a missing one) before any job can, since Ray would write it world-readable.
        secure_token_file(create=True)
        for role in ("head", "worker"):
            (folder / f"{role}.sbatch").write_text(self.script(fields, role))
        jobs: list[dict[str, str]] = []
        try:
            jobs.append({"id": self._submit(folder, record["id"], "head"), "role": "head"})
            for _ in range(fields.nodes - 1):
                jobs.append({"id": self._submit(folder, record["id"], "worker"), "role": "worker"})
        except BaseException:
            if jobs:
                slurm(["scancel", *(j["id"] for j in jobs)])
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
        left = self._cancel([node]) + [str(pid) for pid in _wait_gone([node])]
        if left:
            raise SlurmError(f"Worker job {node} did not end: {', '.join(left)}.")
        return {"slurm": {**slurm, "jobs": [j for j in slurm["jobs"] if j["id"] != node]}}

    def _cancel(self, job_ids: list[str], timeout: float = 120.0) -> list[str]:
        """scancel, then wait until SLURM has finished them; returns the jobs still there."""
        active = [j.id for j in squeue(job_ids).values() if j.state not in ENDED]
        if not active:
            return []
        try:
            slurm(["scancel", *active])
        except SlurmError:
            pass  # a job that ended meanwhile is refused; the loop below checks the outcome
        deadline = time.monotonic() + timeout
        while True:
            left = [j.id for j in squeue(job_ids).values() if j.state not in ENDED]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def stop(self, record: dict[str, Any]) -> list[str]:
        from .. import monitor

        jobs = [j["id"] for j in record.get("slurm", {}).get("jobs", [])]
        left = [f"SLURM job {j}" for j in self._cancel(jobs)]
        left += [f"pid {pid}: {_cmdline(pid)[:120]}" for pid in _wait_gone(jobs)]
        address = record.get("address")
        if address and not left and monitor.reachable(str(address), 2.0):
            left.append(f"a Ray head still answering at {address}")
        if not left and record.get("slurm"):
            shutil.rmtree(self._folder(record), ignore_errors=True)
        return left

    # -- state

    def state(self, record: dict[str, Any]) -> Observed:
        jobs_info = record.get("slurm") or {}
        jobs = jobs_info.get("jobs", [])
        spec = record.get("spec") or {}
        observed = Observed(
            address=record.get("address"), dashboard_url=record.get("dashboard_url")
        )
        head_file = Path(jobs_info.get("dir", "/nonexistent")) / "head"
        if observed.address is None and head_file.exists():
            address, _, dashboard = head_file.read_text().strip().partition(" ")
            observed.address, observed.dashboard_url = address, dashboard or None
        try:
            states = squeue([j["id"] for j in jobs])
        except SlurmError as exc:
            observed.waiting = True
            observed.detail = {**_public(jobs_info), "jobs": [], "error": str(exc)}
            return observed
        rows = []
        for job in jobs:
            seen = states.get(job["id"])
            state = seen.state if seen else "GONE"
            reason = None
            if state == "PENDING" and seen is not None:
                reason = reason_sentence(seen.reason or "None", spec.get("partition"))
                if seen.reason in IMPOSSIBLE:
                    observed.blocked = (
                        f"SLURM cannot run job {job['id']} ({job['role']}) as asked: {reason}."
                    )
                observed.waiting = True
            elif job["role"] == "worker" and state in ENDED:
                log = self._log(jobs_info, job)
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
        observed.detail = {**_public(jobs_info), "jobs": rows}
        observed.nodes_expected = sum(r["state"] not in ENDED | {"GONE"} for r in rows)
        head = next((r for r in rows if r["role"] == "head"), None)
        if head is not None and (head["state"] in ENDED or head["state"] == "GONE"):
            observed.ended = self._ended_sentence(head, jobs_info)
            others = [r["id"] for r in rows if r["state"] not in ENDED | {"GONE"}]
            if others:  # without a head the workers serve nothing
                with contextlib.suppress(SlurmError):
                    slurm(["scancel", *others])
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
        # "starting" while any job lives: the manager's launch loop then reads Ray's nodes and
        # says "running" only once every job's node has joined (at once if they all have).
        jobs = [j["id"] for j in record.get("slurm", {}).get("jobs", [])]
        try:
            alive = [j for j in squeue(jobs).values() if j.state not in ENDED]
        except SlurmError:
            return "starting"  # SLURM is not answering now; keep the record and look again
        if not alive:
            self.stop(record)
            return None
        return "starting"


def _wait_gone(job_ids: list[str], timeout: float = 90.0) -> list[int]:
    """Wait until no process of these jobs is left on this machine; returns those still there.

    SLURM ends a job's process tree (SIGTERM, then SIGKILL after its KillWait); a Ray process of
    the job still running here after that is proof it did not. Their temp folders are named after
    the job; on other machines SLURM's own accounting is the proof.
    """
    marks = tuple(f"/tmp/eugo-{j}/" for j in job_ids)
    deadline = time.monotonic() + timeout
    while True:
        pids = [pid for pid in _processes() if any(m in _cmdline(pid) for m in marks)]
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.5)


def _public(slurm: dict[str, Any]) -> dict[str, Any]:
    return {"dir": slurm.get("dir"), "walltime": slurm.get("walltime")}


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""
