"""eugo.hpc against raw Ray on the same cluster, in one run.

(a) 10,000 no-op calls submitted, then gathered; (b) 1,000 sequential call-and-get round trips;
(c) (a) through Ray's spelling ``f.remote()``, which eugo takes as an alias of ``f()``; (d) 5,000
actor method calls submitted, then gathered. Each is repeated and interleaved (raw, eugo, raw,
eugo...) so both see the same machine load; the medians are compared. Target: every ratio
(eugo / raw) at most 1.05.

    python benchmarks/bench_api.py [--calls 10000] [--round-trips 1000] [--actor-calls 5000]
                                   [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import ray

import eugo_jupyter as eugo


def noop_raw() -> None:
    return None


def noop_eugo() -> None:
    return None


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def incr(self) -> int:
        self.n += 1
        return self.n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--round-trips", type=int, default=1_000)
    parser.add_argument("--actor-calls", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()

    eugo.hpc.init(num_cpus=args.num_cpus)
    raw = ray.remote(noop_raw)
    dist = eugo.hpc.distribute(noop_eugo)
    raw_actor = ray.remote(Counter).remote()
    eugo_actor = eugo.hpc.distribute(Counter)()

    def fan_out_raw() -> None:
        ray.get([raw.remote() for _ in range(args.calls)])

    def fan_out_eugo() -> None:
        eugo.hpc.get([dist() for _ in range(args.calls)])

    def round_trips_raw() -> None:
        for _ in range(args.round_trips):
            ray.get(raw.remote())

    def round_trips_eugo() -> None:
        for _ in range(args.round_trips):
            eugo.hpc.get(dist())

    def fan_out_alias() -> None:
        eugo.hpc.get([dist.remote() for _ in range(args.calls)])

    def methods_raw() -> None:
        ray.get([raw_actor.incr.remote() for _ in range(args.actor_calls)])

    def methods_eugo() -> None:
        eugo.hpc.get([eugo_actor.incr() for _ in range(args.actor_calls)])

    cases = {
        f"{args.calls:,} calls submitted, then gathered": (fan_out_raw, fan_out_eugo),
        f"{args.round_trips:,} sequential call-and-get": (round_trips_raw, round_trips_eugo),
        f"{args.calls:,} calls as `f.remote()`, then gathered": (fan_out_raw, fan_out_alias),
        f"{args.actor_calls:,} actor method calls, then gathered": (methods_raw, methods_eugo),
    }
    # Warm up workers and function exports for both paths.
    for raw_case, eugo_case in cases.values():
        raw_case()
        eugo_case()

    print("| case | raw Ray (s) | eugo.hpc (s) | ratio eugo/raw |")
    print("|---|---|---|---|")
    for label, (raw_case, eugo_case) in cases.items():
        raw_times, eugo_times = [], []
        for _ in range(args.repeats):
            for case, times in ((raw_case, raw_times), (eugo_case, eugo_times)):
                start = time.perf_counter()
                case()
                times.append(time.perf_counter() - start)
        raw_median, eugo_median = statistics.median(raw_times), statistics.median(eugo_times)
        print(
            f"| {label} | {raw_median:.3f} | {eugo_median:.3f} | {eugo_median / raw_median:.3f} |"
        )
    eugo.hpc.shutdown()


if __name__ == "__main__":
    main()
