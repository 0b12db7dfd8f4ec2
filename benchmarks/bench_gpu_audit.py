"""What the GPU-use audit costs: the call path without an audit against raw Ray, and audited GPU
calls against the same calls unaudited. Ratios from one run; prints a small table.

    python benchmarks/bench_gpu_audit.py [--calls 1000]

The local Ray declares one GPU (bookkeeping only) so GPU requests schedule; no device is used.
"""

from __future__ import annotations

import argparse
import statistics
import time

import ray

import eugo_jupyter as eugo


def noop(x: int) -> int:
    return x


def timed(run, repeats: int = 5) -> float:  # type: ignore[no-untyped-def]
    run()  # warm: workers started, functions exported
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--gpu-calls", type=int, default=200)
    args = parser.parse_args()
    eugo.hpc.init(num_cpus=2, num_gpus=1)
    raw = ray.remote(noop)
    fn = eugo.hpc.distribute(noop)
    n, g = args.calls, args.gpu_calls

    raw_cpu = timed(lambda: ray.get([raw.remote(i) for i in range(n)]))
    eugo_cpu = timed(lambda: eugo.hpc.get([fn(i) for i in range(n)], progress=False))
    raw_gpu_fn = raw.options(num_gpus=0.01)
    raw_gpu = timed(lambda: ray.get([raw_gpu_fn.remote(i) for i in range(g)]))
    bound = fn.options(num_gpus=0.01)
    plain_gpu = timed(lambda: eugo.hpc.get([bound(i) for i in range(g)], progress=False))
    with eugo.gpu.audit():
        audited_gpu = timed(lambda: eugo.hpc.get([bound(i) for i in range(g)], progress=False))
    eugo.hpc.shutdown()

    rows = [
        (f"{n} no-op calls, no audit active", "raw Ray", raw_cpu, eugo_cpu),
        (f"{g} GPU calls (num_gpus=0.01), no audit", "raw Ray", raw_gpu, plain_gpu),
        (f"{g} GPU calls, audited vs not audited", "eugo, no audit", plain_gpu, audited_gpu),
    ]
    print(f"{'case':45} {'baseline':15} {'baseline s':>10} {'eugo s':>8} {'ratio':>6}")
    for case, base, t_base, t_eugo in rows:
        print(f"{case:45} {base:15} {t_base:10.3f} {t_eugo:8.3f} {t_eugo / t_base:6.2f}")


if __name__ == "__main__":
    main()
