"""What the slurm backend submits: the checked spec and the exact job scripts.

One script for the head job, one for each worker job (see :mod:`.slurm` for why). Every value in
them was checked by :meth:`.slurm.SlurmBackend.validate`; paths are shell-quoted.

>>> spec = SlurmSpec(None, None, "00:30:00", 2, 4, 0, None, ())
>>> job_script(spec, "head", "/venv/bin/python", "/venv/bin/ray").splitlines()[1:4]
['#SBATCH --nodes=1', '#SBATCH --ntasks=1', '#SBATCH --cpus-per-task=4']
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ..exporters import closed_exporters

__all__ = ["SlurmSpec", "job_script", "walltime_seconds"]


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


_PICK = (
    "import socket, sys, ray.util\n"
    "ip = ray.util.get_node_ip_address()\n"
    "socks = [socket.socket() for _ in range(int(sys.argv[1]))]\n"
    "for s in socks: s.bind((ip, 0))\n"
    "print(ip, *(s.getsockname()[1] for s in socks))"
)

_PROLOGUE = """\
set -euo pipefail
export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0
# No Prometheus exporter answering without a token on the node's network.
export {exporters}
unset RAY_ADDRESS
# Ray's sockets and logs on this node only, one folder per job; removed when the job ends.
# Ray makes its own folders 0777: they go inside a 0700 folder of ours, which other users of
# this (possibly shared) node cannot enter.
temp_dir="/tmp/eugo-$SLURM_JOB_ID"
ray_dir="$temp_dir/r"
mkdir -m 700 -- "$temp_dir" 2>/dev/null || true
if [ -L "$temp_dir" ] || [ ! -d "$temp_dir" ] || [ ! -O "$temp_dir" ]; then
  echo "$temp_dir exists and is not a folder of this account; remove it and launch again" >&2
  exit 1
fi
chmod 700 -- "$temp_dir"
trap 'rm -rf "$temp_dir"' EXIT
# On scancel or the wall time, let Ray stop its own processes before this script ends: an
# orphaned Ray would leave the job's process tree, where SLURM can no longer find it.
ray_pid=""
trap '[ -n "$ray_pid" ] && kill -TERM "$ray_pid" 2>/dev/null; wait; exit 143' TERM
# This node's address and free ports, picked here: the node may be shared with other users.
pick='{pick}'
"""

_NODE_ARGS = """\
    --node-manager-port="$nm" --object-manager-port="$om" \\
    --dashboard-agent-listen-port="$agent_http" --dashboard-agent-grpc-port="$agent_grpc" \\
    --runtime-env-agent-port="$runtime_env" --metrics-export-port="$metrics" \\
    --num-cpus={cpus} --num-gpus={gpus} --temp-dir="$ray_dir" \\
    --disable-usage-stats --log-style=record --log-color=false &
  ray_pid=$!
"""

_HEAD_BODY = """\
# A busy machine can make Ray's start time out (it waits 30 s for its own node): five tries.
for attempt in 1 2 3 4 5; do
  rm -f "$ray_dir/ray_current_cluster"
  read -r ip port dashboard client nm om agent_http agent_grpc runtime_env metrics \\
    < <({python} -c "$pick" 9)
  # Workers may start as soon as the GCS listens (the rest of the head starts meanwhile, as
  # Ray's guide overlaps them with a fixed `sleep 10`): publish its address now.
  printf '%s:%s\\n' "$ip" "$port" > gcs.tmp
  mv gcs.tmp gcs
  # --block keeps Ray inside this job, so scancel and the wall time end it.
  {ray} start --head --block --node-ip-address="$ip" --port="$port" \\
    --dashboard-host="$ip" --dashboard-port="$dashboard" --include-dashboard=true \\
    --ray-client-server-port="$client" \\
{node_args}  # Ray writes ray_current_cluster once the head is up: then publish the address.
  until [ -s "$ray_dir/ray_current_cluster" ] || ! kill -0 "$ray_pid" 2>/dev/null; do
    sleep 1
  done
  if kill -0 "$ray_pid" 2>/dev/null; then
    printf '%s:%s http://%s:%s\\n' "$ip" "$port" "$ip" "$dashboard" > head.tmp
    mv head.tmp head
    wait "$ray_pid"
    exit
  fi
  echo "ray start ended before the head was up, try $attempt of 5" >&2
done
exit 1
"""

_WORKER_BODY = """\
# A busy head can miss a node's registration (Ray waits 30 s for it): up to five tries.
for attempt in 1 2 3 4 5; do
  # The head job publishes its GCS address in this cluster's folder before the rest of the head
  # is up; start once that GCS accepts connections. Read again each time: a head that had to
  # try again has new ports.
  until read -r address 2>/dev/null < gcs \\
      && (exec 3<>"/dev/tcp/${{address%:*}}/${{address##*:}}") 2>/dev/null; do
    sleep 0.5
  done
  read -r ip nm om agent_http agent_grpc runtime_env metrics < <({python} -c "$pick" 6)
  {ray} start --block --address="$address" --node-ip-address="$ip" \\
{node_args}  status=0
  wait "$ray_pid" || status=$?
  echo "ray start ended (exit $status), try $attempt of 5" >&2
done
exit 1
"""


def _directives(spec: SlurmSpec) -> list[str]:
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


def _exporters() -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(closed_exporters().items()))


def job_script(spec: SlurmSpec, role: str, python: str, ray: str) -> str:
    """The exact script ``sbatch`` gets for the head (``role="head"``) or a worker."""
    python, ray = shlex.quote(python), shlex.quote(ray)
    what = "the Ray head" if role == "head" else "a Ray worker node"
    header = "\n".join(
        ["#!/bin/bash", *(f"#SBATCH {line}" for line in _directives(spec))]
        + [
            f"# EugoHPC Manager: {what}. sbatch runs it with --chdir set to the cluster's folder",
            "# on the shared file system, where the head job publishes its address.",
        ]
    )
    node_args = _NODE_ARGS.format(cpus=spec.cpus_per_node, gpus=spec.gpus_per_node)
    body = _HEAD_BODY if role == "head" else _WORKER_BODY
    return "\n".join(
        [
            header,
            _PROLOGUE.format(pick=_PICK, exporters=_exporters()),
            body.format(python=python, ray=ray, node_args=node_args),
        ]
    )
