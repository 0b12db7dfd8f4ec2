"""Findings about what travels with calls and gets, and about code habits Ray warns against:
large arguments and closures, needless or oversized gets, gets inside tasks and async code,
``put`` results, module globals and functions redefined in a loop; and how GPUs were used
(reserved but never touched, CPU work queued behind them). Pure functions.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..._gpu_use import AuditRecord
from .._static import FIX as GLOBAL_FIX
from .._static import message as global_message
from ._base import Finding, Task, by_function, finding, finished, mb, percentile

LARGE_ARG_BYTES = 1 << 20
LARGE_ARG_MIN_CALLS = 3
LARGE_CLOSURE_BYTES = 1 << 20
GET_MEMORY_SHARE = 0.5  # one get fetching this share of the memory it lands in
REDEFINED_MIN = 3  # definitions of one function name within a run
GPU_QUEUE_MIN_WAIT_S = 0.5  # a CPU-only task that waited this long to start...
GPU_QUEUE_DEVICE_WAIT_S = 0.25  # ...behind GPU tasks that waited this long for a device
GPU_QUEUE_FREE_SHARE = 0.5  # ...while CPUs were free for this share of its wait


def large_arguments(model: Mapping[str, Any]) -> list[Finding]:
    out = []
    for name, tasks in by_function(model["tasks"]).items():
        seen: dict[int, list[Task]] = defaultdict(list)
        for task in tasks:
            for arg in task["args"]:
                if arg.get("key") is not None and arg["bytes"] >= LARGE_ARG_BYTES:
                    seen[arg["key"]].append(arg)
        for args in seen.values():
            if len(args) < LARGE_ARG_MIN_CALLS:
                continue
            arg = args[0]
            size = arg["bytes"] / 1e6
            out.append(
                finding(
                    "large_argument",
                    name,
                    f"The same {size:.1f} MB argument {arg['name']!r} ({arg['type']}) was "
                    f"serialized into {len(args)} calls of {name}: {size * len(args):.0f} MB "
                    "copied into the object store instead of once.",
                    f"Store it once and pass the future: ref = eugo.hpc.put({arg['name']}), then "
                    f"{name}(ref, ...) (or eugo.hpc.map({name}, items, "
                    f"shared={{{arg['name']!r}: {arg['name']}}})).",
                )
            )
    return out


def large_closures(model: Mapping[str, Any]) -> list[Finding]:
    """Functions that carry a large object captured from the notebook."""
    out = []
    for name, tasks in by_function(model["tasks"]).items():
        task = max(tasks, key=lambda t: t.get("function_bytes", 0))
        size = task.get("function_bytes", 0)
        if size < LARGE_CLOSURE_BYTES:
            continue
        captured = [(n, b) for n, b in task.get("captured", []) if b >= LARGE_CLOSURE_BYTES / 4]
        what = ", ".join(f"{n!r} ({mb(b)})" for n, b in captured) or "objects"
        first = captured[0][0] if captured else "data"
        out.append(
            finding(
                "large_closure",
                name,
                f"{name} captures {what} from the notebook, so the function itself is "
                f"{mb(size)}: Ray pickles it into the function's definition and ships it to "
                "every worker that runs it.",
                f"Pass it instead: ref = eugo.hpc.put({first}) once, then {name}(ref, ...) "
                "with the object as a parameter (or load it inside the task).",
            )
        )
    return out


def unnecessary_gets(model: Mapping[str, Any]) -> list[Finding]:
    """A large result fetched with get only to be passed straight into another call."""
    tasks = model["tasks"]
    hits: dict[str, list[tuple[Task, Mapping[str, Any]]]] = defaultdict(list)
    for task in tasks:
        for arg in task["args"]:
            if arg.get("from_get") is not None and arg["bytes"] >= LARGE_ARG_BYTES:
                hits[task["function"]].append((tasks[arg["from_get"]], arg))
    out = []
    for name, pairs in hits.items():
        producer, arg = pairs[0]
        total = sum(a["bytes"] for _, a in pairs)
        out.append(
            finding(
                "unnecessary_get",
                name,
                f"{len(pairs)} result(s) of {producer['function']} ({mb(total)}) were fetched "
                f"into the notebook with get and passed straight back into {name} as "
                f"{arg['name']!r}: each travelled to the driver and back for nothing.",
                f"Pass the future itself: {name}({producer['function']}(...)); Ray hands the "
                "value to the task where it already is, and the notebook never holds it.",
            )
        )
    return out


def oversized_gets(model: Mapping[str, Any]) -> list[Finding]:
    """One get on so many results that together they crowd the memory they land in."""
    limit = float(model.get("memory", {}).get("limit") or 0)
    if not limit:
        return []
    tasks = model["tasks"]
    out = []
    for get in model["gets"]:
        size = get.get("bytes") or 0
        if size < GET_MEMORY_SHARE * limit:
            continue
        names = sorted({tasks[i]["function"] for i in get["futures"] if i is not None})
        name = names[0] if names else "?"
        chunk = max(1, int(len(get["futures"]) * GET_MEMORY_SHARE * limit / size / 2))
        out.append(
            finding(
                "get_too_large",
                name,
                f"One get fetched {len(get['futures'])} results totalling {mb(size)} at once, "
                f"{size / limit:.0%} of the {mb(limit)} they had to fit in (the object store "
                "and free memory of this machine); a little more and the get fails or spills.",
                f"Fetch in chunks and reduce as you go: for i in range(0, len(futures), {chunk}):"
                f" handle(eugo.hpc.get(futures[i:i + {chunk}])) (or eugo.hpc.as_completed).",
            )
        )
    return out


def gets_in_async(model: Mapping[str, Any]) -> list[Finding]:
    """A blocking get made from a coroutine: the whole event loop stopped while it waited."""
    tasks = model["tasks"]
    waits: dict[str, list[float]] = defaultdict(list)
    for get in model["gets"]:
        if get.get("in_async"):
            names = sorted({tasks[i]["function"] for i in get["futures"] if i is not None})
            waits[names[0] if names else "?"].append(get["end"] - get["start"])
    return [
        finding(
            "get_in_async",
            name,
            f"eugo.hpc.get was called {len(w)} time(s) inside async code while its event loop "
            f"was running; the loop, and every other coroutine on it, stood still for "
            f"{sum(w):.2f} s.",
            "Await the future instead: value = await fut (or await asyncio.gather(*futures)); "
            "Ray's futures are awaitable.",
        )
        for name, w in waits.items()
    ]


def returned_puts(model: Mapping[str, Any]) -> list[Finding]:
    """Tasks that return ``put(value)`` instead of the value."""
    out = []
    for name, tasks in by_function(finished(model["tasks"])).items():
        count = sum(1 for t in tasks if t.get("returned_put"))
        if count:
            out.append(
                finding(
                    "returned_put",
                    name,
                    f"{count} call(s) of {name} returned a future made with put() inside the "
                    "task instead of the value: the caller needs two gets, and if the worker "
                    "dies the value is lost with it (Ray cannot rebuild a put).",
                    f"Return the value itself from {name}; Ray stores a task's result in the "
                    "object store already.",
                )
            )
    return out


def nested_gets(model: Mapping[str, Any]) -> list[Finding]:
    """get inside a task on futures it received inside its arguments (a list of futures)."""
    out = []
    for name, tasks in by_function(finished(model["tasks"])).items():
        calls = [t for t in tasks if t.get("nested_gets")]
        if not calls:
            continue
        waited = sum(t.get("nested_get_s", 0.0) for t in calls)
        out.append(
            finding(
                "nested_get",
                name,
                f"{len(calls)} call(s) of {name} called get inside the task on futures that "
                f"came inside their arguments (in a list); each held its worker and CPU while "
                f"it waited ({waited:.2f} s in all).",
                f"Pass the futures as arguments of their own ({name}(*futures) or "
                f"{name}(a=fut)): Ray resolves them before the task starts, without holding a "
                "worker.",
            )
        )
    return out


def global_state(model: Mapping[str, Any]) -> list[Finding]:
    """Tasks and actors that assign a module global, expecting the change to be shared."""
    out = []
    for name, tasks in by_function(model["tasks"]).items():
        writes = tasks[0].get("global_writes") or []
        if writes:
            said = global_message(name, writes) + " Results that depend on it are silently wrong."
            out.append(finding("global_state", name, said, GLOBAL_FIX))
    return out


def stale_globals(model: Mapping[str, Any]) -> list[Finding]:
    """Actors that ran with a global the notebook changed after they were created."""
    out = []
    for seen in model.get("stale_globals") or []:
        actor, name = seen["actor"], seen["name"]
        said = (
            f"The actor {actor} still uses {name} = {seen['actor_value']} (its value when the "
            f"actor was created); the notebook's {name} is now {seen['notebook_value']}."
        )
        fix = (
            f"Pass {name} as an argument to the method, or create the actor again "
            f"({actor}(...)) so that it starts with the new value."
        )
        out.append(finding("stale_global", f"{actor}", said, fix))
    return out


def redefinitions(model: Mapping[str, Any]) -> list[Finding]:
    """The same function or actor class defined again and again (decorated inside a loop)."""
    counts: dict[str, int] = defaultdict(int)
    for task in model["tasks"]:
        owner = task["function"]
        if task.get("kind") == "actor method":
            owner = owner.rsplit(".", 1)[0]  # the class: its methods share its definitions
        counts[owner] = max(counts[owner], int(task.get("definition", 0)) + 1)
    return [
        finding(
            "redefined_in_loop",
            name,
            f"{name} was defined {count} times in this run (decorated inside a loop): each "
            "definition is a new remote function or class that Ray pickles and exports to the "
            "cluster again, and whose workers start cold.",
            f"Define and decorate {name} once, outside the loop, and call it inside.",
        )
        for name, count in counts.items()
        if count >= REDEFINED_MIN
    ]


def gpu_unused(audit: Sequence[AuditRecord]) -> list[Finding]:
    """Calls that reserved a GPU and, by the audit's evidence, never touched it."""
    groups: dict[str, list[AuditRecord]] = defaultdict(list)
    for record in audit:
        if record["num_gpus"] > 0:
            groups[record["function"]].append(record)
    out = []
    for name, records in groups.items():
        idle = [r for r in records if r["used"] is False]  # None: could not tell, not a finding
        if not idle:
            continue
        gpus = max(r["num_gpus"] for r in idle)
        held = sum(r["gpu_seconds"] for r in idle)
        out.append(
            finding(
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

    def __init__(self, tasks: Sequence[Task]) -> None:
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


def cpu_behind_gpu(model: Mapping[str, Any]) -> list[Finding]:
    tasks = model["tasks"]
    total = float(model.get("cluster", {}).get("CPU", 0.0))
    done = finished(tasks)
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

    flagged: dict[str, list[Task]] = defaultdict(list)
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
        gpu_names = sorted(
            {tasks[d]["function"] for t in queued for d in t["deps"] if waited_for_device(d)}
        )
        out.append(
            finding(
                "cpu_behind_gpu",
                name,
                f"{len(queued)} CPU-only calls of {name} waited a median "
                f"{percentile(waits, 0.5):.2f} s to start while CPUs sat free: they take the "
                f"futures of {', '.join(gpu_names)}, which were queued for a GPU.",
                f"Keep CPU work off the GPU queue: submit {name} on inputs that do not come "
                "from the GPU tasks, or do that step inside the GPU task; if the GPU tasks fit, "
                "give them a fraction (num_gpus=0.5) so more run at once.",
            )
        )
    return out
