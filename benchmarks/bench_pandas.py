"""df.eugo against pandas and the anchors (Dask, Modin on Ray, pandarallel), side by side.

One run, ratios in the same run, a printed table. Usage:

    pip install -e ".[bench]"
    python benchmarks/bench_pandas.py              # the issue's 2,000,000 rows
    python benchmarks/bench_pandas.py --rows 200000

Every way gets 2 CPUs: the embedded Ray has 2, Dask gets 2 processes (its processes scheduler
with npartitions=2*cores and one partition per chunk, and a distributed.LocalCluster of 2
workers), pandarallel 2 workers, Modin runs on the same 2-CPU Ray. An anchor that is not
installed is skipped with the reason printed (Modin: its latest release requires pandas<2.4,
so the ``bench`` extra leaves it out; install it in a separate environment to compare).

Cases: a row function of about 20 µs (``df.apply(fn, axis=1)``); a groupby-apply with skewed
group sizes (one group holds a third of the rows); a small frame (10,000 rows, a fast function)
where ``.eugo`` must run in pandas and stay within 1.15 times of it; the peak memory of this
process (resident memory above its baseline, object-store pages it maps included) during
``df.eugo.apply`` against the frame's ``memory_usage(deep=True)``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import PandasFallbackWarning

cloudpickle.register_pickle_by_value(sys.modules[__name__])
CPUS = 2


def spin(seconds: float) -> None:
    """Burn this much CPU time (thread time: on a busy machine a slice still costs the same)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def row_fn(row: Any) -> float:
    spin(15e-6)  # with pandas' own per-row cost, about 20 µs a row
    return row["a"] * row["b"] + row["c"]


def fast_fn(row: Any) -> float:
    return row["a"] + row["b"]


def group_fn(group: pd.DataFrame) -> float:
    spin(2e-6 * len(group))  # work grows with the group
    return float(group["b"].sum())


def make_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    # One group holds a third of the rows; the rest is spread over 2,000 small groups.
    keys = np.where(rng.random(rows) < 1 / 3, 0, rng.integers(1, 2001, rows))
    return pd.DataFrame(
        {"a": rng.integers(0, 100, rows), "b": rng.random(rows), "c": rng.random(rows), "k": keys}
    )


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


