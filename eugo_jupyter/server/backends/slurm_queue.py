"""SLURM's own commands, as argument lists: submit, read the queue, cancel; and its reasons.

>>> reason_sentence("QOSMaxJobsPerUserLimit", None)
'your account has reached its job limit (QOSMaxJobsPerUserLimit)'
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from ...exceptions import SlurmError
from .batch import run_command
from .slurm_script import walltime_seconds

__all__ = ["ENDED", "IMPOSSIBLE", "JobState", "SlurmError", "reason_sentence", "slurm", "squeue"]

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


def slurm(args: list[str], timeout: float = 60.0) -> str:
    """Run one SLURM command (an argument list); SLURM's own message on failure."""
    return run_command(args, "SLURM", timeout)


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
    out = slurm(
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
