"""Findings about when calls ran: waiting in the wrong place, tasks too small or too uneven,
and the ordering of gets. Pure functions over a recorded run's model.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..._feasibility import describe_request
from ._base import (
    Finding,
    FunctionStats,
    Task,
    by_function,
    finding,
    finished,
    peak_concurrency,
    percentile,
)

#: Thresholds, chosen with wide margins so that noise on a busy machine does not raise alarms.
BLOCKING_MIN_CYCLES = 3  # submit-then-get-then-submit cycles before it is reported
TINY_TASK_S = 0.010  # a median task shorter than this is dominated by ~1 ms of overhead
TINY_MIN_TASKS = 20
STRAGGLER_RATIO = 5.0  # a task this many times the median...
STRAGGLER_MIN_EXTRA_S = 0.1  # ...and at least this much longer
STRAGGLER_MIN_TASKS = 5
TAIL_FRACTION = 0.3  # the tail (fewer tasks running than at peak) spans this share of the run
TAIL_MIN_S = 0.2
TAIL_IDLE_SHARE = 0.2  # ...and left this share of the fan-out's capacity (width x span) idle
TAIL_UNEVEN = 2.0  # ...because the tasks still running were this many times the median
IN_ORDER_MIN_GETS = 2  # gets that blocked while a later result was ready...
IN_ORDER_WASTED_SHARE = 0.1  # ...holding finished results back for this share of the run


def _tail(tasks: Sequence[Task]) -> tuple[float, int]:
    """Seconds from the last moment the fan-out ran at its peak width to its end, and that peak."""
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    peak = peak_concurrency(tasks)
    running = 0
    last_drop = events[0][0] if events else 0.0
    for when, step in events:
        before = running
        running += step
        if before == peak and running < peak:
            last_drop = when
    end = max(t["end"] for t in tasks)
    return end - last_drop, peak


def function_stats(model: Mapping[str, Any]) -> list[FunctionStats]:
    """Per function: task count, durations, speedup over one-after-another, utilisation, args."""
    cpus = float(model.get("cluster", {}).get("CPU", 0.0)) or 1.0
    rows: list[FunctionStats] = []
    for name, tasks in by_function(model["tasks"]).items():
        done = finished(tasks)
        durations = sorted(t["end"] - t["start"] for t in done)
        busy = sum(durations)
        span = (max(t["end"] for t in done) - min(t["submit"] for t in done)) if done else 0.0
        cpu_seconds = sum((t["end"] - t["start"]) * t["request"].get("CPU", 0.0) for t in done)
        sizes = sorted(t["arg_bytes"] for t in tasks)
        rows.append(
            {
                "function": name,
                "tasks": len(tasks),
                "finished": len(done),
                "failed": sum(1 for t in tasks if t.get("status") == "failed"),
                "median_s": percentile(durations, 0.5) if durations else None,
                "p95_s": percentile(durations, 0.95) if durations else None,
                "max_s": durations[-1] if durations else None,
                "busy_s": busy,
                "span_s": span,
                "speedup": busy / span if span > 0 else None,
                "utilisation": cpu_seconds / (span * cpus) if span > 0 else None,
                "workers": len({t.get("worker") for t in done}),
                "peak_parallel": peak_concurrency(done) if done else 0,
                "arg_bytes_median": percentile(sizes, 0.5) if sizes else 0,
                "arg_bytes_max": sizes[-1] if sizes else 0,
                "asks": describe_request(tasks[0]["request"]) if tasks[0]["request"] else "nothing",
            }
        )
    return rows


def _blocked(task: Task, get: Mapping[str, Any]) -> bool:
    """The get started before the task's body had finished: it waited for the work itself."""
    return task.get("end") is None or task["end"] > get["start"]


