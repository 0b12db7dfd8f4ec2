"""Launch time through the EugoHPC Manager against a bare `ray start --head`, and status latency.

Runs a real Jupyter server with the extension, then, alternating to share the machine's noise:

* bare: ``ray start --head`` with the same resources and flags, timed until it returns;
* eugo: ``POST /eugo/clusters`` timed until ``GET /eugo/clusters/{id}`` says "running".

Then puts 10,000 finished tasks (``--tasks``) on a launched cluster, from a client that stays
connected as a notebook's kernel does, and times ``GET /eugo/clusters/{id}``: polled as a panel
does (spaced past the 2 s cache age, so each request starts a new read in the background) and
back to back (as several panels at once would); the counts' lag, from the last task's end until
the endpoint's finished count shows it (the endpoint polled all along): once after the first
run, then after each of ``--lag-runs`` short runs with the whole history in place; the head's
CPU (its GCS process) per second of those runs and of a minute in which a panel polls the idle
cluster; and, separately, what one monitoring read costs (it runs in a thread, never in a
request), with the task counts read the old way (the dashboard's task summary) and the new one
(the GCS's task-event query) in the same run.

    python benchmarks/bench_launch.py [--repeats 3] [--cpus 2] [--tasks 10000] [--lag-runs 5]

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

from eugo_jupyter import _processes as processes
from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import ray_start
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


# A driver that stays connected between runs, as a notebook's kernel does: its last task
# events reach the GCS with its next report, not when it exits. "run N" on stdin runs N tasks.
CLIENT = textwrap.dedent(
    """
    import sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")
    noop = ray.remote(num_cpus=1)(lambda: None)
    for line in sys.stdin:
        n = int(line.split()[1])
        for start in range(0, n, 1000):
            ray.get([noop.remote() for _ in range(min(1000, n - start))])
        print("done", time.time(), flush=True)
    """
)


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


class Client:
    """The driver process (:data:`CLIENT`) and the times its runs ended."""

    def __init__(self, address: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CLIENT, address],
            env={**os.environ, "RAY_AUTH_MODE": "token"},  # a plain Ray client needs telling
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.done: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout or ():
            if line.startswith("done"):
                self.done.append(float(line.split()[1]))

    def run(self, n: int) -> int:
        """Start a run of ``n`` tasks; returns how many runs ended before it."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"run {n}\n")
        self.process.stdin.flush()
        return len(self.done)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def _lag(server: ManagerClient, path: str, client: Client, n: int, total: int) -> tuple[float, int]:
    """Run ``n`` more tasks while polling GET as a panel would (every 0.25 s, then every 20 ms
    after the last task ended); seconds from the last task's end until the finished count (plus
    any records Ray dropped) shows all ``total`` tasks, and the GETs made meanwhile."""
    before = client.run(n)
    deadline, polls = time.monotonic() + 1800, 0
    while True:
        tasks = server.call("GET", path)["tasks"]  # type: ignore[index]
        seen = time.time()
        ended = len(client.done) > before
        polls += 1 if ended else 0
        if ended and tasks["finished"] + tasks.get("dropped", 0) >= total:  # type: ignore[index,union-attr]
            break
        if time.monotonic() > deadline or client.process.poll() is not None:
            raise RuntimeError("the task counts never reached the number submitted")
        time.sleep(0.02 if ended else 0.25)
    return seen - client.done[before], polls


def _gcs_pid(address: str) -> int:
    """The GCS process of the cluster at ``address`` (on this machine): the head's busiest."""
    port = address.rpartition(":")[2]
    for pid in processes.pids():
        line = processes.cmdline(pid)
        if "gcs_server" in line and f"--gcs_server_port={port}" in line:
            return pid
    raise RuntimeError(f"no GCS process for {address}")


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--lag-runs", type=int, default=5, help="short runs after the first")
    parser.add_argument("--lag-tasks", type=int, default=200, help="tasks in each short run")
    parser.add_argument("--idle-s", type=float, default=60.0, help="idle polling measured")
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
        gcs = _gcs_pid(model["address"])
        client = Client(model["address"])
        lags, lag_polls = [], 0
        lag, polls = _lag(server, path, client, args.tasks, args.tasks)
        lags.append(lag)
        print(f"counts' lag after the first run {lag:.2f} s", flush=True)
        total, started, cpu0 = args.tasks, time.monotonic(), _cpu_s(gcs)
        for _ in range(args.lag_runs):
            total += args.lag_tasks
            lag, polls = _lag(server, path, client, args.lag_tasks, total)
            lags.append(lag)
            lag_polls += polls
            print(f"counts' lag {lag:.2f} s", flush=True)
        busy_s, busy_cpu_s = time.monotonic() - started, _cpu_s(gcs) - cpu0
        busy_cpu = busy_cpu_s / busy_s
        per_run = busy_cpu_s / max(1, args.lag_runs)
        started, cpu0 = time.monotonic(), _cpu_s(gcs)
        while time.monotonic() - started < args.idle_s:  # a panel polls an idle cluster
            server.call("GET", path)
            time.sleep(1.5)
        idle_cpu = (_cpu_s(gcs) - cpu0) / (time.monotonic() - started)
        print(
            f"head's GCS CPU: {busy_cpu:.3f} s/s during the runs, {idle_cpu:.3f} idle", flush=True
        )
        client.close()
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
            old_counts = monitor._by_group(monitor._summarized(model["dashboard_url"], 60))
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
        (f"counts' lag: last task's end until GET shows it, after the first run of {args.tasks}",
         f"{lags[0]:.2f} s", "", ""),
        (f"counts' lag with {finished} finished, runs of {args.lag_tasks} (median, max of "
         f"{len(lags) - 1}; {lag_polls} GETs meanwhile)",
         f"{statistics.median(lags[1:]):.2f} s, max {max(lags[1:]):.2f} s" if lags[1:] else "",
         "", ""),
        ("head's GCS CPU per second: during those runs (polled), while a panel polls it idle",
         f"{busy_cpu:.3f}, idle {idle_cpu:.3f}", "", ""),
        (f"head's GCS CPU per run of {args.lag_tasks}, until GET showed it",
         f"{per_run:.2f} s", "", ""),
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
                "lags_s": lags,
                "gcs_cpu_busy": busy_cpu,
                "gcs_cpu_per_run": per_run,
                "gcs_cpu_idle": idle_cpu,
                "finished": finished,
                "load": Path("/proc/loadavg").read_text().split()[:3],
            }
        )
    )


if __name__ == "__main__":
    main()
