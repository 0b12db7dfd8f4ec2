"""The workload of bench_pandas.py, and the anchors that need another environment.

Only numpy and pandas here (no eugo_jupyter), so the same frame and row function run in an
environment eugo_jupyter does not support: Modin (0.37, its latest) and pandarallel (1.6.5)
require pandas < 2.4, and eugo_jupyter requires pandas 3. ``bench_pandas.py --other-python PY``
runs this file under that interpreter, in the same benchmark run, and prints its figures beside
ours; this environment's own ``df.apply`` is timed too, so each anchor has a pandas to compare
with on the pandas it runs on.

    python -m venv /tmp/pd2 && /tmp/pd2/bin/pip install "pandas<2.4" "modin[ray]" pandarallel
    /tmp/pd2/bin/python benchmarks/pandas_workload.py --rows 200000    # prints one JSON line
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

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


Row = tuple[str, "float | None", str]


def _apply_seconds(df: pd.DataFrame) -> float:
    return timed(lambda: df.apply(row_fn, axis=1))[0]


def machine_ceiling(df: pd.DataFrame, rows: int = 50_000) -> float:
    """How much faster 2 processes get through the row function than 1, on this machine now.

    The same slice, in fresh processes: once alone, then twice at the same time. On a machine
    whose 2 CPUs share a physical core, or whose host is busy, this is well under 2, and no way
    of splitting the frame can beat it.
    """
    import multiprocessing

    part = df.iloc[:rows]
    with multiprocessing.get_context("spawn").Pool(CPUS) as pool:
        pool.map(_apply_seconds, [part.iloc[:100]] * CPUS)  # both workers warm
        alone = pool.apply(_apply_seconds, (part,))
        together = pool.map(_apply_seconds, [part] * CPUS, chunksize=1)
    return CPUS * alone / max(together)


def _failed(label: str, exc: BaseException) -> Row:
    return (label, None, f"skipped: {type(exc).__name__}: {exc}"[:160])


def dask_rows(df: pd.DataFrame, expected: pd.Series) -> list[Row]:
    """Dask's processes scheduler (one partition per chunk) and a LocalCluster of 2 workers."""
    rows: list[Row] = []
    meta = ("x", "f8")
    try:
        import dask
        import dask.dataframe as dd

        ddf = dd.from_pandas(df, npartitions=2 * CPUS)
        job = ddf.map_partitions(lambda p: p.apply(row_fn, axis=1), meta=meta)
        # Its default chunking would send every partition to one worker.
        with dask.config.set(scheduler="processes", num_workers=CPUS, chunksize=1):
            seconds, got = timed(lambda: job.compute())
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy())
        rows.append(("dask map_partitions, processes (chunksize=1)", seconds, ""))
    except Exception as exc:  # noqa: BLE001 - an anchor that fails is reported, not fatal
        rows.append(_failed("dask map_partitions, processes", exc))
    try:
        import dask.dataframe as dd
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=CPUS,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster,
            Client(cluster),
        ):
            ddf = dd.from_pandas(df, npartitions=2 * CPUS)
            job = ddf.map_partitions(lambda p: p.apply(row_fn, axis=1), meta=meta)
            seconds, got = timed(lambda: job.compute())
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy())
        rows.append(("dask map_partitions, LocalCluster(2)", seconds, ""))
    except Exception as exc:  # noqa: BLE001
        rows.append(_failed("dask map_partitions, LocalCluster(2)", exc))
    return rows


def modin_pandarallel_rows(df: pd.DataFrame, expected: pd.Series) -> list[Row]:
    """Modin on a 2-CPU Ray, and pandarallel with 2 workers; each checked against pandas."""
    rows: list[Row] = []
    try:
        import modin.config
        import modin.pandas as mpd
        import ray

        if not ray.is_initialized():
            ray.init(address="local", num_cpus=CPUS, include_dashboard=False)
        modin.config.Engine.put("ray")
        label = f"modin {modin.__version__} on Ray, from pandas and back"
        seconds, got = timed(lambda: mpd.DataFrame(df).apply(row_fn, axis=1)._to_pandas())
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy())
        rows.append((label, seconds, ""))
    except Exception as exc:  # noqa: BLE001
        rows.append(_failed("modin on Ray", exc))
    try:
        import pandarallel as pandarallel_package
        from pandarallel import pandarallel

        pandarallel.initialize(nb_workers=CPUS, progress_bar=False, verbose=0)
        version = getattr(pandarallel_package, "__version__", "")
        seconds, got = timed(lambda: df.parallel_apply(row_fn, axis=1))
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy())
        rows.append((f"pandarallel {version} parallel_apply".replace("  ", " "), seconds, ""))
    except Exception as exc:  # noqa: BLE001
        rows.append(_failed("pandarallel", exc))
    return rows


def main() -> None:
    """Time pandas, Modin and pandarallel here; print one JSON object for bench_pandas.py."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    args = parser.parse_args()
    df = make_frame(args.rows)
    pandas_s, expected = timed(lambda: df.apply(row_fn, axis=1))
    rows = modin_pandarallel_rows(df, expected)
    print(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "pandas_version": pd.__version__,
                "pandas_s": pandas_s,
                "rows": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
