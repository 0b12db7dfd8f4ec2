"""The `gridengine` backend: the cluster's Ray nodes are Grid Engine jobs, one job per node.

Grid Engine's part only (SGE, Son of Grid Engine, UGE, Altair Grid Engine); what every batch
scheduler shares is :mod:`.batch`. Driven through ``qsub -terse``, ``qstat -xml``, ``qstat -j ID
-xml`` (why a job waits), ``qalter -w v ID`` (whether it could ever run), ``qacct -j ID`` (how
it ended) and ``qdel``, all argument lists; every user value is checked before it reaches a job
script.

A node is one job of ``cpus_per_node`` slots of a parallel environment (``-pe smp 4``; the PE
must grant them on one host, ``allocation_rule $pe_slots``). Memory is requested only through the
consumable the site names (``memory_resource``: ``mem_free``, ``m_mem_free``...), never through
``h_vmem`` by default: Grid Engine enforces ``h_vmem`` as an address-space limit, which Ray's
large virtual reservations do not survive. A per-slot consumable gets the node's memory divided
by its slots. Ray's folder on the node is inside the job's own ``$TMP``, which Grid Engine
removes when the job ends, even when it kills the job (``qdel`` and the wall time send SIGKILL).

>>> backend = GridEngineBackend("/shared/eugo")
>>> spec = backend.validate({"kind": "gridengine", "gridengine": {"nodes": 2}})
>>> print(backend.plan(spec).summary.split(": ")[0])
2 Grid Engine jobs of 1 node each (1 slot of PE smp per node), wall time 01:00:00
"""

from __future__ import annotations

import contextlib
import getpass
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from traitlets import Unicode

from ...exceptions import OptionsError, SchedulerError
from .. import requests
from .batch import MAX_NODES, BatchBackend, JobState, extra_lines, run_command

__all__ = ["GridEngineBackend", "GridEngineSpec"]

_KEYS = (
    "queue", "project", "parallel_environment", "walltime", "nodes", "cpus_per_node",
    "memory_per_node", "memory_resource", "extra",
)  # fmt: skip
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_QUEUE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")
_RESOURCE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_WALLTIME_RE = re.compile(r"\d{1,4}:[0-5]\d:[0-5]\d")
# One `#$` option per line: -name or -name value, no quotes or shell characters.
_EXTRA_RE = re.compile(r"(?:#\$\s+)?(-[a-z][a-z_]*)(?:\s+([A-Za-z0-9_.,:@%/+=*-]+))?")
# Options the manager sets itself (or that would change what the job is): use the form's fields.
_OWN_OPTIONS = {
    "-N", "-o", "-e", "-j", "-wd", "-cwd", "-S", "-pe", "-q", "-P", "-t", "-tc", "-sync",
    "-terse", "-b", "-C", "-@", "-i", "-shell", "-v", "-V", "-now", "-hold_jid",
}  # fmt: skip


@dataclass(frozen=True)
class GridEngineSpec:
    """A checked Grid Engine launch (``memory_per_node`` in bytes)."""

    queue: str | None
    project: str | None
    parallel_environment: str
    walltime: str
    nodes: int
    cpus_per_node: int
    memory_per_node: int | None
    memory_resource: str | None
    extra: tuple[str, ...]

    @property
    def gpus_per_node(self) -> int:
        return 0  # Grid Engine has no standard GPU resource: request one through `extra`

    def to_model(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "project": self.project,
            "parallel_environment": self.parallel_environment,
            "walltime": self.walltime,
            "nodes": self.nodes,
            "cpus_per_node": self.cpus_per_node,
            "memory_per_node": self.memory_per_node,
            "memory_resource": self.memory_resource,
            "extra": list(self.extra),
        }


