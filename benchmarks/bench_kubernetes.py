"""What the `kubernetes` backend costs where it can be measured without a Kubernetes cluster.

No Kubernetes API server can run on this project's machines, so no launch time on a real
Kubernetes is measured here. What is measured, each as a ratio in the same run:

* validate + preview of a kubernetes body (the RayCluster manifest as YAML) against validate +
  plan of a ``connect`` body, the cheapest launch body there is (microseconds per call);
* the server's port-forward (the official client's ``portforward`` over a websocket of the mock
  API server of ``tests/fixtures/kube_api.py``, to a real local Ray head): a monitoring read
  (``monitor.read`` without task counts, what the panel does every 0.5 s) through it against the
  same read straight to the GCS, and a Ray client's connect-and-one-task through the forwarded
  client port against the same straight to the head's client port.

    python benchmarks/bench_kubernetes.py [--reads 30] [--tasks 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends.connect import ConnectBackend
from eugo_jupyter.server.backends.kuberay import KubernetesBackend
from tests.fixtures.kube_api import kube_api, ray_head_behind

TASK = (
    "import sys, ray; ray.init(sys.argv[1], logging_level='ERROR'); "
    "ray.get(ray.remote(lambda: 1).remote())"
)


def _per_call(fn: object, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()  # type: ignore[operator]
    return (time.perf_counter() - start) / n


def _preview(n: int) -> tuple[float, float]:
    kube, connect = KubernetesBackend(), ConnectBackend()
    body = {
        "kind": "kubernetes",
        "name": "dev",
        "kubernetes": {
            "worker_groups": [{"replicas": 2, "gpus": 1}, {"name": "cpu", "replicas": 4}]
        },
    }
    plain = {"kind": "connect", "address": "10.0.0.5:6379"}
    k = _per_call(lambda: kube.plan(kube.validate(body)), n)
    c = _per_call(lambda: connect.plan(connect.validate(plain)), n)
    return k, c


def _client_run(address: str) -> float:
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", TASK, address], env=env, check=True, timeout=300)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=3)
    args = parser.parse_args()

    k, c = _preview(300)
    print(f"validate+preview: kubernetes {k * 1e6:.0f} us, connect {c * 1e6:.1f} us ({k / c:.0f}x)")

    with kube_api(Path(tempfile.mkdtemp())) as kube, ray_head_behind(kube) as head:
        os.environ["KUBECONFIG"] = str(kube.kubeconfig)
        os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        backend = KubernetesBackend()
        spec = backend.validate(
            {"kind": "kubernetes", "name": "bench", "kubernetes": {"worker_groups": []}}
        )
        record = {"id": "c-bench"}
        record.update(backend.start(spec, record, 60.0))
        deadline = time.monotonic() + 60
        observed = backend.state(record)
        while not observed.address and time.monotonic() < deadline:
            time.sleep(0.05)
            observed = backend.state(record)
        assert observed.address, "the head pod never became ready"
        direct, forwarded = f"127.0.0.1:{head['gcs']}", observed.address
        monitor.read(direct, None, 10.0, counts=False)  # warm both paths once
        monitor.read(forwarded, None, 10.0, counts=False)
        reads: dict[str, list[float]] = {"direct": [], "forwarded": []}
        for _ in range(args.reads):  # alternating, to share the machine's noise
            for label, address in (("direct", direct), ("forwarded", forwarded)):
                start = time.perf_counter()
                monitor.read(address, None, 10.0, counts=False)
                reads[label].append(time.perf_counter() - start)
        d, f = (statistics.median(reads[x]) for x in ("direct", "forwarded"))
        print(
            f"monitoring read: direct {d * 1e3:.1f} ms, through the port-forward "
            f"{f * 1e3:.1f} ms ({f / d:.2f})"
        )
        runs: dict[str, list[float]] = {"direct": [], "forwarded": []}
        for _ in range(args.tasks):
            runs["direct"].append(_client_run(f"ray://127.0.0.1:{head['client']}"))
            runs["forwarded"].append(_client_run(str(observed.detail["client_address"])))
        d, f = (statistics.median(runs[x]) for x in ("direct", "forwarded"))
        print(
            f"ray:// connect + one task: direct {d:.2f} s, through the port-forward "
            f"{f:.2f} s ({f / d:.2f})"
        )
        left = backend.stop(record)
        assert left == [], left
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