def blocking_too_early(model: Mapping[str, Any]) -> list[Finding]:
    """A get on the call just submitted, and only then the next call: a loop made serial.

    Decided by the structure (each get waits on a fresh future while the loop keeps
    submitting), not by how long a get took, so fast tasks on an idle machine count too.
    """
    tasks = model["tasks"]
    submits: dict[str, list[float]] = defaultdict(list)
    for task in tasks:
        submits[task["function"]].append(task["submit"])
    for times in submits.values():
        times.sort()
    cycles: dict[str, int] = defaultdict(int)
    blocked: dict[str, float] = defaultdict(float)
    involved: dict[str, list[Task]] = defaultdict(list)
    previous_end = -math.inf
    for get in sorted(model["gets"], key=lambda g: g["start"]):
        futures = get["futures"]
        fresh_since, previous_end = previous_end, get["end"]
        if len(futures) != 1 or futures[0] is None:
            continue
        task = tasks[futures[0]]
        if task["submit"] < fresh_since or not _blocked(task, get):
            continue  # an older future, or one already done: this get did not hold the loop
        times = submits[task["function"]]
        if bisect.bisect_left(times, get["end"]) < len(times):  # more calls came after it
            cycles[task["function"]] += 1
            blocked[task["function"]] += get["end"] - get["start"]
            involved[task["function"]].append(task)
    out = []
    cpus = float(model.get("cluster", {}).get("CPU", 0.0))
    for name, count in cycles.items():
        ran = finished(involved[name])
        peak = peak_concurrency(ran) if ran else 1
        # Calls of one actor run one at a time whatever the driver does: the width to lose is
        # the number of actors called, for tasks the CPUs.
        actors = {t["worker"] for t in ran if t.get("kind") == "actor method"}
        width_possible = len(actors) if actors else cpus
        if count < BLOCKING_MIN_CYCLES or peak >= min(width_possible, count):
            continue  # too few, or the calls overlapped anyway: nothing was lost
        width = "one at a time" if peak <= 1 else f"at most {peak} at once"
        out.append(
            finding(
                "blocking_too_early",
                name,
                f"The driver called get on one {name} future at a time and submitted the next "
                f"call only after each result came back ({count} times, {blocked[name]:.2f} s "
                f"spent blocked), so those calls ran {width} on {cpus:g} CPUs.",
                f"Submit every call first, then get the results together: "
                f"futures = [{name}(x) for x in items]; results = eugo.hpc.get(futures) "
                f"(or eugo.hpc.map({name}, items)).",
            )
        )
    return out


def in_order(model: Mapping[str, Any]) -> list[Finding]:
    """Results fetched one by one in submission order while later ones were already done."""
    tasks = model["tasks"]
    got_alone: dict[int, float] = {}
    for get in model["gets"]:
        if len(get["futures"]) == 1 and get["futures"][0] is not None:
            got_alone.setdefault(get["futures"][0], get["start"])
    flagged: dict[str, list[float]] = defaultdict(list)
    for get in model["gets"]:
        if len(get["futures"]) != 1 or get["futures"][0] is None:
            continue
        index = get["futures"][0]
        task = tasks[index]
        if task.get("end") is None or not _blocked(task, get):
            continue
        later = [
            t["end"]
            for t in tasks[index + 1 :]
            if t["function"] == task["function"]
            and t.get("end") is not None
            and t["end"] < task["end"]
            and got_alone.get(t["id"], -math.inf) > get["start"]
        ]
        if later:  # a later result sat finished while the driver waited on this one
            flagged[task["function"]].append(task["end"] - min(later))
    out = []
    duration = float(model.get("duration") or 0.0)
    for name, wasted in flagged.items():
        if len(wasted) < IN_ORDER_MIN_GETS or sum(wasted) < IN_ORDER_WASTED_SHARE * duration:
            continue
        out.append(
            finding(
                "in_order_processing",
                name,
                f"The driver fetched {name} results one by one in the order it submitted them; "
                f"{len(wasted)} times it blocked on a slow call while later ones had already "
                f"finished, and those results waited {sum(wasted):.2f} s in total to be "
                "processed.",
                "Process results as they finish: for fut in eugo.hpc.as_completed(futures): "
                "handle(eugo.hpc.get(fut)) (or eugo.hpc.wait(futures, num_returns=1)), so "
                "processing overlaps with the calls still running.",
            )
        )
    return out


def tiny_tasks(stats: Sequence[FunctionStats]) -> list[Finding]:
    out = []
    for row in stats:
        median = row["median_s"]
        if row["finished"] < TINY_MIN_TASKS or median is None or median >= TINY_TASK_S:
            continue
        name = row["function"]
        speed = f"{row['speedup']:.2f}×" if row["speedup"] is not None else "no"
        out.append(
            finding(
                "tiny_tasks",
                name,
                f"{row['finished']} tasks of {name} ran a median of {median * 1e3:.3g} ms each; "
                f"sending a task and its result back costs about a millisecond, so overhead "
                f"rivals the work ({row['busy_s']:.2f} s of task bodies took "
                f"{row['span_s']:.2f} s, {speed} speedup).",
                f"Give each task more work: eugo.hpc.map({name}, items) groups items into tasks "
                "of tens of milliseconds, or pass a list of items per call.",
            )
        )
    return out


