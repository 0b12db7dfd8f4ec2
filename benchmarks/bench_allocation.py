"""Ray across a two-node SLURM job: ``eugo.hpc.launch("allocation")`` against the same ``srun ray
start`` lines by hand, inside the same job.

Starts a real SLURM on this machine (munged, slurmctld, two slurmd: see tests/fixtures/slurm.py)
and submits one ``--nodes=2 --cpus-per-task=2`` job whose script is this file's ``--in-job``
part: a plain Python process that, alternating to share the machine's noise, times

* by hand: ``ray start --head --block`` on this node, then ``srun --overlap --nodes=1 --ntasks=1
  -w OTHER ray start --address=HEAD --block`` for the other node (what the guides write), until
  both nodes are alive in Ray; then stops them;
* eugo: ``eugo.hpc.launch("allocation").wait()`` (no server: the backends in this process),
  until "running" (both nodes alive); then ``close()``.

Both use token authentication, the job's CPUs and a temp folder of their own.

    python benchmarks/bench_allocation.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _alive(address: str) -> int:
    from eugo_jupyter.server import monitor

    try:
        return sum(n["alive"] for n in monitor.read(address, None, 5.0)["nodes"])
    except Exception:  # noqa: BLE001 - not up yet
        return 0


def _hand_once(other: str, temp: str, began: float) -> float | None:
    """One try of the lines by hand; seconds from ``began`` until both nodes were alive, None if
    they did not come up (a head that dies on a busy machine is a try lost, as for a user)."""
    from eugo_jupyter import _processes as processes
    from eugo_jupyter._rayaddress import reachable
    from eugo_jupyter.server.backends import ray_start

    ip, port = ray_start.node_ip(), ray_start.free_port()
    ray, env = ray_start.ray_executable(), ray_start.environment()
    head = subprocess.Popen(
        [ray, "start", "--head", f"--port={port}", f"--node-ip-address={ip}", "--num-cpus=2",
         f"--temp-dir={temp}/h", "--block"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    started = [head]
    deadline = time.monotonic() + 300
    try:
        while not reachable(f"{ip}:{port}", 1.0):
            if head.poll() is not None or time.monotonic() > deadline:
                return None
            time.sleep(0.2)
        started.append(subprocess.Popen(
            ["srun", "--overlap", "--nodes=1", "--ntasks=1", "--cpus-per-task=2", "-w", other,
             ray, "start", f"--address={ip}:{port}", "--num-cpus=2", f"--temp-dir={temp}/w",
             "--block"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        ))  # fmt: skip
        while _alive(f"{ip}:{port}") < 2:
            if any(p.poll() is not None for p in started) or time.monotonic() > deadline:
                return None
            time.sleep(0.2)
        return time.perf_counter() - began
    finally:
        for proc in reversed(started):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
        processes.stop([], temp)


def _by_hand(other: str, index: int) -> float:
    temp = tempfile.mkdtemp(prefix=f"hand{index}-", dir="/tmp")
    began = time.perf_counter()
    for _ in range(3):  # bounded: a user would try again too
        took = _hand_once(other, temp, began)
        if took is not None:
            return took
    raise SystemExit("the lines by hand did not bring both nodes up in 3 tries")


def _eugo() -> float:
    import eugo_jupyter as eugo

    began = time.perf_counter()
    cluster = eugo.hpc.launch("allocation", name="bench").wait(timeout=600)
    took = time.perf_counter() - began
    cluster.close()
    return took


def in_job(out: str, repeats: int) -> None:
    from eugo_jupyter.server.backends.allocation_env import expand_hostlist

    names = expand_hostlist(os.environ["SLURM_JOB_NODELIST"])
    other = next(n for n in names if n != os.environ.get("SLURMD_NODENAME"))
    hand, ours = [], []
    for index in range(repeats):
        hand.append(_by_hand(other, index))
        ours.append(_eugo())
    Path(out).write_text(json.dumps({"hand": hand, "eugo": ours}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--in-job", default="")
    args = parser.parse_args()
    if args.in_job:
        in_job(args.in_job, args.repeats)
        return
    sys.path.insert(0, str(ROOT))
    from tests.fixtures.slurm import slurm_cluster

    with tempfile.TemporaryDirectory(prefix="bench-alloc-") as folder:
        with slurm_cluster(Path(folder) / "daemons") as slurm:
            out = Path(folder) / "result.json"
            batch = Path(folder) / "job.sbatch"
            batch.write_text(
                "#!/bin/bash\n#SBATCH --nodes=2 --ntasks-per-node=1 --cpus-per-task=2 "
                f"--time=00:30:00\n#SBATCH --output={folder}/job.out\n"
                f"exec {sys.executable} {Path(__file__).resolve()} --in-job {out} "
                f"--repeats {args.repeats}\n"
            )
            env = {**slurm.env, "PYTHONPATH": str(ROOT),
                   "JUPYTER_RUNTIME_DIR": f"{folder}/runtime"}  # fmt: skip
            env.pop("RAY_ADDRESS", None)
            subprocess.run(["sbatch", str(batch)], env=env, check=True, capture_output=True)
            deadline = time.monotonic() + 1800
            while not out.exists():
                if time.monotonic() > deadline:
                    sys.exit(f"no result; see {folder}/job.out")
                time.sleep(1)
            result = json.loads(out.read_text())
    hand, ours = statistics.median(result["hand"]), statistics.median(result["eugo"])
    load = os.getloadavg()[0]
    each = {k: ", ".join(f"{t:.2f}" for t in v) for k, v in result.items()}
    print(f"by hand (srun ray start): {hand:.2f} s  ({each['hand']})")
    print(f"eugo allocation:          {ours:.2f} s  ({each['eugo']})")
    print(f"ratio eugo / by hand: {ours / hand:.2f}  (load average {load:.1f})")


if __name__ == "__main__":
    main()
