"""The figures of docs/guides/reliability.md: faults and hostile input against real processes.

One run, on this machine, prints one line per figure:

* results lost when Ray worker processes are SIGKILLed in the middle of 600 calls;
* bad REST inputs answered 400 with a sentence, and whether the server still answers after;
* requests that reached a foreign host after a connected cluster published it as its dashboard;
* Prometheus-style ports outside loopback that answer without the token, on a launched cluster;
* Ray processes left, and the seconds until none, after a Jupyter server is SIGKILLed;
* seconds until a kernel waiting in ``eugo.hpc.get`` gets ClusterError after its cluster is
  killed, and whether that kernel then runs a call on the embedded fallback.

    python benchmarks/bench_faults.py
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from eugo_jupyter import _processes as processes
from eugo_jupyter._tempdirs import expected_dir
from eugo_jupyter.exceptions import ClusterError
from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends import local, ray_start
from eugo_jupyter.server.client import ManagerClient

# The benchmarks share the tests' helper that runs a `jupyter server` process.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fixtures.jupyter import jupyter_server

LIMIT = 300.0

KERNEL = r"""
import sys, time
import eugo_jupyter as eugo
from eugo_jupyter.exceptions import ClusterError
eugo.hpc.init(address=sys.argv[1])

@eugo.hpc.distribute
def forever(path):
    open(path, "w").close()
    time.sleep(10_000)

@eugo.hpc.distribute
def double(x):
    return 2 * x

future = forever(sys.argv[2])
try:
    eugo.hpc.get(future)
except ClusterError as exc:
    print("ERROR", time.time(), flush=True)
