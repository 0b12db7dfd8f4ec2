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
import json
import os
import statistics
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
from tests.fixtures.jupyter import jupyter_server
from tests.fixtures.slurm import Slurm, slurm_cluster

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


def eugo_start(client: object, folder: Path) -> float:
    body = {"kind": "slurm", "name": "bench", "slurm": {"nodes": 2, "walltime": "00:20:00"}}
    start = time.perf_counter()
    model = client.launch(body)  # type: ignore[attr-defined]
    while model["status"] == "starting":
        time.sleep(0.05)
        model = client.cluster(model["id"])  # type: ignore[attr-defined]
    elapsed = time.perf_counter() - start
    if model["status"] != "running":
        raise RuntimeError(model["error"])
    client.shutdown(model["id"])  # type: ignore[attr-defined]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="eugo-bench-slurm-"))
    guide: list[float] = []
    eugo: list[float] = []
    failed = 0
    with slurm_cluster(root / "slurm") as slurm:
        shared = root / "shared"
        server_args = (f"--EugoManagerExtension.slurm_shared_dir={shared}",)
        env = {"SLURM_CONF": str(slurm.conf)}
        (root / "runtime").mkdir()
        with jupyter_server(root / "runtime", server_args, env) as (client, _):
            for _ in range(args.repeats):
                took = guide_start(slurm, root)
                eugo.append(eugo_start(client, root))
                if took is None:
                    failed += 1
                else:
                    guide.append(took)
                print(f"guide {took or float('nan'):.1f} s, eugo {eugo[-1]:.1f} s", flush=True)

    g, e = statistics.median(guide), statistics.median(eugo)
    print("\n| measure | eugo manager | Ray's SLURM guide | ratio |\n| --- | --- | --- | --- |")
    print(f"| launch to running, 2 nodes (median of {args.repeats}) | {e:.1f} s | {g:.1f} s "
          f"| {e / g:.2f} |")  # fmt: skip
    print(f"| best of {args.repeats} | {min(eugo):.1f} s | {min(guide):.1f} s "
          f"| {min(eugo) / min(guide):.2f} |")  # fmt: skip
    if failed:
        print(f"\nThe guide's script never had two nodes in {failed} of {args.repeats} runs.")
    results = Path(__file__).with_name("results")
    results.mkdir(exist_ok=True)
    (results / "bench_slurm.json").write_text(
        json.dumps({"guide_s": guide, "eugo_s": eugo, "guide_failed": failed})
    )
    os.environ.pop("SLURM_CONF", None)


if __name__ == "__main__":
    main()
