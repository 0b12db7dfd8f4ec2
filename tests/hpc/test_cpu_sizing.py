"""Right-sizing findings: a function's CPU use against its num_cpus (real Ray for the first)."""

from __future__ import annotations

import re
import time

import eugo_jupyter as eugo
from eugo_jupyter.hpc._insights._cpus import cpu_sizing


def test_a_sleeping_two_cpu_task_is_overrequested(ray_local: object) -> None:
    @eugo.hpc.distribute(num_cpus=2)
    def waits(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    with eugo.hpc.profile() as run:
        eugo.hpc.get([waits(0.3), waits(0.3)])
    found = [f for f in run.report().findings if f["kind"] == "cpu_overrequest"]
    assert len(found) == 1, run.report().findings
    # A sleep uses next to no CPU; how little depends on the machine's load (0.0 idle, 0.1 on a
    # busy CI runner), so the figure is read, not matched.
    message = found[0]["message"]
    used = re.search(r"asked for 2 CPUs per call and used (\d+\.\d) on average", message)
    assert used is not None and float(used.group(1)) < 1.0, message
    assert "waits.options(num_cpus=1)" in found[0]["fix"]


def _task(cpu_s: float, asked: float) -> dict:
    return {"function": "f", "start": 0.0, "end": 1.0, "cpu_s": cpu_s, "request": {"CPU": asked}}


def test_threads_beyond_the_request_are_underrequested_and_well_sized_stays_silent() -> None:
    # CPU seconds per call as a worker measures them (time.process_time over the body).
    over = cpu_sizing({"tasks": [_task(3.6, 1)]})
    assert [f["kind"] for f in over] == ["cpu_underrequest"]
    assert "f.options(num_cpus=4)" in over[0]["fix"]
    assert cpu_sizing({"tasks": [_task(1.9, 2), _task(0.95, 1)]}) == []
    found = cpu_sizing({"tasks": [_task(1.1, 8)]})
    assert found[0]["fix"].startswith("f.options(num_cpus=2)")
