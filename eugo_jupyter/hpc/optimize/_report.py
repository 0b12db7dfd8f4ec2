"""``OptimizationReport``: what ``eugo.hpc.optimize(fn, *args)`` found, as text, HTML and a dict."""

from __future__ import annotations

import html
from typing import Any

from ..._units import format_seconds as _fmt
from . import _decide, _verify
from ._runtime import Entry

__all__ = ["OptimizationReport"]


class OptimizationReport:
    """What was compiled and how, the times per call, the verification, and how to help it.

    ``result`` holds the plain function's answer on the sample arguments.
    """

    def __init__(self, entry: Entry, result: Any, threads: int) -> None:
        self.result = result
        stats = entry.stats()
        self.function = stats["function"]
        self.compiled = stats["state"] == "compiled"
        self.how = stats["how"] or ""
        self.reason = stats["reason"] or ""
        self.plain_s = stats["plain_s"]
        self.compiled_s = stats["compiled_s"] if self.compiled else stats["compiled_s"]
        self.compile_s = stats["compile_s"]
        self.load_s = stats["load_s"]
        self.loaded = stats["loads"] > 0 and stats["compiles"] == 0  #: from the node cache
        self.node_cache = stats["node_cache"]
        self.versions = stats["versions"]
        self.verified = stats["verified"]
        self.max_diff = stats["max_diff"]
        self.difference = stats["difference"]
        self.help = stats["help"]
        self.per_cost = stats.get("per_cost", "")  #: decided again for costlier calls
        self.notes = list(entry.notes)
        self.threads = threads
        self.helpers = list(entry.cands.helpers) if entry.cands is not None else []
        self.break_even: int | None = None
        if self.compiled and self.plain_s and self.compiled_s:
            cost = self.compile_s + self.load_s
            self.break_even = _decide.break_even(self.plain_s, self.compiled_s, cost)

    @property
    def speedup(self) -> float | None:
        if self.plain_s and self.compiled_s:
            return self.plain_s / self.compiled_s
        return None

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data."""
        return {
            "function": self.function,
            "compiled": self.compiled,
            "how": self.how,
            "helpers": self.helpers,
            "reason": self.reason,
            "plain_s": self.plain_s,
            "compiled_s": self.compiled_s,
            "speedup": self.speedup,
            "compile_s": self.compile_s,
            "load_s": self.load_s,
            "loaded_from_node_cache": self.loaded,
            "node_cache": self.node_cache,
            "break_even_calls": self.break_even,
            "versions": self.versions,
            "verification": {
                "calls": self.verified,
                "tolerance": _verify.tolerance_text(),
                "max_diff": self.max_diff,
                "difference": self.difference,
            },
            "threads": self.threads,
            "notes": self.notes,
            "per_cost": self.per_cost,
            "not_compiled": self.help,
        }

    def _lines(self) -> list[str]:
        lines: list[str] = []
        if self.compiled:
            lines.append(f"{self.function}: compiled, {self.how}")
            speed = f" ({self.speedup:.0f}x)" if self.speedup else ""
            cost = (
                f"loaded from the node cache in {_fmt(self.load_s)} (compiled earlier on this "
                "machine)"
                if self.loaded
                else f"compile {_fmt(self.compile_s)}"
            )
            lines.append(
                f"  per call: Python {_fmt(self.plain_s or 0)}, "
                f"compiled {_fmt(self.compiled_s or 0)}{speed}; {cost}"
            )
            if self.break_even:
                lines.append(f"  compiling pays after about {self.break_even} calls per worker")
            lines.append(
                f"  verified on {self.verified} calls against Python ({_verify.tolerance_text()}); "
                f"largest difference {self.max_diff:.1e} relative"
            )
            if self.versions:
                lines.append(f"  versions compiled: {'; '.join(self.versions)}")
        else:
            lines.append(f"{self.function}: kept Python: {self.reason}")
            if self.plain_s:
                lines.append(f"  per call: Python {_fmt(self.plain_s)}")
        if self.per_cost:
            lines.append(f"  {self.per_cost}")
        lines += [f"  note: {n}" for n in self.notes]
        for found in self.help:
            shown = f": {found['source_line']}" if found["source_line"] else ""
            lines.append(f"  how to help it: {found['function']}, line {found['line']}{shown}")
            lines.append(f"    {found['kind']}: {found['fix']}")
        return lines

    def __repr__(self) -> str:
        return "\n".join(self._lines())

    def _repr_html_(self) -> str:
        rows = "".join(f"<li>{html.escape(line.strip())}</li>" for line in self._lines()[1:])
        head = html.escape(self._lines()[0])
        details = "".join(
            "<details><summary>numba's message for "
            f"{html.escape(found['function'])}, line {found['line']}</summary>"
            f"<pre>{html.escape(found['numba_message'])}</pre></details>"
            for found in self.help
            if found["numba_message"]
        )
        return f'<div class="eugo-optimization"><b>{head}</b><ul>{rows}</ul>{details}</div>'
