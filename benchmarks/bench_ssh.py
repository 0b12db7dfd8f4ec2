"""Launch to running for a head plus two SSH hosts: the Manager against the same commands by hand.

Builds the test bed (two hosts in network namespaces with their own sshd; needs root), then,
alternating to share the machine's noise:

* by hand: the head's ``ray start --head`` here, then the two hosts' ``ray start`` over ssh (in
  parallel, as two terminals would), with the very argument lists the Manager's preview shows,
  timed until the GCS lists three alive nodes;
* eugo: ``ClusterManager.create({"kind": "ssh", ...})`` timed until its model says "running"
  (which it says once three nodes are alive).

Each cluster is stopped before the next run. Target: eugo / by hand <= 1.15.

    sudo python benchmarks/bench_ssh.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import ray_start, ssh
from eugo_jupyter.server.manager import ClusterManager
from tests.testbed import TestBed

RAY = str(Path(sys.executable).with_name("ray"))


def _body(bed: TestBed) -> dict[str, object]:
    return {
        "kind": "ssh",
        "ssh": {
            "hosts": [h.address for h in bed.hosts],
            "user": "root",
            "key_file": str(bed.key),
            "ray_path": RAY,
            "cpus_per_host": 1,
        },
        "head": {"num_cpus": 1},
    }


def _alive(address: str) -> int:
    try:
        return sum(n["alive"] for n in monitor.read(address, None, 5)["nodes"])
    except Exception:  # noqa: BLE001 - not up yet
        return 0


def by_hand(bed: TestBed, run: int) -> float:
    """The same commands, run the way a person would: head here, then ssh to each host."""
    backend = ssh.SshBackend()
    spec = backend.validate(_body(bed))
    fields: ssh.SshSpec = spec.fields
    cluster_id = f"c-hand{run:04d}"
    temp_dir = f"{tempfile.gettempdir()}/eugo-{cluster_id}"
    head_ip = ray_start.node_ip()
    args, port, _ = ray_start.head_arguments(fields.head, head_ip, temp_dir)
    start = time.perf_counter()
    pgid = ray_start.run_ray_start(args, 180)
    address = f"{head_ip}:{port}"
    record = {"id": cluster_id, "spec": spec.to_model(), "pgids": [pgid], "temp_dir": temp_dir}
    try:
        with ThreadPoolExecutor(max_workers=len(fields.hosts)) as pool:
            results = list(
                pool.map(
                    lambda pair: ssh._start_on(
                        fields, cluster_id, pair[1], pair[0],
                        ssh._worker_args(
                            fields, address, pair[1], ssh._temp_dir(cluster_id, pair[0])
                        ),
                        180,
                    ),
                    enumerate(fields.hosts),
                )
            )  # fmt: skip
        record["ssh_hosts"] = [r.to_record() for r in results]
        while _alive(address) < 3:
            time.sleep(0.25)
        return time.perf_counter() - start
    finally:
        backend.stop(record)


async def with_manager(bed: TestBed) -> float:
    manager = ClusterManager(find_clusters=False)
    start = time.perf_counter()
    model = await manager.create(_body(bed))
    await manager.wait_until_running(model["id"], timeout=600)
    took = time.perf_counter() - start
    await manager.delete(model["id"])
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["JUPYTER_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="eugo-bench-ssh-")
    hand, eugo = [], []
    with TestBed(2) as bed:
        for run in range(options.repeats):
            hand.append(by_hand(bed, run))
            eugo.append(asyncio.run(with_manager(bed)))
            print(f"run {run + 1}: by hand {hand[-1]:.2f} s, eugo {eugo[-1]:.2f} s", flush=True)
    ratio = statistics.median(eugo) / statistics.median(hand)
    print(
        f"launch to running, head + 2 ssh hosts: by hand {statistics.median(hand):.2f} s, "
        f"eugo {statistics.median(eugo):.2f} s (median of {options.repeats}); "
        f"ratio {ratio:.2f} (target <= 1.15)"
    )


if __name__ == "__main__":
    main()
