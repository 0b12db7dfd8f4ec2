"""What ``journal=`` costs: a journaled ``map`` against the same ``map`` without one, and a rerun
of the finished run against nothing at all.

One run, ratios in the same run, a printed table. Usage: python benchmarks/bench_journal.py

1. 100,000 tiny items (about 10 microseconds of CPU each), ``map`` with and without a journal,
   taking turns, medians of 5 (each journaled run writes a fresh journal). Goal: the journal
   costs at most 10%.
2. The rerun of a finished 100,000-item journaled run: all answered from the journal, nothing
   submitted. Goal: well under a second.
3. The journal's size on disk for those 100,000 small results.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench_map import tiny  # the same ~10 µs item (bench_map sends its module by value)

import eugo_jupyter as eugo

REPEATS = 5
ITEMS = 100_000


def main() -> None:
    eugo.hpc.init(num_cpus=2)
    root = Path(tempfile.mkdtemp(prefix="bench-journal-"))
    items = list(range(ITEMS))
    expected = [tiny(x) for x in range(10)]
    eugo.hpc.map(tiny, items, progress=False)  # warm the workers
    plain, journaled = [], []
    for repeat in range(REPEATS):
        began = time.perf_counter()
        out = eugo.hpc.map(tiny, items, progress=False)
        plain.append(time.perf_counter() - began)
        folder = root / f"run{repeat}"
        began = time.perf_counter()
        again = eugo.hpc.map(tiny, items, progress=False, journal=folder)
        journaled.append(time.perf_counter() - began)
        assert out == again and out[:10] == expected
    folder = root / f"run{REPEATS - 1}"
    reruns = []
    for _ in range(REPEATS):
        began = time.perf_counter()
        again = eugo.hpc.map(tiny, items, progress=False, journal=folder)
        reruns.append(time.perf_counter() - began)
    assert again == out
    held = eugo.hpc.journal(folder)
    size = held.size
    chunks = len(list(folder.glob("g*/*.pkl")))
    p, j, r = (statistics.median(x) for x in (plain, journaled, reruns))
    print(f"{ITEMS:,} tiny items, medians of {REPEATS}")
    print(f"  map, no journal           {p:7.3f} s")
    print(f"  map, journal=             {j:7.3f} s   {j / p:5.2f}x  (goal: at most 1.10x)")
    print(f"  rerun, all from journal   {r:7.3f} s   {r / p:5.2f}x of a run")
    print(f"  journal on disk           {size / 1e6:7.2f} MB in {chunks} chunks")
    shutil.rmtree(root)
    eugo.hpc.shutdown()


if __name__ == "__main__":
    main()
