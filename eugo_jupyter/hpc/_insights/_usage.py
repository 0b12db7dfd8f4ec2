"""Findings about what travels with calls and gets, and about code habits Ray warns against:
large arguments and closures, needless or oversized gets, gets inside tasks and async code,
``put`` results, module globals and functions redefined in a loop. Pure functions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from .._static import FIX as GLOBAL_FIX
from .._static import message as global_message
from ._base import Finding, Task, by_function, finding, finished, mb

LARGE_ARG_BYTES = 1 << 20
LARGE_ARG_MIN_CALLS = 3
LARGE_CLOSURE_BYTES = 1 << 20
GET_MEMORY_SHARE = 0.5  # one get fetching this share of the memory it lands in
REDEFINED_MIN = 3  # definitions of one function name within a run


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
