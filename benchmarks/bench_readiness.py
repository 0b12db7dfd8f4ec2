"""How close is ``eugo.hpc.readiness``'s prediction to the ``map`` run it predicts?

For a grid of per-item costs (0.1, 1, 10, 100 ms of busy work) and item counts, plus items that
carry large arguments (1 MB and 10 MB each, so that shipping data matters: the first two share
one payload, which a batch pickles once; the last two are distinct per item, so every batch
ships all of its bytes), on one node and on a
two-node cluster (``ray.cluster_utils``), it asks readiness for a prediction, then runs the same
``eugo.hpc.map`` and measures it. Prints predicted against measured time per cell, and the error.
Targets: within 20% on the CPU-only cells, 30% on the data-heavy ones.

    python benchmarks/bench_readiness.py            # both clusters
    python benchmarks/bench_readiness.py --one-node
    python benchmarks/bench_readiness.py --cells "MB at"   # only the cells whose label has it
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Callable
from typing import Any

import eugo_jupyter as eugo
from eugo_jupyter._raystate import enable_token_auth

#: (label, per-item seconds, items, bytes per item, distinct payload per item)
GRID = [
    ("0.1 ms", 0.0001, 4000, 0, False),
    ("1 ms", 0.001, 1000, 0, False),
    ("10 ms", 0.01, 200, 0, False),
    ("100 ms", 0.1, 24, 0, False),
    ("100 ms, few", 0.1, 8, 0, False),
    ("1 ms + 1 MB arg", 0.001, 60, 1_000_000, False),
    ("10 ms + 10 MB arg", 0.01, 12, 10_000_000, False),
    ("400 × 1 MB at 8 ms", 0.008, 400, 1_000_000, True),
    ("80 × 10 MB at 8 ms", 0.008, 80, 10_000_000, True),
]

#: Object store per node of the two-node cluster.
STORE_BYTES = 2 << 30


def spin(item: Any) -> int:
    """Busy work for the item's cost (wall time, so the cost holds on a shared machine)."""
    cost, payload = item
    end = time.perf_counter() + cost
    while time.perf_counter() < end:
        pass
    return len(payload)


def make_items(cost: float, count: int, size: int, distinct: bool) -> list[tuple[float, bytes]]:
    """``count`` items of ``cost`` seconds carrying ``size`` bytes: one payload for all, or a
    distinct one each (random bytes, so nothing is shared or compressible)."""
    if not distinct:
        payload = bytes(size)
        return [(cost, payload) for _ in range(count)]
    import numpy as np

    return [(cost, np.random.default_rng(i).bytes(size)) for i in range(count)]


def cells(grid: list[tuple[str, float, int, int, bool]]) -> list[dict[str, Any]]:
    rows = []
    for label, cost, count, size, distinct in grid:
        items = make_items(cost, count, size, distinct)
        report = eugo.hpc.readiness(spin, items)
        predicted = report.prediction.parallel_s
        began = time.perf_counter()
        eugo.hpc.map(spin, items, progress=False)
        measured = time.perf_counter() - began
        del items  # 800 MB for the largest cell: not kept across cells
        rows.append(
            {
                "cell": label,
                "items": count,
                "slots": report.measurements.slots,
                "serial": report.prediction.serial_s,
                "predicted": predicted,
                "measured": measured,
                "error": (predicted - measured) / measured,
                "target": 0.3 if size else 0.2,
            }
        )
        m = report.measurements
        shipping = ""
        if m.per_byte_s:  # what readiness measured per MB shipped: notebook idle, busy, worker
            busy = m.per_byte_s if m.busy_per_byte_s is None else m.busy_per_byte_s
            shipping = (
                f"; ms per MB: put {m.per_byte_s * 1e9:.2f}, busy {busy * 1e9:.2f}, "
                f"read {m.worker_per_byte_s * 1e9:.2f}"
            )
        print(
            f"  {label}: predicted {predicted:.2f} s, measured {measured:.2f} s "
            f"({rows[-1]['error']:+.0%}){shipping}",
            flush=True,
        )
    return rows


def one_node(grid: list[tuple[str, float, int, int, bool]]) -> list[dict[str, Any]]:
    eugo.hpc.init(num_cpus=2)
    try:
        return cells(grid)
    finally:
        eugo.hpc.shutdown()


def two_nodes(grid: list[tuple[str, float, int, int, bool]]) -> list[dict[str, Any]]:
    from ray.cluster_utils import Cluster

    enable_token_auth()
    # ray.cluster_utils gives each node a 150 MiB object store; map's batches in flight of the
    # data-heavy cells (six of up to 50 MB) would spill to disk, which no real node does at
    # that size: give each node a store of a small real one
    store = {"object_store_memory": STORE_BYTES}
    # a free dashboard port: another Ray on this machine may hold Ray's default one
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dashboard_port = sock.getsockname()[1]
    head = {"num_cpus": 1, "dashboard_host": "127.0.0.1", "dashboard_port": dashboard_port,
            **store}  # fmt: skip
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        cluster.add_node(num_cpus=1, **store)
        cluster.wait_for_nodes()
        eugo.hpc.init(address=cluster.address)
        return cells(grid)
    finally:
        eugo.hpc.shutdown()
        cluster.shutdown()


def table(name: str, rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{name}:",
        "",
        "| cell | items | slots | serial (s) | predicted (s) | measured (s) | error | in target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ok = "yes" if abs(r["error"]) <= r["target"] else f"no (±{r['target']:.0%})"
        lines.append(
            f"| {r['cell']} | {r['items']} | {r['slots']} | {r['serial']:.2f} "
            f"| {r['predicted']:.2f} | {r['measured']:.2f} | {r['error']:+.0%} | {ok} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-node", action="store_true", help="skip the two-node cluster")
    parser.add_argument("--two-nodes", action="store_true", help="skip the one-node cluster")
    parser.add_argument("--cells", default="", help="only the cells whose label contains this")
    args = parser.parse_args()
    grid = [cell for cell in GRID if args.cells in cell[0]]
    Run = Callable[[list[tuple[str, float, int, int, bool]]], list[dict[str, Any]]]
    runs: list[tuple[str, Run]] = [] if args.two_nodes else [("one node, 2 CPUs", one_node)]
    if not args.one_node:
        runs.append(("two nodes, 1 CPU each", two_nodes))
    out = []
    for name, run in runs:
        print(f"{name} ...", flush=True)
        out.append(table(name, run(grid)))
    print("\n\n".join(out))


if __name__ == "__main__":
    main()
