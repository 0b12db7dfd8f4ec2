"""Right-sizing: each function's CPU time against its wall time and its ``num_cpus``.

- ``cpu_overrequest``: a function asking for 2 CPUs or more used under half of them on average
  (CPU seconds of the worker process / wall seconds of the body);
- ``cpu_underrequest``: its threads used half again as many cores as it asked for, so they
  contend with the other tasks scheduled on those cores.

Well-sized functions, and functions too short to judge (under 0.2 s of bodies), stay silent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ._base import Finding, by_function, finding, finished

__all__ = ["cpu_sizing"]

#: Seconds of bodies a function needs before its CPU use is judged.
MIN_BUSY_S = 0.2


def cpu_sizing(model: Mapping[str, Any]) -> list[Finding]:
    """``cpu_overrequest`` and ``cpu_underrequest`` findings, each with the options to use.

    >>> task = {"function": "f", "start": 0.0, "end": 1.0, "cpu_s": 1.1, "request": {"CPU": 8}}
    >>> [f["message"] for f in cpu_sizing({"tasks": [task]})]
    ['f asked for 8 CPUs per call and used 1.1 on average.']
    """
    found: list[Finding] = []
    measured = [t for t in finished(model.get("tasks", [])) if t.get("cpu_s") is not None]
    for name, tasks in by_function(measured).items():
        wall = sum(t["end"] - t["start"] for t in tasks)
        if wall < MIN_BUSY_S:
            continue
        used = sum(t["cpu_s"] for t in tasks) / wall
        asked = max(float(t["request"].get("CPU", 1.0)) for t in tasks)
        if asked >= 2 and used < asked / 2:
            right = max(1, math.ceil(used * 1.25))
            found.append(
                finding(
                    "cpu_overrequest",
                    name,
                    f"{name} asked for {asked:g} CPUs per call and used {used:.1f} on average.",
                    f"{name}.options(num_cpus={right}): the other CPUs then run other calls.",
                )
            )
        elif used > max(asked * 1.5, asked + 0.5):
            right = math.ceil(used)
            found.append(
                finding(
                    "cpu_underrequest",
                    name,
                    f"{name} asked for {asked:g} CPU(s) per call but its threads used "
                    f"{used:.1f} on average, contending with other calls for the same cores.",
                    f"{name}.options(num_cpus={right}), or cap its threads to num_cpus.",
                )
            )
    return found
