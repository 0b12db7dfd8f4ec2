"""Runs at scale: imap's memory and speed, collected failures, timeouts, stragglers.

One run, ratios in the same run, a printed table. Usage: python benchmarks/bench_scale.py
(about three minutes on 2 CPUs). Peak memory is a driver's resident size sampled every
5 ms, above what it was when that way started, each way in a fresh driver process joined to
the same cluster (a process's resident size does not shrink back after a peak).

1. 1,000,000 tiny items (each returns 100 bytes) through ``imap`` and ``map``: the kernel's
   peak memory, items per second, against a warm ``multiprocessing.Pool.imap_unordered``
   (chunks of 2,000). ``ray.util.map_unordered`` (Ray's own bounded iterator, one task per
   item) runs 20,000 of them: a million would take minutes here.
2. ``map`` against the engine it runs on driven as before this change (``Engine.run`` and the
   plain batch body): what streaming and the per-item outcome cost (target <= 1.05).
3. 200,000 items of which 1% raise, with ``errors="collect"``: every good result kept, every
   failure in the table; against the same run without failures.
4. 200 items of 10 ms of which 3 hang: with ``timeout=2`` the run ends, the 3 reported.
5. A straggler: one worker stops (SIGSTOP) for 6 s on its first batch near the end; the run's
   time with and without ``backups=True``.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import ray
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.hpc._batching import Engine
from eugo_jupyter.hpc._items import run_items
from eugo_jupyter.hpc._map import _Items, _MapPlanner

cloudpickle.register_pickle_by_value(sys.modules[__name__])
N = 1_000_000


def hundred_bytes(x: int) -> bytes:
    return x.to_bytes(8, "little") * 12 + b"tile"


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def tiny(x: int) -> int:
    spin(5e-6)
    return x


def one_percent_fail(x: int) -> int:
    spin(5e-6)
    if x % 100 == 37:
        raise ValueError(f"corrupt tile {x}")
    return x


def hangs_on_three(x: int) -> int:
    if x in (50, 120, 190):
        time.sleep(3600)
    spin(0.01)
    return x


def stops_once(item: tuple[str, int]) -> int:
    folder, x = item
    spin(0.02)
    marker = Path(folder) / "stopped"
    if x == 170 and not marker.exists():
        marker.write_text("1")
        waker = f"import os, signal, time; time.sleep(6); os.kill({os.getpid()}, signal.SIGCONT)"
        subprocess.Popen([sys.executable, "-c", waker])
        os.kill(os.getpid(), signal.SIGSTOP)
    return x


class Peak:
    """The process's resident size, sampled, above its size when started."""

    def __enter__(self) -> Peak:
        gc.collect()
        self.process = psutil.Process()
        self.base = self.process.memory_info().rss
        self.peak = self.base
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc: Any) -> None:
        self.running = False
        self.thread.join()
        self.mib = (self.peak - self.base) / 2**20