def backup_saving(worst: Task, median: float, others_end: float) -> float:
    """Seconds a backup copy (``map(..., backups=True)``: started once the unit ran 1.5× the
    median, taking the median itself) would have cut from the run's end.

    >>> backup_saving({"start": 0.0, "end": 10.0}, 1.0, 3.0)
    7.0
    """
    from .._backups import MIN_EXTRA_S, MULTIPLIER

    copy_end = worst["start"] + max(MULTIPLIER * median, median + MIN_EXTRA_S) + median
    return max(0.0, worst["end"] - max(others_end, copy_end))


def stragglers(model: Mapping[str, Any]) -> tuple[list[Finding], set[str]]:
    out, names = [], set()
    for name, tasks in by_function(finished(model["tasks"])).items():
        if len(tasks) < STRAGGLER_MIN_TASKS:
            continue
        durations = sorted(t["end"] - t["start"] for t in tasks)
        median = percentile(durations, 0.5)
        slow = [
            t
            for t in tasks
            if (t["end"] - t["start"]) > STRAGGLER_RATIO * median
            and (t["end"] - t["start"]) - median > STRAGGLER_MIN_EXTRA_S
        ]
        if not slow:
            continue
        worst = max(slow, key=lambda t: t["end"] - t["start"])
        took = worst["end"] - worst["start"]
        last_end = max(t["end"] for t in tasks)
        others_end = max((t["end"] for t in tasks if t is not worst), default=last_end)
        waited = max(0.0, worst["end"] - others_end) if worst["end"] == last_end else 0.0
        tail = (
            f"; the run waited {waited:.2f} s on it after every other task was done"
            if waited > 0
            else ""
        )
        more = f" ({len(slow)} tasks were this slow)" if len(slow) > 1 else ""
        names.add(name)
        advice = (
            "Look at what makes that input slow; split it into smaller pieces, or submit the "
            "slowest calls first so they overlap with the rest."
        )
        saved = backup_saving(worst, median, others_end) if waited > 0 else 0.0
        if name.startswith(("map(", "imap(")) and saved > STRAGGLER_MIN_EXTRA_S:
            advice += (
                f" If a slow node or worker is the cause, eugo.hpc.map(..., backups=True) would "
                f"have started a copy of it on an idle slot after 1.5× the median and ended "
                f"the run about {saved:.2f} s sooner (the function must be safe to run twice)."
            )
        out.append(
            finding(
                "straggler",
                name,
                f"{worst['call']} took {took:.2f} s, {took / median:.0f}× the median "
                f"{median:.3f} s of its {len(tasks)} peers{more}{tail}.",
                advice,
            )
        )
    return out, names


def _tail_cost(tasks: Sequence[Task], begin: float, peak: int) -> tuple[float, float]:
    """Idle capacity (task-slot seconds) from ``begin`` to the end, and the longest task then."""
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    running, idle, last = 0, 0.0, None
    for when, step in events:
        if last is not None and when > begin:
            idle += (peak - running) * (when - max(last, begin))
        running += step
        last = when
    longest = max((t["end"] - t["start"] for t in tasks if t["end"] > begin), default=0.0)
    return idle, longest


def long_tails(model: Mapping[str, Any], skip: set[str]) -> list[Finding]:
    """The end of a fan-out ran narrow because its last tasks were long: worth it only when
    that idled a real share of the capacity and splitting or reordering would shorten it (equal
    tasks that do not divide evenly among the workers are not a tail to fix)."""
    out = []
    for name, tasks in by_function(finished(model["tasks"])).items():
        if name in skip or len(tasks) < 2:
            continue
        tail, peak = _tail(tasks)
        first = min(t["start"] for t in tasks)
        span = max(t["end"] for t in tasks) - first
        if peak < 2 or span <= 0 or tail < TAIL_MIN_S or tail < TAIL_FRACTION * span:
            continue
        idle, longest = _tail_cost(tasks, first + span - tail, peak)
        median = percentile(sorted(t["end"] - t["start"] for t in tasks), 0.5)
        if idle < TAIL_IDLE_SHARE * peak * span or longest < max(TAIL_UNEVEN * median, tail / 2):
            continue
        out.append(
            finding(
                "long_tail",
                name,
                f"For the last {tail:.2f} s of {span:.2f} s, fewer than {peak} tasks of {name} "
                f"were running while {peak} could: the fan-out ended on its longest calls "
                f"({longest:.2f} s against a median of {median:.2f} s), leaving "
                f"{idle / (peak * span):.0%} of the workers' time idle.",
                f"Submit the longest calls first, or split the work into more, smaller tasks so "
                f"the last ones are short (eugo.hpc.map({name}, items) shrinks its batches near "
                "the end).",
            )
        )
    return out
