"""What ``bench_slurm.py`` and ``bench_gridengine.py`` share: the Manager's launch, timed to
"running" through its client, and the table and results file of the comparison."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eugo_jupyter.server.client import ManagerClient


def eugo_start(client: ManagerClient, body: dict[str, Any]) -> float:
    """Seconds from ``POST /eugo/clusters`` to "running"; the cluster is shut down after."""
    start = time.perf_counter()
    model = client.launch(body)
    # The client's own wait: it raises with the card's sentence on an error the server calls final.
    client.wait_until_running(model["id"], poll=0.05)
    elapsed = time.perf_counter() - start
    client.shutdown(model["id"])
    return elapsed


def alternate(
    repeats: int, other: Callable[[int], float | None], eugo: Callable[[], float], label: str
) -> tuple[list[float], list[float], int]:
    """``other(run)`` then ``eugo()``, ``repeats`` times, to share the machine's noise: eugo's
    times, the other way's, and how many of its runs never had two nodes (None)."""
    ours: list[float] = []
    theirs: list[float] = []
    failed = 0
    for run in range(repeats):
        took = other(run)
        ours.append(eugo())
        if took is None:
            failed += 1
        else:
            theirs.append(took)
        print(f"{label} {took or float('nan'):.1f} s, eugo {ours[-1]:.1f} s", flush=True)
    return ours, theirs, failed


def report(name: str, label: str, eugo: list[float], other: list[float], failed: int) -> None:
    """Print the Markdown table (median and best, eugo against ``label``) and write
    ``results/<name>.json``; ``failed``: the runs of the other way that never had two nodes."""
    repeats = len(eugo)
    e, o = statistics.median(eugo), statistics.median(other)
    print(f"\n| measure | eugo manager | {label} | ratio |\n| --- | --- | --- | --- |")
    print(f"| launch to running, 2 nodes (median of {repeats}) | {e:.1f} s | {o:.1f} s "
          f"| {e / o:.2f} |")  # fmt: skip
    print(f"| best of {repeats} | {min(eugo):.1f} s | {min(other):.1f} s "
          f"| {min(eugo) / min(other):.2f} |")  # fmt: skip
    if failed:
        print(
            f"\n{label[0].upper() + label[1:]} never had two nodes in {failed} of {repeats} runs."
        )
    results = Path(__file__).with_name("results")
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(
        json.dumps({"other_s": other, "eugo_s": eugo, "other_failed": failed, "other": label})
    )
