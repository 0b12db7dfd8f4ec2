"""The `slurm` backend: the cluster's Ray nodes are SLURM jobs, one job per node.

What every batch scheduler shares (the head job and the worker jobs, the head's address through
the shared folder, scaling, the job script's body, the field checks, stop) is :mod:`.batch`;
this module is only SLURM's part: its form, ``sbatch --parsable``, ``squeue`` and ``scancel`` as
argument lists, the ``#SBATCH`` lines, SLURM's states and pending reasons. The cluster's folder
(``shared_dir``, ``~/.eugo/slurm`` by default) is passed to ``sbatch`` as ``--chdir``.

>>> backend = SlurmBackend("/shared/eugo")
>>> spec = backend.validate({"kind": "slurm", "slurm": {"nodes": 2, "walltime": "00:30:00"}})
>>> print(backend.plan(spec).summary)
2 SLURM jobs of 1 node each (1 CPU per node), wall time 00:30:00: the Ray head, then 1 worker.
>>> backend.directives(spec.fields, "head")[:3]
['#SBATCH --nodes=1', '#SBATCH --ntasks=1', '#SBATCH --cpus-per-task=1']
"""

from __future__ import annotations

import getpass
import re
from typing import Any

from ...exceptions import SlurmError
from .base import FormField
from .batch import BatchBackend, JobState
from .batch_fields import GPUS, MEMORY, NODES, BatchSpec, cpus, extra, walltime

__all__ = ["SlurmBackend", "SlurmError", "reason_sentence"]

ENDED = {
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
}  # fmt: skip
# Pending reasons that do not go away by waiting: the request must change.
IMPOSSIBLE = {
    "PartitionNodeLimit", "PartitionConfig", "PartitionTimeLimit", "BadConstraints",
    "InvalidAccount", "InvalidQOS", "PartitionDown", "PartitionInactive", "QOSMaxCpuPerJobLimit",
    "QOSMaxNodePerJobLimit", "QOSMaxWallDurationPerJobLimit", "AssocMaxWallDurationPerJobLimit",
    "AssocMaxNodesPerJobLimit", "AssocMaxCpuPerJobLimit",
}  # fmt: skip


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


class SlurmBackend(BatchBackend):
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
    label = "SLURM"
    job_id_variable = "SLURM_JOB_ID"
    script_suffix = "sbatch"
    rank = 10
    hint = (
        "The Ray head runs in a SLURM job of its own, one of the nodes below (not on this "
        "login node); each further node is a worker job."
    )
    fields = (
        FormField("partition", "Partition", placeholder="default"),
        FormField("account", "Account", placeholder="optional"),
        walltime("HH:MM:SS, D-HH:MM:SS or minutes"), NODES, cpus(), GPUS, MEMORY,
        extra("Extra #SBATCH lines", "--qos=short\n--constraint=a100"),
    )  # fmt: skip
    directive = "#SBATCH"
    # SLURM's own formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
    walltime_pattern = re.compile(
        r"\d{1,5}|\d{1,4}:\d{2}|\d{1,3}:\d{2}:\d{2}|\d{1,3}-\d{1,2}(:\d{2}){0,2}"
    )
    walltime_rule = "give it as SLURM does: minutes, HH:MM:SS or D-HH:MM:SS (for example 01:00:00)"
    # One option per line: --name or --name=value, no spaces, quotes or shell characters.
    extra_pattern = re.compile(r"(--[a-z][a-z0-9-]*)(?:=([A-Za-z0-9_.,:@%/+=-]+))?")
    extra_example = "--qos=short or #SBATCH --constraint=a100"
    extra_joiner = "="
    own_options = frozenset({
        "--job-name", "--output", "--error", "--chdir", "--nodes", "--ntasks", "--cpus-per-task",
        "--time", "--partition", "--account", "--mem", "--gpus-per-node", "--array", "--wrap",
        "--parsable", "--export", "--export-file", "--input", "--kill-on-invalid-dep", "--wait",
    })  # fmt: skip

    @staticmethod
    def walltime_seconds(value: str) -> int:
        """SLURM's wall-time formats in seconds.

        >>> f = SlurmBackend.walltime_seconds
        >>> f("1-02:00:00"), f("90"), f("05:30")
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

    def directives(self, fields: BatchSpec, role: str) -> list[str]:
        lines = ["--nodes=1", "--ntasks=1", f"--cpus-per-task={fields.cpus_per_node}",
                 f"--time={fields.walltime}"]  # fmt: skip
        lines += [f"--{key}={fields[key]}" for key in ("partition", "account") if fields[key]]
        if fields.gpus_per_node:
            lines.append(f"--gpus-per-node={fields.gpus_per_node}")
        if fields.memory_per_node:
            lines.append(f"--mem={max(1, fields.memory_per_node // 2**20)}M")
        lines.append("--output=%x-%j.log")  # in the cluster's folder (the job's --chdir)
        return [f"#SBATCH {line}" for line in [*lines, *fields.extra]]

    def script_note(self) -> list[str]:
        return [
            "# sbatch runs it with --chdir set to the cluster's folder on the shared file system,",
            "# where the head job publishes its address.",
        ]

    def submit_command(self, folder: str, cluster_id: str, role: str) -> list[str]:
        return [
            "sbatch", "--parsable", f"--job-name=eugo-{cluster_id}-{role}", f"--chdir={folder}",
            self.script_path(folder, role),
        ]  # fmt: skip

    def job_id_of(self, submitted: str) -> str:
        return submitted.strip().split(";")[0]

    def cancel_command(self, job_ids: list[str]) -> list[str]:
        return ["scancel", *job_ids]

    def _seconds(self, left: str) -> int | None:
        if not left or left in ("INVALID", "UNLIMITED", "NOT_SET"):
            return None
        try:
            return self.walltime_seconds(left) if "-" in left or ":" in left else int(left)
        except ValueError:
            return None

    def query(self, job_ids: list[str], record: dict[str, Any]) -> dict[str, JobState]:
        """The state of these jobs (finished ones too, while SLURM remembers them)."""
        if not job_ids:
            return {}
        out = self.run(["squeue", f"--user={getpass.getuser()}", "--states=all", "--noheader",
                        "--format=%i|%T|%r|%N|%L"])  # fmt: skip
        wanted, found = set(job_ids), {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) != 5 or parts[0] not in wanted:
                continue
            job_id, state, reason, nodes, left = parts
            phase = "ended" if state in ENDED else "pending" if state == "PENDING" else "running"
            found[job_id] = JobState(
                job_id, state, phase, "" if reason in ("None", "(null)") else reason,
                [n for n in nodes.split(",") if n],
                self._seconds(left) if state in ("RUNNING", "PENDING") else None,
                {"TIMEOUT": "timeout", "CANCELLED": "cancelled"}.get(state),
            )  # fmt: skip
        return found

    def pending_sentence(self, job: JobState, spec: dict[str, Any]) -> tuple[str, bool]:
        sentence = reason_sentence(job.reason or "None", spec.get("partition"))
        return sentence, job.reason in IMPOSSIBLE
