"""%%distribute against the plain alternatives, in the same run on a local Ray with 2 CPUs.

1. Round trip of a small cell (read a variable, assign one, display a value) against a cell
   doing the same work as an ``@eugo.hpc.distribute`` call plus ``get``: the ratio (target at
   most 1.3). Both run through the same IPython shell, as a user's cells do.
2. How the cost grows with the size of the shipped variable (1 KB to 100 MB), against
   ``eugo.hpc.put`` of the same bytes plus a task that reads it.

Run: ``python benchmarks/bench_magics.py`` (about a minute). Prints a table; medians of repeats.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _median_time(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm: workers started, functions exported
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from IPython.testing.globalipapp import get_ipython

    import eugo_jupyter as eugo

    eugo.hpc.init(num_cpus=2)
    shell = get_ipython()
    shell.run_line_magic("load_ext", "eugo_jupyter")
    shell.user_ns["x"] = 20

    def magic_cell() -> None:
        result = shell.run_cell(
            "%%distribute\ny = x * 2 + 2\ny\n", store_history=False, silent=True
        )
        assert result.success and shell.user_ns["y"] == 42

    @eugo.hpc.distribute
    def same_code(x: int) -> int:
        return x * 2 + 2

    shell.user_ns["same_code"] = same_code

    def decorated_call() -> None:
        # The same work as a plain cell that calls the decorated function.
        result = shell.run_cell(
            "y = eugo.hpc.get(same_code(x))\ny\n", store_history=False, silent=True
        )
        assert result.success and shell.user_ns["y"] == 42

    repeat = 40
    t_magic = _median_time(magic_cell, repeat)
    t_call = _median_time(decorated_call, repeat)
    rows = [
        (
            "small cell",
            f"{t_call * 1e3:.1f} ms",
            f"{t_magic * 1e3:.1f} ms",
            f"{t_magic / t_call:.2f}",
        )
    ]

    @eugo.hpc.distribute
    def read_size(data: Any) -> int:
        return int(data.nbytes)

    for size in (1_000, 100_000, 10_000_000, 100_000_000):
        shell.user_ns["payload"] = np.ones(size, dtype=np.uint8)

        # size bound as a default: each closure checks the payload of its own iteration
        def magic_ship(size: int = size) -> None:
            ok = shell.run_cell(
                "%%distribute\nn = int(payload.nbytes)\n", store_history=False, silent=True
            )
            assert ok.success and shell.user_ns["n"] == size

        def put_ship(size: int = size) -> None:
            ref = eugo.hpc.put(shell.user_ns["payload"])
            assert eugo.hpc.get(read_size(ref)) == size

        reps = 10 if size >= 10_000_000 else 30
        t_m, t_p = _median_time(magic_ship, reps), _median_time(put_ship, reps)
        label = f"ship {size / 1e6:g} MB" if size >= 1_000_000 else f"ship {size / 1e3:g} KB"
        rows.append((label, f"{t_p * 1e3:.1f} ms", f"{t_m * 1e3:.1f} ms", f"{t_m / t_p:.2f}"))

    header = ("case", "plain (@distribute / put)", "%%distribute", "ratio")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(4)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    print(f"\nsmall-cell ratio target <= 1.3: {'met' if t_magic / t_call <= 1.3 else 'NOT met'}")
    eugo.hpc.shutdown()


if __name__ == "__main__":
    sys.exit(main())
