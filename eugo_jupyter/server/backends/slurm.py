"""The `slurm` backend: the cluster's Ray nodes are SLURM jobs, one job per node.

What every batch scheduler shares (the head job and the worker jobs, the head's address through
the shared folder, scaling, the job script's body, stop) is :mod:`.batch`; this module is only
SLURM's part: ``sbatch --parsable``, ``squeue`` and ``scancel`` as argument lists, the
``#SBATCH`` lines, SLURM's states and pending reasons, and the checks of the ``slurm`` fields
(every user value is checked before it reaches a job script). The cluster's folder
(``shared_dir``, ``~/.eugo/slurm`` by default) is passed to ``sbatch`` as ``--chdir``.

>>> backend = SlurmBackend("/shared/eugo")
>>> spec = backend.validate({"kind": "slurm", "slurm": {"nodes": 2, "walltime": "00:30:00"}})
>>> print(backend.plan(spec).summary)
2 SLURM jobs of 1 node each (1 CPU per node), wall time 00:30:00: the Ray head, then 1 worker.
"""

from __future__ import annotations

import re
from typing import Any

from ...exceptions import OptionsError
from .. import requests
from .batch import MAX_NODES, BatchBackend, JobState, extra_lines
from .slurm_queue import ENDED, IMPOSSIBLE, SlurmError, reason_sentence, slurm, squeue
from .slurm_script import SlurmSpec, directives, walltime_seconds

__all__ = ["SlurmBackend", "SlurmError", "SlurmSpec", "reason_sentence"]

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
    out = []
    for number, line in extra_lines(value, "slurm.extra", "#SBATCH"):
        match = _EXTRA_RE.fullmatch(line.strip())
        if match is None:
            raise OptionsError(
                f"slurm.extra line {number} {line!r} is not allowed: give one option per line, "
                "such as --qos=short or #SBATCH --constraint=a100, without spaces, quotes or "
                "shell characters."
            )
        option = match.group(1)
        if option.split("=")[0] in _OWN_OPTIONS:
            raise OptionsError(
                f"slurm.extra line {number} {line!r} is not allowed: the manager sets "
                f"{option.split('=')[0]} itself; use the form's fields instead."
            )
        out.append(option)
    return tuple(out)


# ---------------------------------------------------------------- the backend


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
    field_keys = _SLURM_KEYS

    def check_fields(self, given: dict[str, Any]) -> SlurmSpec:
        where = "slurm"
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
        return fields

    def directives(self, fields: SlurmSpec, role: str) -> list[str]:
        return [f"#SBATCH {line}" for line in directives(fields)]

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

    def run(self, args: list[str]) -> str:
        return slurm(args)

    def query(self, job_ids: list[str], record: dict[str, Any]) -> dict[str, JobState]:
        found = {}
        for job in squeue(job_ids).values():
            phase = (
                "ended"
                if job.state in ENDED
                else "pending"
                if job.state == "PENDING"
                else "running"
            )
            end = {"TIMEOUT": "timeout", "CANCELLED": "cancelled"}.get(job.state)
            found[job.id] = JobState(job.id, job.state, phase, job.reason, job.nodes,
                                     job.time_left, end)  # fmt: skip
        return found

    def pending_sentence(self, job: JobState, spec: dict[str, Any]) -> tuple[str, bool]:
        return reason_sentence(
            job.reason or "None", spec.get("partition")
        ), job.reason in IMPOSSIBLE
