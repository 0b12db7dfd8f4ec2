"""Launch to "running" with two nodes on SLURM: the EugoHPC Manager against Ray's SLURM guide.

Starts a real SLURM on this machine (munged, slurmctld, two slurmd: see tests/fixtures/slurm.py)
and a `jupyter server` with the extension, then, alternating to share the machine's noise:

* guide: the job script of Ray's "Deploying on Slurm" guide (one ``--nodes=2`` job; ``srun ray
  start --head --block`` on the first node, ``sleep 10``, ``srun ray start --block`` on the
  other), submitted by hand with ``sbatch``, timed until both nodes are alive in Ray;
* eugo: ``POST /eugo/clusters`` with ``{"kind": "slurm", "slurm": {"nodes": 2}}``, timed until
  ``GET /eugo/clusters/{id}`` says "running" (both nodes alive).

Two changes to the guide, both needed on a machine shared with other Ray users: the port and
``--temp-dir`` are the job's own (the guide's fixed 6379 and /tmp/ray collide), and token
authentication is on, as the manager keeps it.

    python benchmarks/bench_slurm.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eugo_jupyter import _processes as processes
from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import ray_start

# The benchmarks share the tests' helpers: a real SLURM and a `jupyter server` process.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from batch_launch import alternate, eugo_start, report

from tests.fixtures.jupyter import jupyter_server
from tests.fixtures.slurm import Slurm, slurm_cluster

BODY = {"kind": "slurm", "name": "bench", "slurm": {"nodes": 2, "walltime": "00:20:00"}}

GUIDE = """\
#!/bin/bash
#SBATCH --job-name=ray-guide
#SBATCH --nodes=2
#SBATCH --tasks-per-node=1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:20:00
#SBATCH --output={folder}/guide-%j.log
set -x
export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
nodes_array=($nodes)
head_node=${{nodes_array[0]}}
head_node_ip={ip}
port={port}
ip_head=$head_node_ip:$port
echo "IP Head: $ip_head"
echo "Starting HEAD at $head_node"
srun --nodes=1 --ntasks=1 -w "$head_node" \\
    {ray} start --head --node-ip-address="$head_node_ip" --port=$port \\
    --num-cpus 1 --temp-dir=/tmp/guide-$SLURM_JOB_ID-head --block &
sleep 10
worker_num=$((SLURM_JOB_NUM_NODES - 1))
for ((i = 1; i <= worker_num; i++)); do
    node_i=${{nodes_array[$i]}}
    echo "Starting WORKER $i at $node_i"
    srun --nodes=1 --ntasks=1 -w "$node_i" \\
        {ray} start --address "$ip_head" --num-cpus 1 \\
        --temp-dir=/tmp/guide-$SLURM_JOB_ID-w$i --block &
    sleep 5
done
wait
"""


def _alive_nodes(address: str) -> int:
    try:
        return sum(n["alive"] for n in monitor.read(address, None, 5.0)["nodes"])
    except Exception:  # noqa: BLE001 - not up yet
        return 0


def _gone(mark: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while any(mark in processes.cmdline(pid) for pid in processes.table()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of {mark} are still running")
        time.sleep(0.5)


def guide_start(slurm: Slurm, folder: Path) -> float | None:
    """Seconds from sbatch of the guide's script to two alive nodes (None: not within 5 min);
    cancels the job after. On a busy machine the guide's fixed ``sleep 10`` can start the worker
    before the head answers, and that worker then never joins."""
    port = ray_start.free_port()
    ip = ray_start.node_ip()
    script = folder / "guide.sbatch"
    script.write_text(GUIDE.format(folder=folder, ip=ip, port=port, ray=ray_start.ray_executable()))
    start = time.perf_counter()
    job = subprocess.run(
        ["sbatch", "--parsable", str(script)], env=slurm.env, capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while _alive_nodes(f"{ip}:{port}") < 2:
            if time.monotonic() > deadline:
                print(f"the guide's job {job} had no two nodes after 5 min; see {folder}")
                return None
            time.sleep(0.05)
        return time.perf_counter() - start
    finally:
        subprocess.run(["scancel", job], env=slurm.env, check=True)
        _gone(f"/tmp/guide-{job}-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="eugo-bench-slurm-"))
    with slurm_cluster(root / "slurm") as slurm:
        shared = root / "shared"
        server_args = (f"--EugoManagerExtension.slurm_shared_dir={shared}",)
        env = {"SLURM_CONF": str(slurm.conf)}
        (root / "runtime").mkdir()
        with jupyter_server(root / "runtime", server_args, env) as (client, _):
            eugo, guide, failed = alternate(
                args.repeats, lambda _: guide_start(slurm, root),
                lambda: eugo_start(client, BODY), "guide",
            )  # fmt: skip

    report("bench_slurm", "Ray's SLURM guide", eugo, guide, failed)
    os.environ.pop("SLURM_CONF", None)


if __name__ == "__main__":
    main()
