"""Launch time through the EugoHPC Manager against a bare `ray start --head`, and status latency.

Runs a real Jupyter server with the extension, then, alternating to share the machine's noise:

* bare: ``ray start --head`` with the same resources and flags, timed until it returns;
* eugo: ``POST /eugo/clusters`` timed until ``GET /eugo/clusters/{id}`` says "running".

Then puts 10,000 finished tasks on a launched cluster and times ``GET /eugo/clusters/{id}``:
polled as a panel does (spaced past the 2 s cache age, so each request starts a new read in the
background) and back to back (as several panels at once would); and, separately, what one
monitoring read costs (GCS snapshot plus task summary; it runs in a thread, never in a request).

    python benchmarks/bench_launch.py [--repeats 3] [--cpus 2] [--tasks 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import processes, ray_start
from eugo_jupyter.server.client import ManagerClient

# The benchmarks share the tests' helper that runs a `jupyter server` process.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fixtures.jupyter import jupyter_server


def bare_start(cpus: int) -> float:
    """Seconds for a plain `ray start --head` with the same resources; stops it afterwards."""
    temp_dir = tempfile.mkdtemp(prefix="eugo-bare-", dir="/tmp")
    # The very command line the manager runs (free ports, dashboard on 127.0.0.1, token auth):
    # the ratio is then the manager's own cost (HTTP, record, waiting for the node to register).
    head, _, _ = ray_start.head_arguments(
        ray_start.NodeSpec(num_cpus=cpus), ray_start.node_ip(), temp_dir
    )
    args = [ray_start.ray_executable(), "start", *head]
    env = ray_start.environment()
    start = time.perf_counter()
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    output, _ = proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        processes.stop([proc.pid], temp_dir)  # a failed start can leave half its daemons
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise RuntimeError(output.decode()[-3000:])
    # `ray start` has exited; its daemons kept its process group, so we can stop exactly them.
    pgid = _pgid_of(temp_dir)
    assert processes.stop([pgid], temp_dir) == []
    return elapsed


def _pgid_of(temp_dir: str) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if temp_dir in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    return os.getpgid(int(entry.name))
            except (OSError, ProcessLookupError):
                continue
    raise RuntimeError("bare cluster processes not found")


def eugo_start(server: ManagerClient, cpus: int) -> tuple[float, dict]:
    body = {
        "kind": "local",
        "name": "bench",
        "head": {"num_cpus": cpus, "num_gpus": 0},
        "lifetime": "server",
    }
    start = time.perf_counter()
    model = server.call("POST", "/eugo/clusters", body)
    while model["status"] == "starting":  # type: ignore[index]
        time.sleep(0.05)
        model = server.call("GET", f"/eugo/clusters/{model['id']}")  # type: ignore[index]
    elapsed = time.perf_counter() - start
    if model["status"] != "running":  # type: ignore[index]
        raise RuntimeError(model["error"])  # type: ignore[index]
    return elapsed, model  # type: ignore[return-value]


CLIENT = textwrap.dedent(
    """
    import sys, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")
    noop = ray.remote(num_cpus=1)(lambda: None)
    n = int(sys.argv[2])
    for start in range(0, n, 1000):
        ray.get([noop.remote() for _ in range(min(1000, n - start))])
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--fresh-samples", type=int, default=15)
    parser.add_argument("--cached-samples", type=int, default=100)
    args = parser.parse_args()

    runtime = Path(tempfile.mkdtemp(prefix="eugo-bench-runtime-"))
    bare, eugo = [], []
    with jupyter_server(runtime) as (server, _):
        for _ in range(args.repeats):
            bare.append(bare_start(args.cpus))
            elapsed, model = eugo_start(server, args.cpus)
            eugo.append(elapsed)
            server.call("DELETE", f"/eugo/clusters/{model['id']}")

        print(
            f"launch samples: eugo {[round(x, 2) for x in eugo]}, "
            f"bare {[round(x, 2) for x in bare]}",
            flush=True,
        )
        _, model = eugo_start(server, args.cpus)
        subprocess.run(
            [sys.executable, "-c", CLIENT, model["address"], str(args.tasks)],
            env={**os.environ, "RAY_AUTH_MODE": "token"},  # a plain Ray client needs telling
            check=True,
        )
        path = f"/eugo/clusters/{model['id']}"
        deadline = time.monotonic() + 300
        while server.call("GET", path)["tasks"]["finished"] < args.tasks:  # type: ignore[index]
            if time.monotonic() > deadline:
                raise RuntimeError("the task counts never reached the number submitted")
            time.sleep(1)
        fresh, cached = [], []
        for _ in range(args.fresh_samples):
            time.sleep(2.1)  # as a panel polls: past the 2 s cache age, so each GET starts a read
            start = time.perf_counter()
            server.call("GET", path)
            fresh.append(time.perf_counter() - start)
        for _ in range(args.cached_samples):
            start = time.perf_counter()
            server.call("GET", path)
            cached.append(time.perf_counter() - start)
        finished = server.call("GET", path)["tasks"]["finished"]  # type: ignore[index]
        reads = []  # what a refresh costs, off the event loop: GCS snapshot plus task summary
        for _ in range(args.fresh_samples):
            start = time.perf_counter()
            monitor.read(model["address"], model["dashboard_url"])
            reads.append(time.perf_counter() - start)
        server.call("DELETE", path)
    shutil.rmtree(runtime, ignore_errors=True)

    b, e = statistics.median(bare), statistics.median(eugo)
    rows = [
        (f"launch to running, head with {args.cpus} CPUs (median of {args.repeats})",
         f"{e:.2f} s", f"{b:.2f} s", f"{e / b:.2f}"),
        (f"launch to running, best of {args.repeats} (least disturbed by other load)",
         f"{min(eugo):.2f} s", f"{min(bare):.2f} s", f"{min(eugo) / min(bare):.2f}"),
        (f"GET cluster, {finished} finished tasks, polled every 2.1 s (median of {len(fresh)})",
         f"{statistics.median(fresh) * 1000:.1f} ms", "", ""),
        (f"GET cluster, {finished} finished tasks, back to back (median of {len(cached)})",
         f"{statistics.median(cached) * 1000:.1f} ms", "", ""),
        (f"one monitoring read in the background, {finished} finished tasks "
         f"(median of {len(reads)})",
         f"{statistics.median(reads) * 1000:.0f} ms", "", ""),
    ]  # fmt: skip
    print("\n| measure | eugo manager | bare ray start | ratio |\n| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(
        f"\nlaunch samples: eugo {[round(x, 2) for x in eugo]}, bare {[round(x, 2) for x in bare]}"
    )
    results = Path(__file__).with_name("results")
    results.mkdir(exist_ok=True)
    (results / "bench_launch.json").write_text(
        json.dumps(
            {
                "bare_s": bare,
                "eugo_s": eugo,
                "fresh_s": fresh,
                "cached_s": cached,
                "read_s": reads,
                "finished": finished,
            }
        )
    )


if __name__ == "__main__":
    main()
