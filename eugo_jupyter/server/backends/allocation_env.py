"""The batch job this process runs in, read from the scheduler's own variables (pure parsing).

SLURM (``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST`` in its compact host-list form,
``SLURM_JOB_CPUS_PER_NODE`` such as ``72(x2),36``), Grid Engine (``JOB_ID`` and the
``PE_HOSTFILE`` of a parallel environment: one line per host, ``host slots queue processors``)
and PBS (``PBS_JOBID`` and ``PBS_NODEFILE``: one line per slot, a host repeated once per slot).
Nothing here starts or asks anything; :mod:`.allocation` uses it.

>>> expand_hostlist("node[01-03,07],gpu1")
['node01', 'node02', 'node03', 'node07', 'gpu1']
>>> expand_counts("72(x2),36")
[72, 72, 36]
>>> parse_pe_hostfile("n1.example.org 4 all.q@n1.example.org UNDEFINED\\n")
[('n1.example.org', 4)]
>>> parse_nodefile("n1\\nn1\\nn2\\n")
[('n1', 2), ('n2', 1)]
"""

from __future__ import annotations

import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...exceptions import OptionsError

__all__ = [
    "Allocation",
    "Node",
    "detect",
    "expand_counts",
    "expand_hostlist",
    "gpus_here",
    "parse_nodefile",
    "parse_pe_hostfile",
    "ports_of",
]

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def _expand_one(name: str) -> list[str]:
    """``rack[1-2]-n[01,03]`` -> every combination, zero padding kept (SLURM's host list)."""
    open_at = name.find("[")
    if open_at < 0:
        return [name]
    close_at = name.find("]", open_at)
    if close_at < 0:
        raise OptionsError(f"The host list {name!r} has an unclosed '['.")
    prefix, inside, rest = name[:open_at], name[open_at + 1 : close_at], name[close_at + 1 :]
    values: list[str] = []
    for item in inside.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise OptionsError(f"The host list {name!r} has a range {item!r} that is not n or n-m.")
        low, high = match.group(1), match.group(2) or match.group(1)
        width = len(low)
        values += [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
    return [prefix + v + tail for v in values for tail in _expand_one(rest)]


def expand_hostlist(text: str) -> list[str]:
    """SLURM's compact host list (``SLURM_JOB_NODELIST``), expanded in order."""
    return [host for part in _split_top(text.strip()) for host in _expand_one(part)]


def expand_counts(text: str) -> list[int]:
    """SLURM's per-node counts (``SLURM_JOB_CPUS_PER_NODE``): ``4(x2),2`` -> ``[4, 4, 2]``."""
    counts: list[int] = []
    for part in text.strip().split(","):
        match = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not match:
            raise OptionsError(f"SLURM's CPU counts {text!r} are not in the form 4(x2),2.")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def parse_pe_hostfile(text: str) -> list[tuple[str, int]]:
    """Grid Engine's ``PE_HOSTFILE``: ``(host, slots)`` per line (a host's lines add up)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit():
            found[fields[0]] = found.get(fields[0], 0) + int(fields[1])
    return list(found.items())


def parse_nodefile(text: str) -> list[tuple[str, int]]:
    """PBS's ``PBS_NODEFILE``: one line per slot; ``(host, slots)`` in first-seen order."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        if line.strip():
            found[line.strip()] = found.get(line.strip(), 0) + 1
    return list(found.items())


def gpus_here(env: dict[str, str]) -> int:
    """The GPUs the job was given on this node: ``CUDA_VISIBLE_DEVICES``, else
    ``SLURM_JOB_GPUS`` (``"0,1"``); 0 when neither says.

    >>> gpus_here({"CUDA_VISIBLE_DEVICES": "2,3"}), gpus_here({})
    (2, 0)
    """
    for key in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "SGE_HGR_gpu"):
        value = env.get(key, "").strip()
        if value and value not in ("NoDevFiles", "-1"):
            return len([v for v in re.split(r"[,\s]+", value) if v])
    return 0


def ports_of(job_id: str, index: int) -> int:
    """The first of ten ports node ``index`` of job ``job_id`` uses: a block of 40 per job in
    20000-59999, so two jobs on one node (and up to four nodes of a job on one machine) differ.

    >>> ports_of("123456", 0), ports_of("123456", 1)
    (38240, 38250)
    """
    digits = int(re.sub(r"\D", "", job_id) or "0")
    return 20000 + (digits % 1000) * 40 + (index % 4) * 10


