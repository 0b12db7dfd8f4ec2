"""eugo.hpc.map against one Ray task per item, multiprocessing.Pool.map and a plain loop.

One run, ratios in the same run, a printed table. Usage: python benchmarks/bench_map.py

1. 100,000 tiny items (about 10 microseconds of CPU each). map, a warm Pool.map and plain Ray
   tasks cut into Pool's own chunks (eight of 12,500, submitted at once: the best Ray itself does
   when the chunking is known in advance) take turns, five runs each, medians. One Ray task per
   item is measured on a 5,000-item subset and scaled to 100,000 (it would take about a minute
   on 2 CPUs).
2. 100,000 items of about 0.1 ms (the case from Ray's "tips for first-time users"): against
   the ideal, the serial time divided by the slots (target within 1.3 times).
3. 200 items of about 20 ms of CPU work: speedup over the plain loop on 2 CPUs, with a warm
   Pool.map on the same items as the machine's own yardstick.
4. Where map's function and ``shared=`` travel: inside each task (up to 64 KiB pickled, so that
   a node announced dead cannot take the kernel down with an object of it; see the reliability
   guide) against the object store once, as before. Same run, taking turns, medians of 5: auto
   batches of 10 µs items, and the worst case, 2,000 tasks of five 10 µs items with no
   ``shared=`` and with 50 KB of it. ``python benchmarks/bench_map.py payload`` runs this part
   alone.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import time

import ray
from ray import cloudpickle

import eugo_jupyter as eugo

cloudpickle.register_pickle_by_value(sys.modules[__name__])
REPEATS = 5


def spin(seconds: float) -> float:
    """Burn this much CPU time (not wall time: on a busy machine a slice still costs the same)."""
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1
    return seconds


def tiny(x: int) -> int:
    return int(spin(10e-6)) + x


def small(x: int) -> int:
    return int(spin(0.1e-3)) + x


def chunky(x: int) -> int:
    return int(spin(20e-3)) + x


def chunk(items: list) -> list:
    return [tiny(x) for x in items]


def cold_pool_map(cpus: int, items: list) -> list:
    pool = multiprocessing.get_context("fork").Pool(cpus)
    try:
        return pool.map(tiny, items)
    finally:
        pool.close()  # close+join, not terminate: the children carry Ray's SIGTERM handler
        pool.join()


def timed(label: str, fn, rows: list) -> float:  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    fn()
    seconds = time.perf_counter() - began
    rows.append((label, seconds))
    return seconds


def payload_inline_vs_store() -> None:
    """Section 4: Engine.store as it is (inline when small) against putting it in the store."""
    from eugo_jupyter.hpc import _batching

    inline = _batching.Engine.store

    def through_store(self, value, fn=None, shared=None):  # type: ignore[no-untyped-def]
        return [ray.put(value)]

    cases = (
        ("100,000 x ~10 µs, auto batches", None, 100_000, "auto"),
        ("2,000 tasks of 5 x ~10 µs, no shared=", None, 10_000, 5),
        ("2,000 tasks of 5 x ~10 µs, 50 KB shared=", {"blob": b"x" * 50_000}, 10_000, 5),
    )
    print(f"\nwhere the function and shared= travel (medians of {REPEATS}, taking turns)")
    print(f"{'case':48} {'store s':>9} {'inline s':>9} {'inline/store':>13}")
    for label, shared, n, batch in cases:
        runs: dict[str, list[float]] = {"store": [], "inline": []}
        for _ in range(REPEATS):
            for name, store in (("store", through_store), ("inline", inline)):
                _batching.Engine.store = store  # type: ignore[method-assign]
                began = time.perf_counter()
                eugo.hpc.map(tiny_shared, range(n), shared=shared, batch_size=batch)
                runs[name].append(time.perf_counter() - began)
        _batching.Engine.store = inline  # type: ignore[method-assign]
        stored, inlined = statistics.median(runs["store"]), statistics.median(runs["inline"])
        print(f"{label:48} {stored:9.3f} {inlined:9.3f} {inlined / stored:13.2f}")


def tiny_shared(x: int, **shared: object) -> int:
    return tiny(x)


def main() -> None:
    cpus = 2
    load = os.getloadavg()
    # No dashboard: nothing here reads it, and it is most of what a start costs on a busy machine.
    eugo.hpc.init(num_cpus=cpus, include_dashboard=False)
    eugo.hpc.map(tiny, range(1000))  # workers up and the function cached, as in a warm session
    if sys.argv[1:] == ["payload"]:
        print(f"load average before the run: {load[0]:.1f} (1 min) on {os.cpu_count()} cores")
        payload_inline_vs_store()
        print(f"load average after the run: {os.getloadavg()[0]:.1f}")
        eugo.hpc.shutdown()
        return
    n = 100_000
    items = list(range(n))
    rows: list[tuple[str, float]] = []

    loop = timed("plain loop", lambda: [tiny(x) for x in items], rows)
    pool = multiprocessing.get_context("fork").Pool(cpus)
    pool.map(tiny, range(cpus * 4))  # processes started
    chunked = ray.remote(chunk)
    ray.get([chunked.remote([x]) for x in range(cpus * 2)])  # its workers up, as map's are
    pool_chunk = -(-n // (cpus * 4))  # Pool.map's default chunksize

    def ray_chunks() -> list:
        refs = [chunked.remote(items[i : i + pool_chunk]) for i in range(0, n, pool_chunk)]
        return [y for part in ray.get(refs) for y in part]

    # The three take turns, five times each, and each reports its median: one run of each, a
    # second apart, measured the machine's mood as much as any way.
    map_runs: list[float] = []
    pool_runs: list[float] = []
    ray_runs: list[float] = []
    for _ in range(REPEATS):
        map_runs.append(timed("", lambda: eugo.hpc.map(tiny, items), []))
        pool_runs.append(timed("", lambda: pool.map(tiny, items), []))
        ray_runs.append(timed("", ray_chunks, []))
    mapped = statistics.median(map_runs)
    pool_s = statistics.median(pool_runs)
    ray_s = statistics.median(ray_runs)
    rows.append((f"eugo.hpc.map (median of {REPEATS})", mapped))
    rows.append((f"Pool.map (warm pool, default chunks, median of {REPEATS})", pool_s))
    rows.append((f"Ray tasks in Pool's {pool_chunk:,}-item chunks (median)", ray_s))
    cold_pool_s = timed(
        "Pool.map (incl. starting the pool)",
        lambda: cold_pool_map(cpus, items),
        rows,
    )
    remote = ray.remote(tiny)
    subset = 5_000
    began = time.perf_counter()
    ray.get([remote.remote(x) for x in range(subset)])
    per_task = (time.perf_counter() - began) / subset
    rows.append((f"one Ray task per item (from {subset:,}, scaled)", per_task * n))

    print(f"load average before the run: {load[0]:.1f} (1 min) on {os.cpu_count()} cores")
    print(f"\n100,000 items of ~10 µs on {cpus} CPUs")
    print(f"{'way':48} {'seconds':>9} {'map is x faster':>16}")
    for label, seconds in rows:
        print(f"{label:48} {seconds:9.3f} {seconds / mapped:16.1f}")

    rows3: list[tuple[str, float]] = []
    serial3 = timed("plain loop (serial)", lambda: [small(x) for x in items], rows3)
    map3 = timed("eugo.hpc.map", lambda: eugo.hpc.map(small, items), rows3)
    ideal3 = serial3 / cpus
    print(f"\n100,000 items of ~0.1 ms on {cpus} CPUs (ideal = serial / {cpus} = {ideal3:.2f} s)")
    for label, seconds in rows3:
        print(f"{label:48} {seconds:9.3f}")

    m = 200
    rows2: list[tuple[str, float]] = []
    loop2 = timed("plain loop", lambda: [chunky(x) for x in range(m)], rows2)
    map2 = timed("eugo.hpc.map", lambda: eugo.hpc.map(chunky, range(m)), rows2)
    pool2 = timed("Pool.map (warm pool, default chunks)", lambda: pool.map(chunky, range(m)), rows2)
    pool.close()
    pool.join()
    print(f"\n200 items of ~20 ms CPU on {cpus} CPUs")
    print(f"{'way':48} {'seconds':>9} {'speedup':>16}")
    for label, seconds in rows2:
        print(f"{label:48} {seconds:9.3f} {loop2 / seconds:16.2f}")

    print("\nratios")
    print(f"map vs one Ray task per item: {per_task * n / mapped:.0f}x faster (target >= 50)")
    spread = (
        f"map {min(map_runs):.3f}-{max(map_runs):.3f} s, "
        f"Pool {min(pool_runs):.3f}-{max(pool_runs):.3f} s"
    )
    print(f"map vs Pool.map warm pool:    {pool_s / mapped:.2f}x (target >= 1; {spread})")
    print(f"Ray's own best vs Pool.map:   {pool_s / ray_s:.2f}x (Ray tasks in Pool's chunks)")
    print(f"map vs Ray's own best:        {ray_s / mapped:.2f}x")
    print(f"map vs Pool.map incl. start:  {cold_pool_s / mapped:.2f}x")
    print(f"map vs plain loop (tiny):     {loop / mapped:.2f}x")
    print(f"map vs plain loop (20 ms):    {loop2 / map2:.2f}x speedup (target >= 1.8)")
    print(f"Pool vs plain loop (20 ms):   {loop2 / pool2:.2f}x speedup (the machine's yardstick)")
    print(f"map (0.1 ms) vs ideal:        {map3 / ideal3:.2f}x the ideal (target <= 1.3)")
    payload_inline_vs_store()
    eugo.hpc.shutdown()


if __name__ == "__main__":
    main()
