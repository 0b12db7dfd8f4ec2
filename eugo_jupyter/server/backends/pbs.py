"""The `pbs` backend (PBS Pro / OpenPBS): the cluster's Ray nodes are PBS jobs, one per node.

PBS's part only, on the batch base (:mod:`.batch`): its form, ``qsub``, ``qstat -x -f -F json``
(the state, the ``comment`` that says why a job waits, ``Exit_status`` for how it ended) and
``qdel`` as argument lists, and the ``#PBS`` lines (a node is ``-l select=1:ncpus=N``). PBS has
no ``-wd``: the job changes into the cluster's folder (passed as ``EUGO_CLUSTER_DIR``) and sends
its output to the log the base reads.

Not offered by the server yet (``register=False``): no PBS can be installed on the machines this
project is tested on, and a backend that never ran against the real scheduler is not offered.
Its tests run the contract suite against fake ``qsub``/``qstat``/``qdel`` commands
(``tests/fixtures/fake_pbs.py``), which answer as PBS Pro's documentation says.

>>> backend = PbsBackend("/shared/eugo")
>>> spec = backend.validate({"kind": "pbs", "pbs": {"nodes": 2, "cpus_per_node": 4}})
>>> backend.directives(spec.fields, "head")[:2]
['#PBS -l select=1:ncpus=4', '#PBS -l walltime=01:00:00']
"""

from __future__ import annotations

import json
import re
from typing import Any

from .base import FormField
from .batch import BatchBackend, JobState
from .batch_fields import GPUS, MEMORY, NODES, BatchSpec, cpus, extra, walltime

__all__ = ["PbsBackend"]

_PENDING, _ENDED = set("QHWTM"), set("FX")
# Exit_status: PBS's own codes below 0; a signal is 256 + its number (qdel sends TERM, then KILL).
_ENDS = {-29: "timeout", 271: "cancelled", 265: "cancelled", 0: "completed"}


def _hms(value: str | None) -> int | None:
    try:
        hours, minutes, seconds = (int(p) for p in (value or "").split(":"))
    except ValueError:
        return None
    return hours * 3600 + minutes * 60 + seconds


class PbsBackend(BatchBackend, register=False):
    """``kind: "pbs"``. The record keeps ``pbs: {"dir", "walltime", "jobs": [{"id", "role"}]}``;
    a job's id is PBS's whole one (``123.server``), as ``$PBS_JOBID`` spells it in the job."""

    kind = "pbs"
    label = "PBS"
    job_id_variable = "PBS_JOBID"
    rank = 25
    hint = (
        "The Ray head runs in a PBS job of its own, one of the nodes below (not on this login "
        "node); each further node is a worker job."
    )
    fields = (
        FormField("queue", "Queue", placeholder="default", pattern=re.compile(r"[\w.@-]{1,128}")),
        FormField("account", "Account", placeholder="optional"),
        walltime("HH:MM:SS"), NODES, cpus(), GPUS, MEMORY,
        extra("Extra #PBS lines", "-l place=excl\n-W group_list=lab"),
    )  # fmt: skip
    directive = "#PBS"
    walltime_pattern = re.compile(r"\d{1,4}:[0-5]\d:[0-5]\d")
    walltime_rule = "give it as HH:MM:SS (for example 01:00:00)"
    extra_pattern = re.compile(r"(-[A-Za-z])(?:\s+([A-Za-z0-9_.,:@%/+=*-]+))?")
    extra_example = "-l place=excl or #PBS -W group_list=lab"
    own_options = frozenset({"-N", "-o", "-e", "-j", "-q", "-A", "-J", "-v", "-V", "-S", "-I",
                             "-X", "-k", "-z", "-C"})  # fmt: skip

    @staticmethod
    def walltime_seconds(value: str) -> int:
        return _hms(value) or 0

    def extra_refused(self, option: str, argument: str) -> str | None:
        resources = [r.split("=")[0] for r in argument.split(",")] if option == "-l" else []
        return next((r for r in resources if r in ("select", "walltime", "ncpus", "mem")), None)

    def directives(self, fields: BatchSpec, role: str) -> list[str]:
        select = f"select=1:ncpus={fields.cpus_per_node}"
        if fields.gpus_per_node:
            select += f":ngpus={fields.gpus_per_node}"
        if fields.memory_per_node:
            select += f":mem={max(1, fields.memory_per_node // 2**20)}mb"
        lines = [f"-l {select}", f"-l walltime={fields.walltime}"]
        lines += [f"{flag} {fields[key]}" for flag, key in (("-q", "queue"), ("-A", "account"))
                  if fields[key]]  # fmt: skip
        # The output goes to the log the base reads (the script's own redirection, below).
        lines += ["-j oe", "-o /dev/null", *fields.extra]
        return [f"#PBS {line}" for line in lines]

    def script_note(self) -> list[str]:
        return [
            "# PBS starts it in the home folder: it changes into the cluster's folder on the",
            "# shared file system, where the head job publishes its address, and logs there.",
            'cd "$EUGO_CLUSTER_DIR" || exit 1',
            'exec >"$PBS_JOBNAME-$PBS_JOBID.log" 2>&1',
        ]

    def submit_command(self, folder: str, cluster_id: str, role: str) -> list[str]:
        return ["qsub", "-N", f"eugo-{cluster_id}-{role}", "-v", f"EUGO_CLUSTER_DIR={folder}",
                self.script_path(folder, role)]  # fmt: skip

    def job_id_of(self, submitted: str) -> str:
        return submitted.strip().splitlines()[-1]

    def cancel_command(self, job_ids: list[str]) -> list[str]:
        return ["qdel", *job_ids]

    def query(self, job_ids: list[str], record: dict[str, Any]) -> dict[str, JobState]:
        """These jobs' states; ``-x`` keeps finished ones while PBS's job history does."""
        if not job_ids:
            return {}
        jobs = json.loads(self.run(["qstat", "-x", "-f", "-F", "json"]) or "{}").get("Jobs", {})
        found = {}
        for job_id in set(job_ids) & set(jobs):
            job = jobs[job_id]
            state = job.get("job_state", "")
            phase = "pending" if state in _PENDING else "ended" if state in _ENDED else "running"
            limit = _hms(job.get("Resource_List", {}).get("walltime"))
            used = _hms(job.get("resources_used", {}).get("walltime")) or 0
            hosts = [h.split("/")[0] for h in job.get("exec_host", "").split("+") if h]
            end = None
            if phase == "ended":
                end = _ENDS.get(int(job.get("Exit_status", 1)), "failed")
            found[job_id] = JobState(
                job_id, state, phase, job.get("comment", "") if phase == "pending" else "",
                hosts, None if limit is None or phase == "ended" else max(0, limit - used), end,
            )  # fmt: skip
        return found

    def pending_sentence(self, job: JobState, spec: dict[str, Any]) -> tuple[str, bool]:
        raw = job.reason
        if job.state == "H":
            return f"held (qrls {job.id} releases it)", False
        if raw.startswith("Can Never Run"):
            return (
                f"no node of this PBS complex can ever run it as asked; launch with fewer CPUs, "
                f"GPUs or less memory per node, or another queue ({raw})"
            ), True
        if "Insufficient amount of resource" in raw:
            return f"waiting for free resources ({raw})", False
        queue = spec.get("queue") or "the default queue"
        return (f"waiting in {queue} ({raw})" if raw else "waiting for PBS to schedule it"), False