@dataclass(frozen=True)
class Node:
    """One node of the job: its name as the scheduler's launcher takes it, and its CPUs."""

    name: str
    cpus: int


@dataclass(frozen=True)
class Allocation:
    """The job this process runs in."""

    scheduler: str  # "slurm" | "gridengine" | "pbs"
    job_id: str
    nodes: tuple[Node, ...]  # this node first
    gpus: int = 0  # on this node
    ends_at: float | None = None  # the wall time's end (epoch seconds), when the scheduler says
    launcher: tuple[str, ...] = field(default=())  # the start of the command that reaches a node

    @property
    def label(self) -> str:
        return {"slurm": "SLURM", "gridengine": "Grid Engine", "pbs": "PBS"}[self.scheduler]


def _here_first(nodes: list[Node], here: str) -> list[Node]:
    short = here.split(".")[0]
    for i, node in enumerate(nodes):
        if node.name in (here, short) or node.name.split(".")[0] == short:
            return [node, *nodes[:i], *nodes[i + 1 :]]
    return nodes


def _not_in_a_job() -> OptionsError:
    return OptionsError(
        'kind "allocation" uses the batch job this runs in, and there is none: no SLURM_JOB_ID '
        "with SLURM_JOB_NODELIST, JOB_ID with PE_HOSTFILE (Grid Engine) or PBS_JOBID with "
        "PBS_NODEFILE. Start Jupyter (or the script) inside a job (salloc, sbatch, qrsh, qsub), "
        'or launch kind "slurm" or "gridengine" to get nodes.'
    )


def detect(env: dict[str, str] | None = None) -> Allocation:
    """The job of ``env`` (default: this process's); OptionsError outside a job."""
    env = dict(os.environ) if env is None else env
    if env.get("SLURM_JOB_ID") and (env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")):
        hosts = expand_hostlist(env.get("SLURM_JOB_NODELIST") or env["SLURM_NODELIST"])
        counts = expand_counts(env.get("SLURM_JOB_CPUS_PER_NODE") or "1")
        counts += [counts[-1]] * (len(hosts) - len(counts))
        nodes = [Node(h, c) for h, c in zip(hosts, counts, strict=False)]
        here = env.get("SLURMD_NODENAME") or socket.gethostname()
        nodes = _here_first(nodes, here)
        if env.get("SLURM_CPUS_ON_NODE", "").isdigit():  # this node's, as the job step sees it
            nodes[0] = Node(nodes[0].name, int(env["SLURM_CPUS_ON_NODE"]))
        end = env.get("SLURM_JOB_END_TIME", "")
        return Allocation(
            "slurm", env["SLURM_JOB_ID"], tuple(nodes), gpus_here(env),
            float(end) if end.isdigit() and int(end) > 0 else None,
            ("srun", "--overlap", "--nodes=1", "--ntasks=1", "--cpus-per-task={cpus}", "-w"),
        )  # fmt: skip
    if env.get("JOB_ID") and env.get("PE_HOSTFILE"):
        pairs = parse_pe_hostfile(_read(env["PE_HOSTFILE"], "PE_HOSTFILE"))
        nodes = _here_first([Node(h, s) for h, s in pairs], socket.gethostname())
        return Allocation(
            "gridengine", env["JOB_ID"], tuple(nodes), gpus_here(env), None,
            ("qrsh", "-inherit", "-V"),
        )  # fmt: skip
    if env.get("PBS_JOBID") and env.get("PBS_NODEFILE"):
        pairs = parse_nodefile(_read(env["PBS_NODEFILE"], "PBS_NODEFILE"))
        nodes = _here_first([Node(h, s) for h, s in pairs], socket.gethostname())
        return Allocation(
            "pbs", env["PBS_JOBID"], tuple(nodes), gpus_here(env), None, ("pbsdsh", "-h")
        )
    raise _not_in_a_job()


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise OptionsError(f"{what}={path!r} cannot be read ({exc.strerror}).") from None


def seconds_left(allocation: Allocation, now: float | None = None) -> float | None:
    """Seconds to the job's wall time, when the scheduler said it."""
    if allocation.ends_at is None:
        return None
    return allocation.ends_at - (time.time() if now is None else now)
