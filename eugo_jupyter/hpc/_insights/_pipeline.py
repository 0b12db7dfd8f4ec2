"""Findings about overlapping work with waiting: results awaited all at once, then processed
one by one while the workers sat idle (Ray's "pipeline data processing" tip). Pure functions
over a recorded run's model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import Finding, finding

#: Thresholds, with wide margins so that noise on a busy machine does not raise alarms.
ALL_AT_ONCE_MIN_FUTURES = 4  # one get on at least this many calls...
ALL_AT_ONCE_SPREAD = 0.3  # ...whose results finished over this share of the get's wait...
ALL_AT_ONCE_MIN_SPREAD_S = 0.1
ALL_AT_ONCE_AFTER = 0.2  # ...then this share of the run with no call running (the processing)


def all_at_once(model: Mapping[str, Any]) -> list[Finding]:
    """One get on many calls that finished at very different times, followed by a stretch in
    which the notebook worked and no call ran: ``as_completed`` would have overlapped them."""
    tasks = model["tasks"]
    duration = float(model.get("duration") or 0.0)
    starts = sorted(t["start"] for t in tasks if t.get("start") is not None)
    out: list[Finding] = []
    said: set[str] = set()
    for get in model["gets"]:
        ids = [i for i in get["futures"] if i is not None and i < len(tasks)]
        ends = [tasks[i]["end"] for i in ids if tasks[i].get("end") is not None]
        if len(ends) < ALL_AT_ONCE_MIN_FUTURES or duration <= 0:
            continue
        wait = get["end"] - get["start"]
        spread = max(ends) - min(ends)
        following = [s for s in starts if s >= get["end"]]
        idle_after = (following[0] if following else duration) - get["end"]
        if (
            spread < ALL_AT_ONCE_MIN_SPREAD_S
            or spread < ALL_AT_ONCE_SPREAD * wait
            or idle_after < ALL_AT_ONCE_AFTER * duration
        ):
            continue
        name = str(tasks[ids[0]]["function"])
        if name in said:
            continue
        said.add(name)
        out.append(
            finding(
                "all_at_once",
                name,
                f"One get waited for all {len(ends)} {name} results; they finished over "
                f"{spread:.2f} s, and then the notebook worked {idle_after:.2f} s with no "
                "call running: the first results waited for the last, and the workers for "
                "the notebook.",
                "Process each result as it finishes: for fut in eugo.hpc.as_completed(futures): "
                "handle(eugo.hpc.get(fut)), so the processing overlaps the calls still running.",
            )
        )
    return out