def walltime_seconds(value: str) -> int:
    """``HH:MM:SS`` in seconds.

    >>> walltime_seconds("01:30:00")
    5400
    """
    hours, minutes, seconds = (int(p) for p in value.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def _extra(value: Any) -> tuple[str, ...]:
    out = []
    for number, line in extra_lines(value, "gridengine.extra", "#$"):
        match = _EXTRA_RE.fullmatch(line.strip())
        if match is None:
            raise OptionsError(
                f"gridengine.extra line {number} {line!r} is not allowed: give one option per "
                "line, such as -l gpu=1 or #$ -ar 12, without quotes or shell characters."
            )
        option, argument = match.group(1), match.group(2)
        resources = (argument or "").split(",") if option in ("-l", "-hard", "-soft") else []
        if option in _OWN_OPTIONS or any(r.split("=")[0] == "h_rt" for r in resources):
            own = "h_rt" if option not in _OWN_OPTIONS else option
            raise OptionsError(
                f"gridengine.extra line {number} {line!r} is not allowed: the manager sets {own} "
                "itself; use the form's fields instead."
            )
        out.append(f"{option} {argument}" if argument else option)
    return tuple(out)


def _messages(xml: str, tags: tuple[str, ...]) -> list[str]:
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return []
    return [" ".join(e.text.split()) for tag in tags for e in root.iter(tag) if e.text]


class GridEngineBackend(BatchBackend):
    """``kind: "gridengine"``. The record keeps ``gridengine: {"dir", "walltime", "jobs"}``.

    ``parallel_environment`` and ``memory_resource`` are the defaults of the fields of the same
    name (a site's administrator sets them: ``c.GridEngineBackend.memory_resource = "mem_free"``).
    The model's ``gridengine`` key::

        {"dir": "/home/u/.eugo/gridengine/c-3f9a2b1c", "walltime": "01:00:00",
         "jobs": [{"id": "17", "role": "head", "state": "r", "reason": null,
                   "nodes": ["node12"], "time_left": 3540}, ...]}
    """

    kind = "gridengine"
    label = "Grid Engine"
    job_id_variable = "JOB_ID"
    field_keys = _KEYS

    parallel_environment = Unicode(
        "smp",
        config=True,
        help="The parallel environment that grants a node's slots on one host "
        "(allocation_rule $pe_slots), when a launch does not name one.",
    )
    memory_resource = Unicode(
        "",
        config=True,
        help="The cluster's memory consumable (mem_free, m_mem_free...; `qconf -sc` lists them) "
        "that memory_per_node is requested through, when a launch does not name one. Not h_vmem: "
        "Grid Engine enforces it as an address-space limit, which Ray does not survive.",
    )

    def __init__(
        self, shared_dir: str | None = None, python: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(shared_dir, python, **kwargs)
        self._per_slot: dict[str, bool] = {}
        self._never: dict[str, bool] = {}  # job id -> `qalter -w v` found no queue for it
        self._ended: dict[str, JobState] = {}  # job id -> how it ended (qacct)

    # -- fields and script

    def check_fields(self, given: dict[str, Any]) -> GridEngineSpec:
        where = "gridengine"
        words = "use letters, digits, '.', '_' or '-' (as Grid Engine spells it)"

        def word(key: str, pattern: re.Pattern[str] = _WORD_RE) -> str | None:
            value = given.get(key)
            if value in (None, ""):
                return None
            return requests.text(value, key, where, pattern, words)

        memory = given.get("memory_per_node")
        if memory not in (None, ""):
            from ..._units import parse_memory

            memory = int(parse_memory(memory, "gridengine.memory_per_node"))
        resource = given.get("memory_resource")
        resource = (
            requests.text(resource, "memory_resource", where, _RESOURCE_RE,
                          "give the name of the cluster's memory consumable, such as mem_free")
            if resource not in (None, "")
            else self.memory_resource or None
        )  # fmt: skip
        if memory and not resource:
            raise OptionsError(
                "gridengine.memory_per_node needs gridengine.memory_resource: the name of this "
                "cluster's memory consumable (mem_free, m_mem_free...; `qconf -sc` lists them), "
                "or leave memory_per_node out."
            )
        fields = GridEngineSpec(
            queue=word("queue", _QUEUE_RE),
            project=word("project"),
            parallel_environment=word("parallel_environment") or self.parallel_environment,
            walltime=requests.text(
                given.get("walltime", "01:00:00"),
                "walltime",
                where,
                _WALLTIME_RE,
                "give it as HH:MM:SS (for example 01:00:00)",
            ),  # fmt: skip
            nodes=requests.count(given.get("nodes", 1), "nodes", where, 1, MAX_NODES),
            cpus_per_node=requests.count(
                given.get("cpus_per_node", 1), "cpus_per_node", where, 1, 4096
            ),
            memory_per_node=memory or None,
            memory_resource=resource,
            extra=_extra(given.get("extra")),
        )
        if walltime_seconds(fields.walltime) < 60:
            raise OptionsError(
                f"gridengine.walltime={fields.walltime!r} is too short: give at least one minute."
            )
        return fields

    def _is_per_slot(self, resource: str) -> bool:
        """Whether the consumable counts per slot (``YES`` in ``qconf -sc``) rather than per job."""
        if resource not in self._per_slot:
            per_slot = False
            with contextlib.suppress(SchedulerError):
                for line in self.run(["qconf", "-sc"]).splitlines():
                    cols = line.split()
                    if len(cols) >= 6 and cols[0] == resource:
                        per_slot = cols[5] == "YES"
            self._per_slot[resource] = per_slot
        return self._per_slot[resource]

    def directives(self, fields: GridEngineSpec, role: str) -> list[str]:
        lines = [
            "-S /bin/bash",
            f"-pe {fields.parallel_environment} {fields.cpus_per_node}",
            f"-l h_rt={fields.walltime}",
        ]
        if fields.queue:
            lines.append(f"-q {fields.queue}")
        if fields.project:
            lines.append(f"-P {fields.project}")
        if fields.memory_per_node and fields.memory_resource:
            memory = fields.memory_per_node
            if self._is_per_slot(fields.memory_resource):
                memory //= fields.cpus_per_node
            lines.append(f"-l {fields.memory_resource}={max(1, memory // 2**20)}M")
        # In the cluster's folder (qsub's -wd); Grid Engine expands the two variables.
        lines += ["-j y", "-o $JOB_NAME-$JOB_ID.log", *fields.extra]
        return [f"#$ {line}" for line in lines]

    def summary_detail(self, fields: GridEngineSpec) -> str:
        slots = fields.cpus_per_node
        return f"{slots} slot{'s' * (slots > 1)} of PE {fields.parallel_environment} per node"

    def script_note(self) -> list[str]:
        return [
            "# qsub runs it with -wd set to the cluster's folder on the shared file system,",
            "# where the head job publishes its address.",
        ]

    def node_temp_dir(self) -> str:
        # Inside the job's own $TMP, which Grid Engine removes even after a SIGKILL.
        return "${TMP:-/tmp}/eugo-ge-$JOB_ID"

    def temp_mark(self, job_id: str) -> str:
        return f"/eugo-ge-{job_id}/"

    # -- commands

    def run(self, args: list[str]) -> str:
        return run_command(args, self.label)

    def submit_command(self, folder: str, cluster_id: str, role: str) -> list[str]:
        return [
            "qsub", "-terse", "-N", f"eugo-{cluster_id}-{role}", "-wd", folder,
            self.script_path(folder, role),
        ]  # fmt: skip

    def job_id_of(self, submitted: str) -> str:
        return submitted.strip().splitlines()[-1].split(".")[0]

    def cancel_command(self, job_ids: list[str]) -> list[str]:
        return ["qdel", *job_ids]

    def query(self, job_ids: list[str], record: dict[str, Any]) -> dict[str, JobState]:
        if not job_ids:
            return {}
        xml = self.run(["qstat", "-u", getpass.getuser(), "-xml"])
        walltime = (record.get(self.kind) or {}).get("walltime")
        limit = walltime_seconds(walltime) if walltime else None
        wanted, found = set(job_ids), {}
        for job in ElementTree.fromstring(xml).iter("job_list"):
            job_id = (job.findtext("JB_job_number") or "").strip()
            if job_id not in wanted:
                continue
            state = (job.findtext("state") or "").strip()
            queue = (job.findtext("queue_name") or "").strip()
            started = job.findtext("JAT_start_time")
            pending = job.get("state") == "pending" or "q" in state
            # A deleted job still dying ("dr") counts as running until qstat drops it: a cancel
            # waits for that, so nothing of it is left when Remove node or stop returns.
            phase = "pending" if pending and "d" not in state else "running"
            left = limit
            if started and limit is not None and phase == "running":
                elapsed = time.time() - datetime.fromisoformat(started.strip()).timestamp()
                left = max(0, int(limit - elapsed))
            found[job_id] = JobState(
                id=job_id, state=state, phase=phase,
                reason=self._why_waiting(job_id) if phase == "pending" else "",
                nodes=[queue.split("@", 1)[1]] if "@" in queue else [], time_left=left,
            )  # fmt: skip
        for job_id in wanted - set(found):
            found[job_id] = self._how_it_ended(job_id)
        return found

    def _why_waiting(self, job_id: str) -> str:
        try:
            xml = self.run(["qstat", "-j", job_id, "-xml"])
        except SchedulerError:
            return ""
        messages = _messages(xml, ("QIM_message", "MES_message"))
        return messages[0] if messages else ""

    def _how_it_ended(self, job_id: str) -> JobState:
        """A job qstat no longer lists: its accounting record says how it ended."""
        if job_id in self._ended:
            return self._ended[job_id]
        for _ in range(6):  # the record follows the end by up to about a second
            try:
                out = self.run(["qacct", "-j", job_id])
            except SchedulerError:
                time.sleep(0.5)
                continue
            fields = dict(
                (line.split(None, 1) + [""])[:2] for line in out.splitlines() if line.strip()
            )
            failed = fields.get("failed", "0").split()[0]
            status = fields.get("exit_status", "0").split()[0]
            if failed == "37":
                ended = JobState(job_id, "wall time", "ended", end="timeout")
            elif failed == "100" or status == "137":
                ended = JobState(job_id, "deleted", "ended", end="cancelled")
            elif failed != "0" or status != "0":
                ended = JobState(job_id, f"failed (exit {status})", "ended", end="failed")
            else:
                ended = JobState(job_id, "finished", "ended", end="completed")
            self._ended[job_id] = ended
            return ended
        return JobState(job_id, "GONE", "ended")

    def pending_sentence(self, job: JobState, spec: dict[str, Any]) -> tuple[str, bool]:
        raw = job.reason
        if "E" in job.state:
            return f"Grid Engine put it in an error state ({raw or job.state})", True
        if "h" in job.state:
            return f"held (qrls {job.id} releases it)", False
        if self._never_runs(job.id):
            return (
                "no queue of this cluster can ever run it as asked (qalter -w v: no suitable "
                "queues); launch with fewer slots or less memory per node, or another queue "
                "or parallel environment"
            ), True
        pe = spec.get("parallel_environment") or self.parallel_environment
        if "offers only hc:" in raw:
            what = re.search(r"hc:(\w+)", raw)
            sentence = f"waiting for free {what.group(1) if what else 'memory'} on a host"
        elif "slots" in raw and "PE" in raw:
            sentence = f"waiting for free slots in parallel environment {pe}"
        elif "is full" in raw:
            sentence = "waiting for a free slot in the queue"
        elif raw:
            sentence = "pending"
        else:
            return "waiting for Grid Engine to schedule it", False
        return f"{sentence} ({raw})", False

    def _never_runs(self, job_id: str) -> bool:
        """``qalter -w v``: could the job run on an empty cluster? Asked once per job."""
        if job_id not in self._never:
            try:
                out = self.run(["qalter", "-w", "v", job_id])
            except SchedulerError as exc:
                out = str(exc)
            self._never[job_id] = "no suitable queues" in out
        return self._never[job_id]

    def log_path(self, folder: Path, job: dict[str, Any]) -> Path:
        return folder / f"eugo-{folder.name}-{job['role']}-{job['id']}.log"
