"""The batch schedulers' job script: one text for the head job, one for every worker job.

A scheduler adds only its directive lines on top (``#SBATCH ...``, ``#$ ...``, ``#PBS ...``);
the rest is shared: a 0700 folder of the job's on its node for Ray's sockets and logs, free
ports picked on the node, ``ray start --block`` (the arguments from the same builder the local
and ssh backends use, :func:`.ray_start.head_arguments`), and the head's address published in
the cluster's folder by write and rename (the lifecycle around it is :mod:`.batch`).

>>> text = job_script(["#SBATCH --nodes=1"], "SLURM", [], "/tmp/eugo-$SLURM_JOB_ID", "worker",
...                   1, 0, "python", "ray")
>>> text.splitlines()[:3]
['#!/bin/bash', '#SBATCH --nodes=1', '# EugoHPC Manager: a Ray worker node, a SLURM job.']
"""

from __future__ import annotations

import shlex

from .ray_start import (
    HEAD_PORTS,
    NODE_PORTS,
    NodeSpec,
    head_arguments,
    node_arguments,
    node_settings,
)

__all__ = ["job_script", "ray_start_line"]

_PICK = (
    "import socket, sys, ray.util\n"
    "ip = ray.util.get_node_ip_address()\n"
    "socks = [socket.socket() for _ in range(int(sys.argv[1]))]\n"
    "for s in socks: s.bind((ip, 0))\n"
    "print(ip, *(s.getsockname()[1] for s in socks))"
)

_PROLOGUE = """\
set -euo pipefail
# Token auth, no usage stats, no Prometheus exporter answering without a token on the node's
# network, and a node that stops at once when the job is cancelled (ray_start.node_settings).
export {settings}
unset RAY_ADDRESS
# Ray's sockets and logs on this node only, one folder per job; removed when the job ends.
# Ray makes its own folders 0777: they go inside a 0700 folder of ours, which other users of
# this (possibly shared) node cannot enter.
temp_dir="{temp_dir}"
ray_dir="$temp_dir/r"
mkdir -m 700 -- "$temp_dir" 2>/dev/null || true
if [ -L "$temp_dir" ] || [ ! -d "$temp_dir" ] || [ ! -O "$temp_dir" ]; then
  echo "$temp_dir exists and is not a folder of this account; remove it and launch again" >&2
  exit 1
fi
chmod 700 -- "$temp_dir"
trap 'rm -rf "$temp_dir"' EXIT
# On a cancel or the wall time, let Ray stop its own processes before this script ends: an
# orphaned Ray would leave the job's process tree, where the scheduler can no longer find it.
ray_pid=""
trap '[ -n "$ray_pid" ] && kill -TERM "$ray_pid" 2>/dev/null; wait; exit 143' TERM
# This node's address and free ports, picked here: the node may be shared with other users.
pick='{pick}'
"""

_HEAD_BODY = """\
# A busy machine can make Ray's start time out (it waits 30 s for its own node): five tries.
for attempt in 1 2 3 4 5; do
  rm -f "$ray_dir/ray_current_cluster"
  read -r ip {head_ports} {node_ports} < <({python} -c "$pick" {count})
  # Workers may start as soon as the GCS listens (the rest of the head starts meanwhile, as
  # Ray's guide overlaps them with a fixed `sleep 10`): publish its address now.
  printf '%s:%s\\n' "$ip" "$gcs" > gcs.tmp
  mv gcs.tmp gcs
  # --block keeps Ray inside this job, so a cancel and the wall time end it.
  {ray_start} &
  ray_pid=$!
  # Ray writes ray_current_cluster once the head is up: then publish the address.
  until [ -s "$ray_dir/ray_current_cluster" ] || ! kill -0 "$ray_pid" 2>/dev/null; do
    sleep 1
  done
  if kill -0 "$ray_pid" 2>/dev/null; then
    printf '%s:%s http://%s:%s\\n' "$ip" "$gcs" "$ip" "$dashboard" > head.tmp
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
  read -r ip {node_ports} < <({python} -c "$pick" {count})
  {ray_start} &
  ray_pid=$!
  # A head that had to try again publishes new ports; this node's Ray would keep retrying the
  # old ones for many minutes: follow the head instead.
  while kill -0 "$ray_pid" 2>/dev/null; do
    read -r now 2>/dev/null < gcs || now="$address"
    if [ "$now" != "$address" ]; then
      echo "the head moved to $now; starting again" >&2
      kill -TERM "$ray_pid" 2>/dev/null || true
      # A ray start still connecting to the old head ignores SIGTERM until its own connect
      # timeout (30 s): give it 5 s, then end it and what it started.
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$ray_pid" 2>/dev/null || break; sleep 0.5; done
      pkill -KILL -P "$ray_pid" 2>/dev/null || true
      kill -KILL "$ray_pid" 2>/dev/null || true
      break
    fi
    sleep 1
  done
  status=0
  wait "$ray_pid" || status=$?
  echo "ray start ended (exit $status), try $attempt of 5" >&2
done
exit 1
"""


def _shell_port(name: str) -> str:
    return f'"${name}"'


def ray_start_line(role: str, cpus: int, gpus: int, ray: str) -> str:
    """The job's ``ray start --block`` line, its ports and address the job's shell variables.

    >>> ray_start_line("worker", 2, 0, "ray").splitlines()[0]
    'ray start --block --address="$address" \\\\'
    """
    spec = NodeSpec(num_cpus=cpus, num_gpus=gpus)
    if role == "head":
        args, _, _ = head_arguments(spec, '"$ip"', '"$temp_dir"', _shell_port, '"$ip"')
        first, args = f"{ray} start --head --block", args[1:]
    else:
        first = f'{ray} start --block --address="$address"'
        args = node_arguments(spec, '"$ip"', '"$temp_dir"', _shell_port)
    # The arguments are flags, numbers, JSON and quoted shell variables: nothing a user typed.
    # The JSON is quoted for the shell; the variables stay as they are, to be expanded.
    args = [arg if "$" in arg else shlex.quote(arg) for arg in args]
    return " \\\n    ".join([first, *args])


def job_script(
    directives: list[str], label: str, note: list[str], temp_dir: str, role: str,
    cpus: int, gpus: int, python: str, ray: str,
) -> str:  # fmt: skip
    """The exact script the scheduler gets for the head (``role="head"``) or a worker."""
    what = "the Ray head" if role == "head" else "a Ray worker node"
    header = ["#!/bin/bash", *directives, f"# EugoHPC Manager: {what}, a {label} job.", *note]
    settings = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(node_settings().items()))
    prologue = _PROLOGUE.format(pick=_PICK, settings=settings, temp_dir=temp_dir)
    line = ray_start_line(role, cpus, gpus, shlex.quote(ray))
    python, nodes = shlex.quote(python), " ".join(NODE_PORTS)
    if role == "head":
        body = _HEAD_BODY.format(python=python, ray_start=line, node_ports=nodes,
                                 head_ports=" ".join(HEAD_PORTS),
                                 count=len(HEAD_PORTS + NODE_PORTS))  # fmt: skip
    else:
        body = _WORKER_BODY.format(python=python, ray_start=line, node_ports=nodes,
                                   count=len(NODE_PORTS))  # fmt: skip
    return "\n".join(["\n".join(header), prologue, body])
