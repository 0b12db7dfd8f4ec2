"""Run insights: statistics and plain-language findings computed from a recorded run's model.

Pure functions over plain data (the model of :meth:`eugo_jupyter.hpc._profile.Run.model`), so the
panel can show the same findings. A finding is ``{"kind", "function", "message", "fix"}``; kinds:

- ``blocking_too_early``: ``get`` on one unfinished future at a time in a loop that keeps
  submitting, so calls run one after another;
- ``tiny_tasks``: tasks so short that scheduling overhead rivals the work;
- ``straggler``: one task far slower than its peers;
- ``long_tail``: at the end of a fan-out, workers sit idle while the last tasks finish;
- ``large_argument``: the same large object serialized into many calls;
- ``gpu_unused``: GPU requested but never used (from the GPU audit records);
- ``cpu_behind_gpu``: CPU-only tasks waiting on GPU tasks that wait for a device, while CPUs idle.

The GPU audit records accepted are dicts ``{"function": str, "requested_gpus": float,
"used_gpu": bool, "seconds": float}`` (other keys are ignored).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from .._units import format_bytes
from ._feasibility import describe_request

__all__ = ["analyze", "findings", "function_stats"]

#: Thresholds, chosen with wide margins so that noise on a busy machine does not raise alarms.
BLOCKING_MIN_CYCLES = 3  # get-then-submit cycles before "blocking too early" is reported
BLOCKING_MIN_WAIT = 1e-3  # a get that returned faster than this did not block
TINY_TASK_S = 0.010  # a median task shorter than this is dominated by ~1 ms of overhead
TINY_MIN_TASKS = 20
STRAGGLER_RATIO = 5.0  # a task this many times the median...
STRAGGLER_MIN_EXTRA_S = 0.1  # ...and at least this much longer
STRAGGLER_MIN_TASKS = 5
TAIL_FRACTION = 0.3  # the tail (fewer tasks running than at peak) spans this share of the run
TAIL_MIN_S = 0.2
LARGE_ARG_BYTES = 1 << 20
LARGE_ARG_MIN_CALLS = 3
GPU_QUEUE_MIN_WAIT_S = 0.5  # a CPU-only task that waited this long to start...
GPU_QUEUE_DEVICE_WAIT_S = 0.25  # ...behind GPU tasks that waited this long for a device
GPU_QUEUE_FREE_SHARE = 0.5  # ...while CPUs were free for this share of its wait


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def _finished(tasks: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in tasks if t.get("start") is not None and t.get("end") is not None]


def _by_function(tasks: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for task in tasks:
        groups[task["function"]].append(task)
    return dict(groups)


def _peak_concurrency(tasks: Sequence[Mapping[str, Any]]) -> int:
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def _tail(tasks: Sequence[Mapping[str, Any]]) -> tuple[float, int]:
    """Seconds from the last moment the fan-out ran at its peak width to its end, and that peak."""
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    peak = _peak_concurrency(tasks)
    running = 0
    last_drop = events[0][0] if events else 0.0
    for when, step in events:
        before = running
        running += step
        if before == peak and running < peak:
            last_drop = when
    end = max(t["end"] for t in tasks)
    return end - last_drop, peak


def function_stats(model: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per function: task count, durations, speedup over one-after-another, utilisation, args."""
    cpus = float(model.get("cluster", {}).get("CPU", 0.0)) or 1.0
    rows = []
    for name, tasks in _by_function(model["tasks"]).items():
        done = _finished(tasks)
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
                "median_s": _percentile(durations, 0.5) if durations else None,
                "p95_s": _percentile(durations, 0.95) if durations else None,
                "max_s": durations[-1] if durations else None,
                "busy_s": busy,
                "span_s": span,
                "speedup": busy / span if span > 0 else None,
                "utilisation": cpu_seconds / (span * cpus) if span > 0 else None,
                "workers": len({t.get("worker") for t in done}),
                "peak_parallel": _peak_concurrency(done) if done else 0,
                "arg_bytes_median": _percentile(sizes, 0.5) if sizes else 0,
                "arg_bytes_max": sizes[-1] if sizes else 0,
                "asks": describe_request(tasks[0]["request"]) if tasks[0]["request"] else "nothing",
            }
        )
    return rows


def _finding(kind: str, function: str, message: str, fix: str) -> dict[str, str]:
    return {"kind": kind, "function": function, "message": message, "fix": fix}


