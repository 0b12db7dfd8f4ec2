"""df.eugo against pandas and the anchors (Dask, Modin on Ray, pandarallel), side by side.

One run, ratios in the same run, a printed table. Usage:

    pip install -e ".[bench]"
    python benchmarks/bench_pandas.py              # the issue's 2,000,000 rows
    python benchmarks/bench_pandas.py --rows 200000
    python benchmarks/bench_pandas.py --other-python /tmp/pd2/bin/python   # + Modin, pandarallel

Every way gets 2 CPUs: the embedded Ray has 2, Dask gets 2 processes (its processes scheduler
with npartitions=2*cores and one partition per chunk, and a distributed.LocalCluster of 2
workers), pandarallel 2 workers, Modin runs on the same 2-CPU Ray. An anchor that is not
installed is skipped with the reason printed. Modin (0.37, its latest) and pandarallel (1.6.5)
need pandas<2.4 and eugo_jupyter needs pandas 3, so they run in an environment of their own in
the same run: ``--other-python /tmp/pd2/bin/python`` (see pandas_workload.py for how to make it).

Cases: a row function of about 20 µs (``df.apply(fn, axis=1)``); a groupby-apply with skewed
group sizes (one group holds a third of the rows); a small frame (10,000 rows, a fast function)
where ``.eugo`` must run in pandas and stay within 1.15 times of it; the peak memory of this
process (resident memory above its baseline, object-store pages it maps included) during
``df.eugo.apply`` against the frame's ``memory_usage(deep=True)``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import cloudpickle
import pandas as pd
from ray import cloudpickle as ray_cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import PandasFallbackWarning

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas_workload as workload
from pandas_workload import (
    CPUS,
    Row,
    dask_rows,
    fast_fn,
    group_fn,
    machine_ceiling,
    make_frame,
    modin_pandarallel_rows,
    row_fn,
    timed,
)

# Workers of Ray and Dask get the workload by value: neither has this folder on its path.
for pickler in (cloudpickle, ray_cloudpickle):
    pickler.register_pickle_by_value(workload)


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


def other_environment(python: str, rows: int) -> tuple[list[Row], str]:
    """Run pandas_workload.py under another interpreter (Modin and pandarallel need pandas<2.4)."""
    script = Path(__file__).resolve().with_name("pandas_workload.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "PYTHONPATH"))}
    try:
        done = subprocess.run(
            [python, str(script), "--rows", str(rows)],
            capture_output=True,
            text=True,
            timeout=1800,
            env=env,
            check=True,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        tail = getattr(exc, "stderr", "") or ""
        return [("other environment", None, f"skipped: {exc} {tail[-200:]}")], ""
    where = f"pandas {found['pandas_version']}, Python {found['python']}"
    label = f"pandas {found['pandas_version']} df.apply (other env)"
    pandas_row: Row = (label, found["pandas_s"], "")
    return [pandas_row, *[tuple(row) for row in found["rows"]]], where


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--no-anchors", action="store_true")
    parser.add_argument(
        "--other-python",
        help="an interpreter with pandas<2.4, Modin and pandarallel (see pandas_workload.py)",
    )
    args = parser.parse_args()
    load = os.getloadavg()
    # No dashboard: nothing here reads it, and it is most of what a start costs on a busy machine.
    eugo.hpc.init(num_cpus=CPUS, include_dashboard=False)
    df = make_frame(args.rows)
    df.iloc[:2000].eugo.apply(row_fn, axis=1, partitions=2)  # workers up, as in a warm session
    frame_bytes = int(df.memory_usage(deep=True).sum())

    ceiling_before = machine_ceiling(df)
    rows: list[Row] = []
    pandas_s, expected = timed(lambda: df.apply(row_fn, axis=1))
    rows.append(("pandas df.apply(fn, axis=1)", pandas_s, ""))
    with PeakRSS() as peak:
        eugo_s, result = timed(lambda: df.eugo.apply(row_fn, axis=1))
    pd.testing.assert_series_equal(result, expected)
    rows.append(("df.eugo.apply(fn, axis=1)", eugo_s, str(eugo.pandas.last_plan())))
    if not args.no_anchors:
        rows += dask_rows(df, expected)
        rows += modin_pandarallel_rows(df, expected)  # here they need pandas<2.4: see below
    others: list[Row] = []
    where = ""
    if args.other_python:
        others, where = other_environment(args.other_python, args.rows)

    ceiling = (ceiling_before + machine_ceiling(df)) / 2
    print(f"load average before the run: {load[0]:.1f} (1 min) on {os.cpu_count()} cores")
    print(
        f"this machine's ceiling: {CPUS} processes get through the row function {ceiling:.2f}x "
        f"as fast as one (before {ceiling_before:.2f}x, after the runs); no way beats it"
    )
    print(f"\n{args.rows:,} rows, a row function of ~20 µs, {CPUS} CPUs for every way")
    print(f"{'way':48} {'seconds':>9} {'eugo is x faster':>17}")
    for label, seconds, note in rows:
        if seconds is None:
            print(f"{label:48} {'-':>9} {'':>17}  {note}")
        else:
            print(f"{label:48} {seconds:9.2f} {seconds / eugo_s:17.2f}")
    print(f"  plan: {rows[1][2]}")
    if others:
        print(f"\nthe same frame and function in another environment ({where}), same run")
        print(f"{'way':48} {'seconds':>9} {'x its pandas':>17} {'eugo is x faster':>17}")
        base = others[0][1]
        for label, seconds, note in others:
            if seconds is None:
                print(f"{label:48} {'-':>9} {'':>17} {'':>17}  {note}")
            else:
                speedup = f"{base / seconds:17.2f}" if base else f"{'':>17}"
                print(f"{label:48} {seconds:9.2f} {speedup} {seconds / eugo_s:17.2f}")

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
    print(
        f"{'df.eugo.apply (ran in pandas: ' + str(fell_back) + ')':48} "
        f"{statistics.median(there) * 1e3:7.1f} ms  ratio {ratio:.2f} (target <= 1.15)"
    )

    print("\nratios")
    print(
        f"eugo vs pandas apply:       {pandas_s / eugo_s:.2f}x faster (target >= 1.6; "
        f"{pandas_s / eugo_s / ceiling:.0%} of the machine's ceiling, {ceiling:.2f}x)"
    )
    for label, seconds, _ in rows[2:] + others[1:]:
        if seconds is not None:
            print(f"eugo vs {label:36} {seconds / eugo_s:.2f}x faster")
    print(f"eugo vs pandas groupby:     {g_pandas / g_eugo:.2f}x faster")
    print(f"small frame eugo / pandas:  {ratio:.2f} (target <= 1.15)")
    print(
        f"peak memory of this process during df.eugo.apply: {peak.above / 1e6:.0f} MB above "
        f"baseline = {peak.above / frame_bytes:.2f}x the frame ({frame_bytes / 1e6:.0f} MB) "
        "(target <= 1.5)"
    )
    eugo.hpc.shutdown()


if __name__ == "__main__":
    main()
