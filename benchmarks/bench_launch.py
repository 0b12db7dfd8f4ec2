"""Launch time through the EugoHPC Manager against a bare `ray start --head`, and status latency.

Runs a real Jupyter server with the extension, then, alternating to share the machine's noise:

* bare: ``ray start --head`` with the same resources and flags, timed until it returns;
* eugo: ``POST /eugo/clusters`` timed until ``GET /eugo/clusters/{id}`` says "running".

Then puts 10,000 finished tasks (``--tasks``) on a launched cluster and times
``GET /eugo/clusters/{id}``: polled as a panel does (spaced past the 2 s cache age, so each
request starts a new read in the background) and back to back (as several panels at once
would); the counts' lag (from the last task's end until the endpoint's finished count shows
it, the endpoint polled all along); and, separately, what one monitoring read costs (it runs in
a thread, never in a request), with the task counts read the old way (the dashboard's task
summary) and the new one (the GCS's task-event query) in the same run.

    python benchmarks/bench_launch.py [--repeats 3] [--cpus 2] [--tasks 10000]

``--repeats 0`` skips the launch timings (for a run at ``--tasks 100000``).
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
import threading
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
    import sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")
    noop = ray.remote(num_cpus=1)(lambda: None)
    n = int(sys.argv[2])
    for start in range(0, n, 1000):
        ray.get([noop.remote() for _ in range(min(1000, n - start))])
    print("done", time.time(), flush=True)
    """
)


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


def _submit_and_lag(server: ManagerClient, path: str, address: str, n: int) -> tuple[float, int]:
    """Run ``n`` tasks from a client while polling GET as a panel would (every 0.25 s, then
    every 20 ms after the last task ended); seconds from the last task's end until the finished
    count (plus any records Ray dropped) shows all ``n``, and the GETs made meanwhile."""
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, address, str(n)],
        env={**os.environ, "RAY_AUTH_MODE": "token"},  # a plain Ray client needs telling
        stdout=subprocess.PIPE,
        text=True,
    )
    done: list[float] = []
    reader = threading.Thread(
        target=lambda: done.extend(
            float(line.split()[1]) for line in client.stdout or () if line.startswith("done")
        ),
        daemon=True,
    )
    reader.start()
    deadline, polls = time.monotonic() + 1800, 0
    while True:
        tasks = server.call("GET", path)["tasks"]  # type: ignore[index]
        seen = time.time()
        polls += 1 if done else 0
        if done and tasks["finished"] + tasks.get("dropped", 0) >= n:  # type: ignore[index,union-attr]
            break
        if time.monotonic() > deadline or (client.poll() not in (None, 0)):
            raise RuntimeError("the task counts never reached the number submitted")
        time.sleep(0.02 if done else 0.25)
    client.wait()
    return seen - done[0], polls


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
        path = f"/eugo/clusters/{model['id']}"
        lag, lag_polls = _submit_and_lag(server, path, model["address"], args.tasks)
        print(f"counts' lag {lag:.2f} s", flush=True)
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
        tasks = server.call("GET", path)["tasks"]  # type: ignore[index]
        finished = tasks["finished"] + tasks.get("dropped", 0)  # type: ignore[union-attr]
        reads, old, new = [], [], []  # what a refresh costs, off the event loop
        old_counts = new_counts = None
        for _ in range(args.fresh_samples):
            start = time.perf_counter()
            monitor.read(model["address"], model["dashboard_url"])
            reads.append(time.perf_counter() - start)
            start = time.perf_counter()  # the task counts alone, the old way (before this bench)
            old_counts = monitor._by_group(monitor._summarized(model["dashboard_url"], 5))
            old.append(time.perf_counter() - start)
            start = time.perf_counter()  # ... and the new way
            new_counts = monitor._task_counts(model["address"], model["dashboard_url"], 5)
            new.append(time.perf_counter() - start)
        print(f"counts, old way {old_counts}, new way {new_counts}", flush=True)
        server.call("DELETE", path)
    shutil.rmtree(runtime, ignore_errors=True)

    rows = []
    if args.repeats:
        b, e = statistics.median(bare), statistics.median(eugo)
        rows += [
            (
                f"launch to running, head with {args.cpus} CPUs (median of {args.repeats})",
                f"{e:.2f} s",
                f"{b:.2f} s",
                f"{e / b:.2f}",
            ),
            (
                f"launch to running, best of {args.repeats} (least disturbed by other load)",
                f"{min(eugo):.2f} s",
                f"{min(bare):.2f} s",
                f"{min(eugo) / min(bare):.2f}",
            ),
        ]
    ms = lambda xs: f"{statistics.median(xs) * 1000:.1f} ms, p95 {_p95(xs) * 1000:.1f} ms"  # noqa: E731
    rows += [
        (f"GET cluster, {finished} finished tasks, polled every 2.1 s (median of {len(fresh)})",
         ms(fresh), "", ""),
        (f"GET cluster, {finished} finished tasks, back to back (median of {len(cached)})",
         ms(cached), "", ""),
        (f"counts' lag: last task's end until GET shows it ({lag_polls} GETs meanwhile)",
         f"{lag:.2f} s", "", ""),
        (f"one monitoring read in the background, {finished} finished tasks "
         f"(median of {len(reads)})",
         f"{statistics.median(reads) * 1000:.0f} ms", "", ""),
        ("task counts alone, new way (GCS task-event query) vs old (dashboard's task summary)",
         f"{statistics.median(new) * 1000:.0f} ms", f"old {statistics.median(old) * 1000:.0f} ms",
         f"{statistics.median(new) / statistics.median(old):.2f}"),
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
                "old_counts_s": old,
                "new_counts_s": new,
                "old_counts": old_counts,
                "new_counts": new_counts,
                "lag_s": lag,
                "finished": finished,
            }
        )
    )


if __name__ == "__main__":
    main()