print("FALLBACK", eugo.hpc.get(double(21)), flush=True)
"""

HOSTILE: list[Any] = [
    "[" * 100_000,
    "[" * 20_000 + "]" * 20_000,
    " " * 70_000,
    b"\xff\xfe{}",
    "{kind: local",
    {"kind": "local", "name": "abc\n"},
    {"kind": "local", "head": {"memory": 1e30}},
    {"kind": "local", "head": {"object_store_memory": 1}},
    {"kind": "local", "head": {"num_cpus": float("nan")}},
    {"kind": "connect", "address": "10.0.0.5:6379\n"},
    {"kind": "connect", "address": "127.0.0.1:1"},
    {"kind": "connect", "address": "ray://127.0.0.1:{junk}"},
]


def post_raw(server: ManagerClient, data: bytes) -> tuple[int, str]:
    """POST bytes the product client would never send; (status, the server's sentence)."""
    request = urllib.request.Request(
        f"{server.url}/eugo/clusters",
        method="POST",
        data=data,
        headers={"Authorization": f"token {server.token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=server.timeout) as response:
            return response.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}").get("message", "")


def lost_results(cluster: local.Launched) -> tuple[int, int]:
    """Submit 600 short calls, SIGKILL two Ray worker processes meanwhile; (lost, killed)."""
    import eugo_jupyter as eugo

    eugo.hpc.init(address=cluster.gcs_address)

    @eugo.hpc.distribute
    def square(x: int) -> int:
        time.sleep(0.02)
        return x * x

    futures = [square(i) for i in range(600)]
    killed = 0
    deadline = time.monotonic() + LIMIT
    while killed < 2 and time.monotonic() < deadline:
        workers = [
            pid
            for pid, _ in processes.cluster_processes(cluster.pgids, cluster.temp_dir)
            if "ray::square" in processes.cmdline(pid) or "ray::IDLE" in processes.cmdline(pid)
        ]
        if workers:
            os.kill(workers[0], signal.SIGKILL)
            killed += 1
        time.sleep(0.3)
    values = eugo.hpc.get(futures)
    eugo.hpc.shutdown()
    return sum(v != i * i for i, v in enumerate(values)), killed


def hostile(server: ManagerClient, junk_port: int) -> tuple[int, int, bool]:
    """(answered 400, total, server answers afterwards)."""
    clear = 0
    for body in HOSTILE:
        if isinstance(body, dict) and "{junk}" in str(body.get("address")):
            body = {**body, "address": body["address"].format(junk=junk_port)}
        raw = body.encode() if isinstance(body, str) else body if isinstance(body, bytes) else None
        code, message = post_raw(server, raw if raw is not None else json.dumps(body).encode())
        clear += code == 400 and len(message) > 20
    return clear, len(HOSTILE), server.clusters() is not None


def token_astray(server: ManagerClient, cluster: local.Launched) -> int:
    """Requests a foreign listener got after the cluster published it as its dashboard."""
    seen: list[str] = []

    class Trap(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    trap = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Trap)
    threading.Thread(target=trap.serve_forever, daemon=True).start()
    from ray._raylet import GcsClient

    monitor.auth_headers()
    gcs = GcsClient(address=cluster.gcs_address)
    published = gcs.internal_kv_get(b"dashboard", b"dashboard")
    foreign = f"127.0.0.2:{trap.server_address[1]}".encode()
    gcs.internal_kv_put(b"dashboard", foreign, True, b"dashboard")
    try:
        body = {"kind": "connect", "address": cluster.gcs_address}
        model = server.launch(body)
        proxy = f"{server.url}/eugo/clusters/{model['id']}/dashboard/api/version"
        for _ in range(3):
            server.cluster(model["id"])
            try:
                urllib.request.urlopen(
                    urllib.request.Request(
                        proxy,
                        headers={"Authorization": f"token {server.token}"},
                    ),
                    timeout=60,
                ).read()
            except urllib.error.HTTPError:
                pass
            time.sleep(1)
        server.shutdown(model["id"])
    finally:
        gcs.internal_kv_put(b"dashboard", published or b"", True, b"dashboard")
        trap.shutdown()
    return len(seen)


def open_ports(cluster: local.Launched) -> tuple[int, int]:
    """(ports outside loopback answering HTTP without a token, ports outside loopback)."""
    pids = {pid for pid, _ in processes.cluster_processes(cluster.pgids, cluster.temp_dir)}
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    ports = set()
    for line in out.splitlines():
        if any(f"pid={pid}," in line for pid in pids):
            host, _, port = line.split()[3].rpartition(":")
            if not host.strip("[]").startswith(("127.", "::ffff:127.")):
                ports.add(int(port))
    answering = 0
    for port in ports:
        for path in ("/metrics", "/"):
            try:
                with urllib.request.urlopen(
                    f"http://{ray_start.node_ip()}:{port}{path}", timeout=5
                ):
                    answering += 1
                    break
            except (OSError, ValueError, http.client.HTTPException):
                continue
    return answering, len(ports)


def crash(
    server: ManagerClient, process: subprocess.Popen[bytes], runtime: Path
) -> tuple[int, float]:
    """(Ray processes of its "server" cluster before the SIGKILL, seconds until none)."""
    body = {"kind": "local", "name": "crash", "workers": [{}]}
    for attempt in range(3):  # a launch can fail on a loaded machine (Ray's 30 s start window)
        cluster_id = server.launch(body)["id"]
        try:
            server.wait_until_running(cluster_id, timeout=LIMIT)
            break
        except ClusterError:
            server.shutdown(cluster_id)
            if attempt == 2:
                raise
    record = json.loads((runtime / "eugo" / "clusters" / f"{cluster_id}.json").read_text())
    before = len(processes.cluster_processes(record["pgids"], record["temp_dir"]))
    process.send_signal(signal.SIGKILL)
    began = time.monotonic()
    process.wait()
    while processes.cluster_processes(record["pgids"], record["temp_dir"]):
        if time.monotonic() - began > LIMIT:
            return before, float("inf")
        time.sleep(0.1)
    return before, time.monotonic() - began


def kernel_gone(cluster: local.Launched) -> tuple[float, bool]:
    """(seconds from the cluster's death to ClusterError in the kernel, fallback ran)."""
    marker = Path(tempfile.mkdtemp()) / "running"
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, cluster.gcs_address, str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + LIMIT
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid, _ in processes.cluster_processes(cluster.pgids, cluster.temp_dir):
        os.kill(pid, signal.SIGKILL)
    killed = time.time()
    out, _ = kernel.communicate(timeout=LIMIT)
    error = [line for line in out.splitlines() if line.startswith("ERROR")]
    seconds = float(error[0].split()[1]) - killed if error else float("inf")
    return seconds, "FALLBACK 42" in out


def main() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    runtime = Path(tempfile.mkdtemp(prefix="eugo-bench-runtime-"))
    cluster = local.launch(
        ray_start.NodeSpec(num_cpus=2), [ray_start.NodeSpec(num_cpus=1)],
        expected_dir(f"c-b{secrets.token_hex(4)}"),
    )  # fmt: skip
    try:
        with jupyter_server(runtime, deadline_s=LIMIT) as (server, process):
            lost, killed = lost_results(cluster)
            print(f"results lost with {killed} worker processes SIGKILLed during 600 calls: {lost}")
            with socket.socket() as junk:
                junk.bind(("127.0.0.1", 0))
                junk.listen()
                clear, total, alive = hostile(server, junk.getsockname()[1])
            print(
                f"bad REST inputs answered 400 with a sentence: {clear} of {total}; "
                f"server answers after: {alive}"
            )
            print(
                f"requests reaching a host the cluster published as its dashboard: "
                f"{token_astray(server, cluster)}"
            )
            answering, outside = open_ports(cluster)
            print(f"ports outside loopback answering without the token: {answering} of {outside}")
            before, seconds = crash(server, process, runtime)
            print(
                f"Ray processes of a 2-node 'server' cluster: {before}; "
                f"seconds after the server's SIGKILL until none is left: {seconds:.1f}"
            )
        seconds, fell_back = kernel_gone(cluster)
        print(
            f"seconds from the cluster's SIGKILL to ClusterError in the kernel: {seconds:.1f}; "
            f"the kernel then ran a call on the embedded Ray: {fell_back}"
        )
    finally:
        processes.stop(cluster.pgids, cluster.temp_dir)
        for path in (runtime / "eugo" / "clusters").glob("*.json"):
            record = json.loads(path.read_text())
            if record.get("temp_dir"):
                processes.stop(record.get("pgids", []), record["temp_dir"])


if __name__ == "__main__":
    main()
