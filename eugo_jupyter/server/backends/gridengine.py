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
from datetime import datetime
from typing import Any
from xml.etree import ElementTree

from traitlets import Unicode

from ...exceptions import OptionsError, SchedulerError
from .base import FormField
from .batch import BatchBackend, JobState
from .batch_fields import MEMORY, NODES, BatchSpec, cpus, extra, walltime

__all__ = ["GridEngineBackend"]

_QUEUE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")
_RESOURCE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


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
    rank = 20
    hint = (
        "The Ray head runs in a Grid Engine job of its own, one of the nodes below (not on "
        "this login node); each further node is a worker job of as many slots."
    )
    fields = (
        FormField("queue", "Queue", placeholder="default", pattern=_QUEUE_RE),
        FormField("project", "Project", placeholder="optional"),
        FormField("parallel_environment", "Parallel environment",
                  placeholder="the server's default (smp)"),
        walltime("HH:MM:SS"), NODES, cpus("Slots per node"), MEMORY,
        FormField("memory_resource", "Memory resource", pattern=_RESOURCE_RE,
                  placeholder="the server's default (mem_free...)",
                  title="The memory consumable memory per node is requested through (not h_vmem)",
                  rule="give the name of the cluster's memory consumable, such as mem_free"),
        extra("Extra #$ lines", "-l gpu=1\n-ar 12"),
    )  # fmt: skip
    directive = "#$"
    walltime_pattern = re.compile(r"\d{1,4}:[0-5]\d:[0-5]\d")
    walltime_rule = "give it as HH:MM:SS (for example 01:00:00)"
    # One option per line: -name or -name value, no quotes or shell characters.
    extra_pattern = re.compile(r"(-[a-z][a-z_]*)(?:\s+([A-Za-z0-9_.,:@%/+=*-]+))?")
    extra_example = "-l gpu=1 or #$ -ar 12"
    own_options = frozenset({
        "-N", "-o", "-e", "-j", "-wd", "-cwd", "-S", "-pe", "-q", "-P", "-t", "-tc", "-sync",
        "-terse", "-b", "-C", "-@", "-i", "-shell", "-v", "-V", "-now", "-hold_jid",
    })  # fmt: skip

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

    @staticmethod
    def walltime_seconds(value: str) -> int:
        """``HH:MM:SS`` in seconds.

        >>> GridEngineBackend.walltime_seconds("01:30:00")
        5400
        """
        hours, minutes, seconds = (int(p) for p in value.split(":"))
        return hours * 3600 + minutes * 60 + seconds

    def extra_refused(self, option: str, argument: str) -> str | None:
        resources = argument.split(",") if option in ("-l", "-hard", "-soft") else []
        return "h_rt" if any(r.split("=")[0] == "h_rt" for r in resources) else None

    def check_fields(self, given: dict[str, Any]) -> BatchSpec:
        fields = super().check_fields(given)
        if fields.memory_per_node and not fields["memory_resource"]:
            raise OptionsError(
                "gridengine.memory_per_node needs gridengine.memory_resource: the name of this "
                "cluster's memory consumable (mem_free, m_mem_free...; `qconf -sc` lists them), "
                "or leave memory_per_node out."
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

    def directives(self, fields: BatchSpec, role: str) -> list[str]:
        lines = [
            "-S /bin/bash",
            f"-pe {fields['parallel_environment']} {fields.cpus_per_node}",
            f"-l h_rt={fields.walltime}",
        ]
        lines += [f"{flag} {fields[key]}" for flag, key in (("-q", "queue"), ("-P", "project"))
                  if fields[key]]  # fmt: skip
        resource = fields["memory_resource"]
        if fields.memory_per_node and resource:
            memory = fields.memory_per_node
            if self._is_per_slot(resource):
                memory //= fields.cpus_per_node
            lines.append(f"-l {resource}={max(1, memory // 2**20)}M")
        # In the cluster's folder (qsub's -wd); Grid Engine expands the two variables.
        lines += ["-j y", "-o $JOB_NAME-$JOB_ID.log", *fields.extra]
        return [f"#$ {line}" for line in lines]

    def summary_detail(self, fields: BatchSpec) -> str:
        slots = fields.cpus_per_node
        return f"{slots} slot{'s' * (slots > 1)} of PE {fields['parallel_environment']} per node"

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
        limit = self.walltime_seconds(walltime) if walltime else None
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