def _blocking_too_early(model: Mapping[str, Any]) -> list[dict[str, str]]:
    tasks = model["tasks"]
    submits: dict[str, list[float]] = defaultdict(list)
    for task in tasks:
        submits[task["function"]].append(task["submit"])
    for times in submits.values():
        times.sort()
    cycles: dict[str, int] = defaultdict(int)
    blocked: dict[str, float] = defaultdict(float)
    involved: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for get in model["gets"]:
        futures = get["futures"]
        if len(futures) != 1 or futures[0] is None:
            continue
        task = tasks[futures[0]]
        waited = get["end"] - get["start"]
        duration = (task["end"] - task["start"]) if task.get("end") is not None else None
        if waited < BLOCKING_MIN_WAIT or (duration is not None and waited < 0.25 * duration):
            continue  # the result was (nearly) ready: this get did not hold anything up
        times = submits[task["function"]]
        if bisect.bisect_left(times, get["end"]) < len(times):  # more calls came after it
            cycles[task["function"]] += 1
            blocked[task["function"]] += waited
            involved[task["function"]].append(task)
    out = []
    cpus = model.get("cluster", {}).get("CPU", 0.0)
    for name, count in cycles.items():
        if count < BLOCKING_MIN_CYCLES:
            continue
        ran = _finished(involved[name])
        peak = _peak_concurrency(ran) if ran else 1
        width = "one at a time" if peak <= 1 else f"at most {peak} at once"
        out.append(
            _finding(
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


def _tiny_tasks(stats: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    out = []
    for row in stats:
        median = row["median_s"]
        if row["finished"] < TINY_MIN_TASKS or median is None or median >= TINY_TASK_S:
            continue
        name = row["function"]
        speed = f"{row['speedup']:.2f}×" if row["speedup"] is not None else "no"
        out.append(
            _finding(
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


def _stragglers(model: Mapping[str, Any]) -> tuple[list[dict[str, str]], set[str]]:
    out, names = [], set()
    for name, tasks in _by_function(_finished(model["tasks"])).items():
        if len(tasks) < STRAGGLER_MIN_TASKS:
            continue
        durations = sorted(t["end"] - t["start"] for t in tasks)
        median = _percentile(durations, 0.5)
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
        tail = f"; the run waited {waited:.2f} s on it after every other task was done" if waited > 0 else ""
        more = f" ({len(slow)} tasks were this slow)" if len(slow) > 1 else ""
        names.add(name)
        out.append(
            _finding(
                "straggler",
                name,
                f"{worst['call']} took {took:.2f} s, {took / median:.0f}× the median "
                f"{median:.3f} s of its {len(tasks)} peers{more}{tail}.",
                "Look at what makes that input slow; split it into smaller pieces, or submit the "
                "slowest calls first so they overlap with the rest.",
            )
        )
    return out, names


def _long_tails(model: Mapping[str, Any], skip: set[str]) -> list[dict[str, str]]:
    out = []
    for name, tasks in _by_function(_finished(model["tasks"])).items():
        if name in skip or len(tasks) < 2:
            continue
        tail, peak = _tail(tasks)
        span = max(t["end"] for t in tasks) - min(t["start"] for t in tasks)
        if peak < 2 or span <= 0 or tail < TAIL_MIN_S or tail < TAIL_FRACTION * span:
            continue
        out.append(
            _finding(
                "long_tail",
                name,
                f"For the last {tail:.2f} s of {span:.2f} s, fewer than {peak} tasks of {name} "
                f"were running while {peak} could: the fan-out ended on a long tail with "
                "workers idle.",
                f"Split the work into more, smaller tasks so the last ones are short "
                f"(eugo.hpc.map({name}, items) shrinks its batches near the end), or submit the "
                "longest calls first.",
            )
        )
    return out


def _large_arguments(model: Mapping[str, Any]) -> list[dict[str, str]]:
    out = []
    for name, tasks in _by_function(model["tasks"]).items():
        seen: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
        for task in tasks:
            for arg in task["args"]:
                if arg.get("key") is not None and arg["bytes"] >= LARGE_ARG_BYTES:
                    seen[arg["key"]].append(arg)
        for args in seen.values():
            if len(args) < LARGE_ARG_MIN_CALLS:
                continue
            arg = args[0]
            size = arg["bytes"]
            out.append(
                _finding(
                    "large_argument",
                    name,
                    f"The same {format_bytes(size)} argument {arg['name']!r} ({arg['type']}) was "
                    f"serialized into {len(args)} calls of {name}: {format_bytes(size * len(args))} "
                    "copied into the object store instead of once.",
                    f"Store it once and pass the future: ref = eugo.hpc.put({arg['name']}), then "
                    f"{name}(ref, ...) (or eugo.hpc.map({name}, items, "
                    f"shared={{{arg['name']!r}: {arg['name']}}})).",
                )
            )
    return out


def _gpu_unused(audit: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in audit:
        if float(record.get("requested_gpus") or 0) > 0:
            groups[str(record.get("function", "?"))].append(record)
    out = []
    for name, records in groups.items():
        idle = [r for r in records if not r.get("used_gpu")]
        if not idle:
            continue
        gpus = max(float(r["requested_gpus"]) for r in idle)
        held = sum(float(r.get("seconds") or 0) * float(r["requested_gpus"]) for r in idle)
        out.append(
            _finding(
                "gpu_unused",
                name,
                f"{len(idle)} of {len(records)} calls of {name} asked for {gpus:g} GPU but never "
                f"used the device; {held:.1f} GPU-seconds were reserved for nothing.",
                f"Drop the request ({name}.options(num_gpus=0)) or move the work onto the GPU "
                "(for torch: tensors and model .to('cuda')); eugo.check() verifies GPU use.",
            )
        )
    return out


class _Usage:
    """CPUs held by recorded tasks over time, as a step function."""

    def __init__(self, tasks: Sequence[Mapping[str, Any]]) -> None:
        deltas: dict[float, float] = defaultdict(float)
        for t in tasks:
            cpu = float(t["request"].get("CPU", 0.0))
            deltas[t["start"]] += cpu
            deltas[t["end"]] -= cpu
        self.times = sorted(deltas)
        self.levels = []
        level = 0.0
        for when in self.times:
            level += deltas[when]
            self.levels.append(level)

    def free_time(self, begin: float, end: float, total: float, need: float) -> float:
        """Seconds within [begin, end] when at least ``need`` CPUs of ``total`` were unused."""
        free = 0.0
        i = bisect.bisect_right(self.times, begin) - 1
        cursor = begin
        while cursor < end:
            level = self.levels[i] if i >= 0 else 0.0
            nxt = self.times[i + 1] if i + 1 < len(self.times) else math.inf
            stop = min(nxt, end)
            if total - level >= need - 1e-9:
                free += stop - cursor
            cursor = stop
            i += 1
        return free


def _cpu_behind_gpu(model: Mapping[str, Any]) -> list[dict[str, str]]:
    tasks = model["tasks"]
    total = float(model.get("cluster", {}).get("CPU", 0.0))
    done = _finished(tasks)
    if not total or not any(t["request"].get("GPU") for t in done):
        return []
    usage = _Usage(done)

    def waited_for_device(index: int) -> bool:
        t = tasks[index]
        return (
            bool(t["request"].get("GPU"))
            and t.get("start") is not None
            and t["start"] - t["submit"] >= GPU_QUEUE_DEVICE_WAIT_S
        )

    flagged: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for t in done:
        if t["request"].get("GPU"):
            continue
        wait = t["start"] - t["submit"]
        if wait < GPU_QUEUE_MIN_WAIT_S or not any(waited_for_device(d) for d in t["deps"]):
            continue
        need = float(t["request"].get("CPU", 0.0))
        if usage.free_time(t["submit"], t["start"], total, need) >= GPU_QUEUE_FREE_SHARE * wait:
            flagged[t["function"]].append(t)
    out = []
    for name, queued in flagged.items():
        waits = sorted(t["start"] - t["submit"] for t in queued)
        gpu_names = sorted({tasks[d]["function"] for t in queued for d in t["deps"] if waited_for_device(d)})
        out.append(
            _finding(
                "cpu_behind_gpu",
                name,
                f"{len(queued)} CPU-only calls of {name} waited a median "
                f"{_percentile(waits, 0.5):.2f} s to start while CPUs sat free: they take the "
                f"futures of {', '.join(gpu_names)}, which were queued for a GPU.",
                f"Keep CPU work off the GPU queue: submit {name} on inputs that do not come "
                "from the GPU tasks, or do that step inside the GPU task; if the GPU tasks fit, "
                "give them a fraction (num_gpus=0.5) so more run at once.",
            )
        )
    return out


def findings(
    model: Mapping[str, Any],
    gpu_audit: Sequence[Mapping[str, Any]] | None = None,
    stats: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, str]]:
    """Every pitfall seen in the run, each with the fix."""
    stats = function_stats(model) if stats is None else stats
    stragglers, straggling = _stragglers(model)
    return [
        *_blocking_too_early(model),
        *_tiny_tasks(stats),
        *stragglers,
        *_long_tails(model, straggling),
        *_large_arguments(model),
        *_gpu_unused(gpu_audit or []),
        *_cpu_behind_gpu(model),
    ]


def analyze(
    model: Mapping[str, Any], gpu_audit: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """``{"summary", "functions", "findings"}`` for a recorded run's model.

    >>> model = {"duration": 1.0, "cluster": {"CPU": 2.0}, "tasks": [], "gets": []}
    >>> analyze(model)["findings"]
    []
    """
    stats = function_stats(model)
    done = _finished(model["tasks"])
    busy = sum(t["end"] - t["start"] for t in done)
    cpu_seconds = sum((t["end"] - t["start"]) * t["request"].get("CPU", 0.0) for t in done)
    duration = float(model.get("duration") or 0.0)
    cpus = float(model.get("cluster", {}).get("CPU", 0.0))
    summary = {
        "tasks": len(model["tasks"]),
        "duration_s": duration,
        "busy_s": busy,
        "speedup": busy / duration if duration > 0 else 0.0,
        "utilisation": cpu_seconds / (duration * cpus) if duration > 0 and cpus else 0.0,
        "cpus": cpus,
        "gets": len(model["gets"]),
    }
    return {"summary": summary, "functions": stats, "findings": findings(model, gpu_audit, stats)}
