"""Launch to "running" with two nodes on Grid Engine: the EugoHPC Manager against the same job
scripts submitted by hand.

Starts a real private Grid Engine cell on this machine (qmaster and execd: see
tests/fixtures/gridengine.py) and a `jupyter server` with the extension, then, alternating to
share the machine's noise:

* by hand: the very job scripts the manager's preview shows (head and worker), written to a
  folder and submitted with the same ``qsub`` argument lists, timed until the head's address
  file is there and both nodes are alive in Ray;
* eugo: ``POST /eugo/clusters`` with ``{"kind": "gridengine", "gridengine": {"nodes": 2}}``,
  timed until ``GET /eugo/clusters/{id}`` says "running" (both nodes alive).

What the ratio measures is the manager's own cost (validation, records, the qstat and Ray
polling, the HTTP round trips), since the jobs do the same work in both.

    python benchmarks/bench_gridengine.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eugo_jupyter import _processes as processes
from eugo_jupyter.server import monitor
from eugo_jupyter.server.backends.gridengine import GridEngineBackend

# The benchmarks share the tests' helpers: a real Grid Engine and a `jupyter server` process.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from batch_launch import alternate, eugo_start, report

from tests.fixtures.gridengine import GridEngine, gridengine_cell
from tests.fixtures.jupyter import jupyter_server

FIELDS = {"nodes": 2, "walltime": "00:20:00"}
BODY = {"kind": "gridengine", "name": "bench", "gridengine": FIELDS}


def _alive_nodes(address: str) -> int:
    try:
        return sum(n["alive"] for n in monitor.read(address, None, 5.0)["nodes"])
    except Exception:  # noqa: BLE001 - not up yet
        return 0


def _gone(marks: list[str], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while any(m in processes.cmdline(pid) for pid in processes.table() for m in marks):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of {marks} are still running")
        time.sleep(0.2)


def by_hand(cell: GridEngine, root: Path, run: int) -> float | None:
    """Seconds from qsub of the two scripts to two alive nodes (None: not within 5 min)."""
    backend = GridEngineBackend(str(root / "by-hand"))
    spec = backend.validate({"kind": "gridengine", "gridengine": FIELDS})
    folder = backend.root / f"run-{run}"
    folder.mkdir(parents=True)
    for role in ("head", "worker"):
        Path(backend.script_path(str(folder), role)).write_text(backend.script(spec.fields, role))
    start = time.perf_counter()
    jobs = [
        subprocess.run(
            backend.submit_command(str(folder), folder.name, role),
            env=cell.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()  # fmt: skip
        for role in ("head", "worker")
    ]
    try:
        deadline = time.monotonic() + 300
        head = folder / "head"
        while not head.exists() or _alive_nodes(head.read_text().split()[0]) < 2:
            if time.monotonic() > deadline:
                print(f"the hand-submitted jobs {jobs} had no two nodes after 5 min")
                return None
            time.sleep(0.05)
        return time.perf_counter() - start
    finally:
        subprocess.run(["qdel", *jobs], env=cell.env, capture_output=True)
        _gone([backend.temp_mark(j) for j in jobs])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="eugo-bench-sge-"))
    with gridengine_cell() as cell:
        server_args = (f"--GridEngineBackend.shared_dir={root / 'shared'}",)
        (root / "runtime").mkdir()
        os.environ.update(cell.variables)  # the hand-written runs' monitor reads need nothing else
        with jupyter_server(root / "runtime", server_args, cell.variables) as (client, _):
            eugo, hand, failed = alternate(
                args.repeats, lambda run: by_hand(cell, root, run),
                lambda: eugo_start(client, BODY), "by hand",
            )  # fmt: skip

    report("bench_gridengine", "same scripts by hand", eugo, hand, failed)


if __name__ == "__main__":
    main()
