"""How a profiled run is shown: :class:`Report` renders statistics, findings and a timeline.

Built by :meth:`eugo_jupyter.hpc.Run.report` from the run's model and its analysis
(:mod:`.._insights`); every part is plain data too (:meth:`Report.to_dict`), for the panel.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from typing import Any, Literal, cast

from ..._units import format_bytes, format_seconds
from .._insights import Analysis, Finding, FunctionStats, doc_url
from .recording import RunModel

__all__ = ["Report"]


def _fmt_s(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)


def _fmt_bytes(size: float | None) -> str:
    return format_bytes(size or 0)


_Column = Literal[
    "function",
    "tasks",
    "median_s",
    "p95_s",
    "max_s",
    "speedup",
    "utilisation",
    "arg_bytes_median",
    "arg_bytes_max",
    "asks",
]

_COLUMNS: tuple[tuple[str, _Column, Callable[[Any], str]], ...] = (
    ("function", "function", str),
    ("tasks", "tasks", str),
    ("median", "median_s", _fmt_s),
    ("p95", "p95_s", _fmt_s),
    ("max", "max_s", _fmt_s),
    ("speedup", "speedup", lambda v: "-" if v is None else f"{v:.2f}×"),
    ("utilisation", "utilisation", lambda v: "-" if v is None else f"{v:.0%}"),
    ("args / call", "arg_bytes_median", _fmt_bytes),
    ("largest args", "arg_bytes_max", _fmt_bytes),
    ("asks", "asks", str),
)


class Report:
    """What a profiled run did and what to change: ``functions``, ``findings``, ``timeline()``.

    ``functions`` and ``findings`` are plain lists of dicts (a finding has ``kind``,
    ``function``, ``message`` and ``fix``), ready for JSON.
    """

    def __init__(self, model: RunModel, analysis: Analysis) -> None:
        self.model = model
        self.summary: dict[str, Any] = analysis["summary"]
        self.functions: list[FunctionStats] = analysis["functions"]
        self.findings: list[Finding] = analysis["findings"]
        from ..optimize import _profiled

        #: One row per function run with optimize= (``optimize._profiled.OptimizationRow``).
        self.optimizations: list[Any] = list(_profiled.section(model))
        #: Journaled runs, in words: "map(resample): 812 items from the journal ..., 188 ran".
        self.resumed: list[str] = [
            f"{r['label']}: {r['from_journal']:,} items from the journal {r['path']}, "
            f"{r['ran']:,} ran"
            for r in model.get("resumed", [])
        ]

    def kinds(self) -> set[str]:
        """The kinds of finding present, e.g. ``{"tiny_tasks", "straggler"}``."""
        return {f["kind"] for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (for the panel or JSON)."""
        return {
            "summary": self.summary,
            "functions": self.functions,
            "findings": self.findings,
            "optimizations": self.optimizations,
            "resumed": self.resumed,
        }

    def timeline(self) -> Any:
        """A matplotlib figure: one row per worker, one bar per task, coloured by function.

        It shows itself in a notebook without pyplot; ``fig.savefig("run.png")`` saves it.
        """
        from matplotlib.figure import Figure as _Base

        class Figure(_Base):  # type: ignore[misc,valid-type]
            def _repr_png_(self) -> bytes:
                buffer = io.BytesIO()
                self.savefig(buffer, format="png", dpi=80)
                return buffer.getvalue()

        # a started task has its end and worker too: Run.model sets them together
        tasks = [
            (t["function"], cast(str, t["worker"]), t["start"], cast(float, t["end"]))
            for t in self.model["tasks"]
            if t["start"] is not None
        ]
        workers = sorted({worker for _, worker, _, _ in tasks})
        functions = sorted({function for function, _, _, _ in tasks})
        fig = Figure(figsize=(8, 1.2 + 0.35 * max(1, len(workers))), layout="constrained")
        ax = fig.add_subplot()
        row_of = {w: i for i, w in enumerate(workers)}
        for number, name in enumerate(functions):
            mine = [t for t in tasks if t[0] == name]
            labelled = False
            for row in sorted({row_of[worker] for _, worker, _, _ in mine}):
                spans = [
                    (start, max(end - start, 1e-4))
                    for _, worker, start, end in mine
                    if row_of[worker] == row
                ]
                ax.broken_barh(
                    spans,
                    (row - 0.4, 0.8),
                    facecolors=f"C{number % 10}",
                    edgecolor="white",
                    linewidth=0.3,
                    label=None if labelled else name,
                )
                labelled = True
        ax.set_yticks(range(len(workers)), workers)
        ax.set_ylabel("worker (node:pid)")
        ax.set_xlabel("seconds since the profile began")
        ax.set_xlim(0, max(self.model["duration"], max((end for _, _, _, end in tasks), default=0)))
        if functions:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
        ax.set_title("Tasks per worker")
        return fig

    def _timeline_png(self) -> str | None:
        try:
            fig = self.timeline()
        except ImportError:
            return None
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80)
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    def _repr_html_(self) -> str:
        s = self.summary
        head = (
            f"<p><b>{s['tasks']} tasks</b> in {_fmt_s(s['duration_s'])}; task bodies "
            f"{_fmt_s(s['busy_s'])} in total, speedup {s['speedup']:.2f}× over running them one "
            f"after another, {s['utilisation']:.0%} of {s['cpus']:g} CPUs busy.</p>"
        )
        cells = "".join(f"<th>{html.escape(title)}</th>" for title, _, _ in _COLUMNS)
        rows = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(fmt(f[key]))}</td>" for _, key, fmt in _COLUMNS)
            + "</tr>"
            for f in self.functions
        )
        stats = f"<table class='eugo-profile'><tr>{cells}</tr>{rows}</table>"
        if self.findings:
            found = "".join(
                f"<tr><td><a href='{html.escape(doc_url(f['kind']))}' target='_blank' "
                f"title='what this finding means'>{html.escape(f['kind'])}</a></td>"
                f"<td>{html.escape(f['function'])}</td>"
                f"<td style='text-align:left'>{html.escape(f['message'])}</td>"
                f"<td style='text-align:left'>{html.escape(f['fix'])}</td></tr>"
                for f in self.findings
            )
            findings = (
                "<h4>Findings</h4><table class='eugo-findings'><tr><th>kind</th><th>function</th>"
                f"<th>what happened</th><th>fix</th></tr>{found}</table>"
            )
        else:
            findings = "<p>No findings: none of the known pitfalls showed up in this run.</p>"
        png = self._timeline_png()
        image = (
            f"<img alt='timeline of tasks per worker' src='data:image/png;base64,{png}'/>"
            if png
            else "<p>(install matplotlib to see the timeline)</p>"
        )
        optimized = ""
        if self.optimizations:
            from ..optimize import _profiled

            items = "".join(
                f"<li>{html.escape(line)}</li>" for line in _profiled.lines(self.optimizations)
            )
            optimized = f"<h4>Optimizations</h4><ul class='eugo-optimizations'>{items}</ul>"
        resumed = ""
        if self.resumed:
            items = "".join(f"<li>{html.escape(line)}</li>" for line in self.resumed)
            resumed = f"<h4>Resumed from a journal</h4><ul class='eugo-resumed'>{items}</ul>"
        return f"<div class='eugo-report'>{head}{stats}{findings}{optimized}{resumed}{image}</div>"

    def __repr__(self) -> str:
        lines = [
            f"Run of {self.summary['tasks']} tasks in {_fmt_s(self.summary['duration_s'])} "
            f"(speedup {self.summary['speedup']:.2f}×)"
        ]
        for f in self.functions:
            lines.append(
                f"  {f['function']}: {f['tasks']} tasks, median {_fmt_s(f['median_s'])}, "
                f"max {_fmt_s(f['max_s'])}"
            )
        for item in self.findings:
            lines.append(f"- [{item['kind']}] {item['message']} Fix: {item['fix']}")
        if self.findings:
            page = doc_url(self.findings[0]["kind"]).split("#")[0]
            lines.append(f"What each [kind] means, at more length: {page}")
        if self.optimizations:
            from ..optimize import _profiled

            lines.append("Optimizations:")
            lines += [f"  {line}" for line in _profiled.lines(self.optimizations)]
        if self.resumed:
            lines.append("Resumed from a journal:")
            lines += [f"  {line}" for line in self.resumed]
        return "\n".join(lines)
