"""The optimizations section of ``run.report()``: per function, from the workers' own stats.

Each profiled call carries its worker process's optimizer stats (cumulative for the process);
per function and process the latest is kept, then the processes are summed up: compiled or not
and why, the speedup per call measured on the workers, compile seconds, how many processes
compiled and how many loaded it from the node cache instead (and in how long), the versions
compiled, calls verified and the largest difference seen.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = ["OptimizationRow", "section"]


class OptimizationRow(TypedDict):
    function: str
    compiled: bool
    how: str
    reasons: list[str]
    speedup: float | None
    plain_s: float | None
    compiled_s: float | None
    compile_s: float
    load_s: float
    processes: int
    processes_compiled: int
    processes_loaded: int  #: processes that loaded a version from the node cache
    versions: list[str]
    verified: int
    max_diff: float
    python_fallbacks: int
    fallback_error: str
    help: list[dict[str, Any]]
    per_cost: list[str]  #: decided again for costlier calls, per distinct text


def section(model: Mapping[str, Any]) -> list[OptimizationRow]:
    """One row per optimized function seen in the run (none when nothing was optimized)."""
    latest: dict[tuple[str, int, str], dict[str, Any]] = {}
    for task in model.get("tasks", []):
        for stats in task.get("optimizations") or []:
            key = (stats["function"], stats["pid"], stats["key"])
            held = latest.get(key)
            if held is None or _when(stats) >= _when(held):
                latest[key] = stats
    grouped: dict[str, list[dict[str, Any]]] = {}
    for (function, _, _), stats in sorted(latest.items()):
        grouped.setdefault(function, []).append(stats)
    rows: list[OptimizationRow] = []
    for function, entries in grouped.items():
        compiled = [e for e in entries if e["state"] == "compiled"]
        ratios = [
            e["plain_s"] / e["compiled_s"] for e in compiled if e["plain_s"] and e["compiled_s"]
        ]
        versions: list[str] = []
        for e in entries:
            versions += [v for v in e["versions"] if v not in versions]
        reasons = sorted({e["reason"] for e in entries if e["reason"]})
        helps = [h for e in entries for h in e["help"]]
        rows.append(
            {
                "function": function,
                "compiled": bool(compiled),
                "how": compiled[0]["how"] if compiled else "",
                "reasons": reasons,
                "speedup": statistics.median(ratios) if ratios else None,
                "plain_s": _median([e["plain_s"] for e in entries]),
                "compiled_s": _median([e["compiled_s"] for e in compiled]),
                "compile_s": sum(e["compile_s"] for e in entries),
                "load_s": sum(e.get("load_s", 0.0) for e in entries),
                "processes": len({e["pid"] for e in entries}),
                "processes_compiled": len({e["pid"] for e in entries if e.get("compiles")}),
                "processes_loaded": len({e["pid"] for e in entries if e.get("loads")}),
                "versions": versions,
                "verified": sum(e["verified"] for e in entries),
                "max_diff": max(e["max_diff"] for e in entries),
                "python_fallbacks": sum(e["python_fallbacks"] for e in entries),
                "fallback_error": next(
                    (e["fallback_error"] for e in entries if e["fallback_error"]), ""
                ),
                "help": helps[:1],
                "per_cost": sorted({e["per_cost"] for e in entries if e.get("per_cost")}),
            }
        )
    return rows


def _when(stats: Mapping[str, Any]) -> tuple[float, int]:
    """The order of one process's snapshots: when read, then the calls counted."""
    return (stats.get("at", 0.0), stats["calls"])


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v]
    return statistics.median(known) if known else None


def lines(rows: list[OptimizationRow]) -> list[str]:
    """The section as text lines (the report's text and HTML both use them)."""
    from ..._units import format_seconds as _fmt

    out: list[str] = []
    for row in rows:
        if row["compiled"]:
            speed = f"{row['speedup']:.0f}x faster per call" if row["speedup"] else "compiled"
            loaded = (
                f", loaded from the node cache in {row['processes_loaded']} ({_fmt(row['load_s'])})"
                if row["processes_loaded"]
                else ""
            )
            out.append(
                f"{row['function']}: compiled ({row['how']}), {speed} on the workers; compiled "
                f"in {row['processes_compiled']} of {row['processes']} worker processes "
                f"({_fmt(row['compile_s'])}){loaded}; {len(row['versions'])} version(s): "
                f"{'; '.join(row['versions'])}; "
                f"verified on {row['verified']} calls, largest difference {row['max_diff']:.1e}"
            )
        else:
            out.append(f"{row['function']}: kept Python: {'; '.join(row['reasons'])}")
        out += [f"  {text}" for text in row.get("per_cost", [])]
        if row["python_fallbacks"]:
            out.append(
                f"  {row['python_fallbacks']} call(s) ran in Python after the compiled version "
                f"raised ({row['fallback_error']})"
            )
        for found in row["help"]:
            out.append(f"  how to help it: line {found['line']}: {found['kind']}: {found['fix']}")
    return out
