"""What recording costs: a fan-out of 10,000 calls with and without ``eugo.hpc.profile()``.

One run, ratios in the same run, a printed table. Usage: python benchmarks/bench_profile.py

Each round submits 10,000 calls of a no-op task and gets them all at once, first unprofiled,
then inside a profile; the rounds alternate so a busy machine weighs on both alike, and the
medians are compared. Building the report (statistics and findings, no timeline) is timed apart.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from ray import cloudpickle

import eugo_jupyter as eugo

cloudpickle.register_pickle_by_value(sys.modules[__name__])

CALLS = 10_000
ROUNDS = 3


@eugo.hpc.distribute
def noop(x: int) -> int:
    return x


def fan_out() -> None:
    eugo.hpc.get([noop(i) for i in range(CALLS)], progress=False)


def main() -> None:
    load = os.getloadavg()
    eugo.hpc.init(num_cpus=2)
    fan_out()  # workers up and the function exported, as in a warm session
    with eugo.hpc.profile():
        fan_out()  # the profiled wrapper exported too
    plain, profiled, reports = [], [], []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        fan_out()
        plain.append(time.perf_counter() - began)
        began = time.perf_counter()
        with eugo.hpc.profile() as run:
            fan_out()
        profiled.append(time.perf_counter() - began)
        began = time.perf_counter()
        report = run.report()
        reports.append(time.perf_counter() - began)
        assert report.summary["tasks"] == CALLS
    eugo.hpc.shutdown()
    p, q, r = (statistics.median(x) for x in (plain, profiled, reports))
    print(f"{CALLS:,} calls, one get, 2 CPUs, median of {ROUNDS} alternating rounds")
    print(f"load average at start: {load[0]:.1f} (a shared machine: expect noise)")
    print(f"{'':34}{'seconds':>10}{'ratio':>9}")
    print(f"{'unprofiled fan-out':34}{p:>10.2f}{1.0:>8.2f}x")
    print(f"{'profiled fan-out':34}{q:>10.2f}{q / p:>8.2f}x")
    print(f"{'run.report() afterwards':34}{r:>10.2f}{r / p:>8.2f}x")


if __name__ == "__main__":
    main()
