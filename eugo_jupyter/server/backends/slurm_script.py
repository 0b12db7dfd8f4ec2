"""What the slurm backend submits: the checked spec and its ``#SBATCH`` lines.

The rest of the job script is the batch base's (:meth:`.batch.BatchBackend.script`). Every value
here was checked by :meth:`.slurm.SlurmBackend.validate`.

>>> spec = SlurmSpec(None, None, "00:30:00", 2, 4, 0, None, ())
>>> directives(spec)[:3]
['--nodes=1', '--ntasks=1', '--cpus-per-task=4']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SlurmSpec", "directives", "walltime_seconds"]


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


def directives(spec: SlurmSpec) -> list[str]:
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