def measured(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    with Peak() as peak:
        began = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - began
    return seconds, peak.mib, out


def drain(iterator: Any) -> int:
    count = 0
    for _ in iterator:
        count += 1
    return count


def old_map(fn: Any, items: range) -> list[Any]:
    """map as it ran before streaming: Engine.run, then the batches in order."""
    source = _Items(items)
    engine = Engine("map(old)", run_items, fn, None, {}, False, source.total)
    planner = _MapPlanner(source, "auto", engine.slots)

    def fail(*args: Any) -> BaseException:
        return RuntimeError(str(args))

    results = engine.run(planner, fail, fail)
    return [value for key in sorted(results) for value in results[key]]


LABELS = {
    "imap": "eugo.hpc.imap",
    "map": "eugo.hpc.map",
    "map_unordered": "ray.util.map_unordered",
    "pool": "Pool.imap_unordered (warm, chunks of 2,000)",
}


def memory_run(way: str, items: int, address: str) -> tuple[float, float]:
    """One way in a fresh driver process joined to this cluster: ``(seconds, peak MiB)``.

    A process's resident size does not shrink back after a peak, so each way gets its own
    process, warmed up with a small run of the same way before its peak is measured.
    """
    command = [sys.executable, __file__, "memory", way, str(items), address]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    seconds, mib = out.stdout.strip().splitlines()[-1].split()
    return float(seconds), float(mib)


def memory_child(way: str, items: int, address: str) -> None:
    if way == "pool":
        with multiprocessing.Pool(min(2, os.cpu_count() or 2)) as pool:
            drain(pool.imap_unordered(hundred_bytes, range(20_000), chunksize=2000))
            s, mib, count = measured(
                lambda: drain(pool.imap_unordered(hundred_bytes, range(items), chunksize=2000))
            )
        print(s, mib)
        return
    eugo.hpc.init(address=address)
    remote = ray.remote(hundred_bytes)
    run: dict[str, Callable[[int], Any]] = {
        "imap": lambda n: drain(eugo.hpc.imap(hundred_bytes, range(n))),
        "map": lambda n: len(eugo.hpc.map(hundred_bytes, range(n))),
        "map_unordered": lambda n: drain(ray.util.map_unordered(remote, range(n))),
    }
    run[way](min(items, 20_000) // 10)  # warm: the connection, the workers, the first batches
    s, mib, count = measured(lambda: run[way](items))
    assert count == items
    print(s, mib)


def main() -> None:
    cpus = min(2, os.cpu_count() or 2)
    eugo.hpc.init(num_cpus=cpus, include_dashboard=False)
    try:
        eugo.hpc.map(tiny, range(1000))  # workers up
        rows = []
        address = ray.get_runtime_context().gcs_address
        for way, items in (("imap", N), ("map", N), ("map_unordered", 20_000), ("pool", N)):
            s, mib = memory_run(way, items, address)
            rows.append((LABELS[way], items, s, mib))
        imap_s, imap_mib = rows[0][2], rows[0][3]
        map_s, map_mib = rows[1][2], rows[1][3]
        ray_rate, ray_mib = rows[2][1] / rows[2][2], rows[2][3]
        pool_rate = N / rows[3][2]
        print(f"\n1. tiny items returning 100 bytes, {cpus} CPUs")
        print(f"{'way':46} {'items':>9} {'seconds':>8} {'items/s':>10} {'peak MiB':>9}")
        for label, items, seconds, peak in rows:
            print(f"{label:46} {items:9,} {seconds:8.2f} {items / seconds:10,.0f} {peak:9.1f}")

        runs_new, runs_old = [], []
        for _ in range(5):
            runs_old.append(measured(lambda: old_map(tiny, range(100_000)))[0])
            runs_new.append(measured(lambda: eugo.hpc.map(tiny, range(100_000)))[0])
        new_s, old_s = statistics.median(runs_new), statistics.median(runs_old)

        clean_s, _, clean = measured(lambda: eugo.hpc.map(tiny, range(200_000), errors="collect"))
        failing_s, _, failing = measured(
            lambda: eugo.hpc.map(one_percent_fail, range(200_000), errors="collect")
        )
        assert len(clean.failures) == 0 and len(failing.failures) == 2000
        kept = sum(1 for v in failing if not isinstance(v, eugo.hpc.Failed))
        assert kept == 198_000 and len(failing.failures.to_frame()) == 2000

        hang_s, _, hung = measured(
            lambda: eugo.hpc.map(hangs_on_three, range(200), timeout=2, errors="collect")
        )
        reported = [f.index for f in hung.failures]

        with tempfile.TemporaryDirectory() as folder:
            items = [(folder, x) for x in range(200)]
            plain_s, _, plain = measured(lambda: eugo.hpc.map(stops_once, items, batch_size=5))
        with tempfile.TemporaryDirectory() as folder:
            items = [(folder, x) for x in range(200)]
            backed_s, _, backed = measured(
                lambda: eugo.hpc.map(stops_once, items, batch_size=5, backups=True)
            )
        assert plain == backed == list(range(200))

        print("\nratios")
        print(f"imap peak memory vs map's:             {imap_mib:.1f} MiB vs {map_mib:.1f} MiB")
        print(f"imap peak vs ray.util.map_unordered's: {imap_mib:.1f} MiB vs {ray_mib:.1f} MiB")
        print(f"imap items/s vs Pool.imap_unordered:   {N / imap_s / pool_rate:.2f}x")
        print(f"imap items/s vs ray.util.map_unordered: {N / imap_s / ray_rate:.0f}x")
        print(
            f"map vs map on the engine as before:    {new_s / old_s:.2f}x the time "
            f"(medians of 5, {new_s:.3f} s vs {old_s:.3f} s; target <= 1.05)"
        )
        print(
            f"1% failing, collected vs no failures:  {failing_s / clean_s:.2f}x the time "
            f"({failing_s:.2f} s vs {clean_s:.2f} s; 198,000 kept, 2,000 in the table)"
        )
        print(
            f"3 hung items, timeout=2:               ended in {hang_s:.1f} s, reported {reported}"
        )
        print(
            f"straggler, backups=True vs off:        {backed_s:.2f} s vs {plain_s:.2f} s "
            f"({plain_s / backed_s:.2f}x faster)"
        )
        print(f"(imap {imap_s:.2f} s, map {map_s:.2f} s for {N:,} items)")
    finally:
        eugo.hpc.shutdown()


if __name__ == "__main__":
    if sys.argv[1:2] == ["memory"]:
        memory_child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main()