class PeakRSS:
    """Resident memory of this process above its value at start, sampled every 5 ms."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.base = self.process.memory_info().rss
        self.peak = self.base
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self) -> PeakRSS:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)

    @property
    def above(self) -> int:
        return self.peak - self.base


def anchors(df: pd.DataFrame, rows: list[tuple[str, float | None, str]]) -> None:
    """Dask (processes, LocalCluster), Modin on Ray, pandarallel; skipped when missing."""
    meta = ("x", "f8")
    try:
        import dask
        import dask.dataframe as dd

        ddf = dd.from_pandas(df, npartitions=2 * CPUS)
        job = ddf.map_partitions(lambda p: p.apply(row_fn, axis=1), meta=meta)
        with dask.config.set(scheduler="processes", num_workers=CPUS, chunksize=1):
            seconds, _ = timed(lambda: job.compute())
        rows.append(("dask map_partitions, processes (chunksize=1)", seconds, ""))
    except ImportError as exc:
        rows.append(("dask map_partitions, processes", None, f"skipped: {exc}"))
    try:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=CPUS, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None) as cluster, Client(cluster):
            import dask.dataframe as dd

            ddf = dd.from_pandas(df, npartitions=2 * CPUS)
            job = ddf.map_partitions(lambda p: p.apply(row_fn, axis=1), meta=meta)
            seconds, _ = timed(lambda: job.compute())
        rows.append(("dask map_partitions, LocalCluster(2)", seconds, ""))
    except ImportError as exc:
        rows.append(("dask map_partitions, LocalCluster(2)", None, f"skipped: {exc}"))
    try:
        import modin.config
        import modin.pandas as mpd

        modin.config.Engine.put("ray")  # the same 2-CPU Ray as eugo
        seconds, _ = timed(lambda: mpd.DataFrame(df).apply(row_fn, axis=1)._to_pandas())
        rows.append(("modin on Ray, from pandas and back", seconds, ""))
    except ImportError:
        rows.append(("modin on Ray", None, "skipped: not installed (modin 0.37 needs pandas<2.4)"))
    except Exception as exc:  # noqa: BLE001 - an anchor that fails is reported, not fatal
        rows.append(("modin on Ray", None, f"skipped: {type(exc).__name__}: {exc}"[:120]))
    try:
        from pandarallel import pandarallel

        pandarallel.initialize(nb_workers=CPUS, progress_bar=False, verbose=0)
        seconds, _ = timed(lambda: df.parallel_apply(row_fn, axis=1))
        rows.append(("pandarallel parallel_apply", seconds, ""))
    except Exception as exc:  # noqa: BLE001
        rows.append(("pandarallel", None, f"skipped: {type(exc).__name__}: {exc}"[:120]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--no-anchors", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    # No dashboard: nothing here reads it, and it is most of what a start costs on a busy machine.
    eugo.hpc.init(num_cpus=CPUS, include_dashboard=False)
    df = make_frame(args.rows)
    df.iloc[:2000].eugo.apply(row_fn, axis=1, partitions=2)  # workers up, as in a warm session
    frame_bytes = int(df.memory_usage(deep=True).sum())

    rows: list[tuple[str, float | None, str]] = []
    pandas_s, expected = timed(lambda: df.apply(row_fn, axis=1))
    rows.append(("pandas df.apply(fn, axis=1)", pandas_s, ""))
    with PeakRSS() as peak:
        eugo_s, result = timed(lambda: df.eugo.apply(row_fn, axis=1))
    pd.testing.assert_series_equal(result, expected)
    rows.append(("df.eugo.apply(fn, axis=1)", eugo_s, str(eugo.pandas.last_plan())))
    if not args.no_anchors:
        anchors(df, rows)

    print(f"load average before the run: {load[0]:.1f} (1 min) on {os.cpu_count()} cores")
    print(f"\n{args.rows:,} rows, a row function of ~20 µs, {CPUS} CPUs for every way")
    print(f"{'way':48} {'seconds':>9} {'eugo is x faster':>17}")
    for label, seconds, note in rows:
        if seconds is None:
            print(f"{label:48} {'-':>9} {'':>17}  {note}")
        else:
            print(f"{label:48} {seconds:9.2f} {seconds / eugo_s:17.2f}")
    print(f"  plan: {rows[1][2]}")

    # A groupby with one group holding a third of the rows.
    g_pandas, g_expected = timed(lambda: df.groupby("k").apply(group_fn, include_groups=False))
    g_eugo, g_result = timed(lambda: df.eugo.groupby("k").apply(group_fn))
    pd.testing.assert_series_equal(g_result, g_expected)
    plan = eugo.pandas.last_plan()
    largest = int((df["k"] == 0).sum())
    print(f"\ngroupby-apply, {df['k'].nunique():,} groups, the largest {largest:,} rows")
    print(f"{'pandas groupby.apply':48} {g_pandas:9.2f}")
    print(f"{'df.eugo.groupby.apply':48} {g_eugo:9.2f} {g_pandas / g_eugo:17.2f}")
    print(f"  plan: {plan}; rows per partition {plan.sizes}")

    # A small frame with a fast function: .eugo must run it in pandas here.
    small = df.iloc[:10_000].copy()
    here, there = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PandasFallbackWarning)
        for _ in range(7):  # interleaved, medians: the machine is noisy
            here.append(timed(lambda: small.apply(fast_fn, axis=1))[0])
            there.append(timed(lambda: small.eugo.apply(fast_fn, axis=1))[0])
    fell_back = not eugo.pandas.last_plan().distribute
    ratio = statistics.median(there) / statistics.median(here)
    print("\nsmall frame, 10,000 rows, fast function (medians of 7, interleaved)")
    print(f"{'pandas':48} {statistics.median(here) * 1e3:7.1f} ms")
    print(f"{'df.eugo.apply (ran in pandas: ' + str(fell_back) + ')':48} "
          f"{statistics.median(there) * 1e3:7.1f} ms  ratio {ratio:.2f} (target <= 1.15)")

    print("\nratios")
    print(f"eugo vs pandas apply:       {pandas_s / eugo_s:.2f}x faster (target >= 1.6)")
    for label, seconds, _ in rows[2:]:
        if seconds is not None:
            print(f"eugo vs {label:36} {seconds / eugo_s:.2f}x faster")
    print(f"eugo vs pandas groupby:     {g_pandas / g_eugo:.2f}x faster")
    print(f"small frame eugo / pandas:  {ratio:.2f} (target <= 1.15)")
    print(f"peak memory of this process during df.eugo.apply: {peak.above / 1e6:.0f} MB above "
          f"baseline = {peak.above / frame_bytes:.2f}x the frame ({frame_bytes / 1e6:.0f} MB) "
          "(target <= 1.5)")
    eugo.hpc.shutdown()


if __name__ == "__main__":
    main()
