"""What ``bench_slurm.py`` and ``bench_gridengine.py`` share: the Manager's launch, timed to
"running" through its client, and the table and results file of the comparison."""

from __future__ import annotations

import json
import statistics
import time
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
