"""``eugo.hpc.profile()``: record every task and ``get`` of a block, then report what slowed it.

While a profile is recording, each call made through ``eugo.hpc`` (``@distribute`` functions and
``map``) is submitted as a thin wrapper that also returns, as a second Ray object, when the task
ran and on which worker (measured on the worker). The caller still receives the task's own future.
Outside a profile the submission path is untouched: one module-level ``None`` check.

The recorded run becomes a plain model (lists of dicts, see :meth:`Run.model`) that
:mod:`._insights` analyses; :class:`Report` renders it as tables and a timeline.
"""

from __future__ import annotations

import base64
import html
import inspect
import io
import os
import reprlib
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from . import _distribute, _session
from ._insights import analyze

__all__ = ["Report", "Run", "profile"]

_short = reprlib.Repr()
_short.maxstring = 30
_short.maxother = 30
_short.maxlist = 4
_short.maxdict = 4
_short.maxarray = 4


def _timed_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, dict[str, Any]]:
    """Worker side: run the task body and say when and where it ran."""
    start = time.time()
    value = fn(*args, **kwargs)
    end = time.time()
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - timing must never fail a task
        node = None
    return value, {"start": start, "end": end, "pid": os.getpid(), "node": node}


def _timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        return _timed_call(fn, args, kwargs)

    return run


class Run:
    """A recording in progress (or finished): tasks submitted and ``get`` calls made in a block.

    >>> with eugo.hpc.profile() as run:            # doctest: +SKIP
    ...     eugo.hpc.get([square(i) for i in range(100)])
    >>> run.report()                               # doctest: +SKIP
    """

    #: Arguments at least this big (serialized) are remembered by identity, to spot repeats.
    LARGE_ARG = 1 << 20

    def __init__(self) -> None:
        self.started: float | None = None
        self.ended: float | None = None
        self.cluster: dict[str, float] = {}
        self._tasks: list[dict[str, Any]] = []
        self._timing_refs: list[Any] = []
        self._by_ref: dict[bytes, int] = {}
        self._gets: list[dict[str, Any]] = []
        self._sizes: dict[int, tuple[Any, int]] = {}
        self._remotes: dict[tuple[int, str], Any] = {}
        self._signatures: dict[int, inspect.Signature | None] = {}
        self._lock = threading.Lock()
        self._timings: list[dict[str, Any] | None] | None = None

    # -- recording -------------------------------------------------------------------------
    def __enter__(self) -> "Run":
        import ray

        if _distribute._recorder is not None:
            raise RuntimeError(
                "A profile is already recording; end that `with eugo.hpc.profile()` block "
                "before starting another."
            )
        _session.ensure()
        self.cluster = {k: float(v) for k, v in ray.cluster_resources().items()}
        self.started = time.time()
        _distribute._recorder = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _distribute._recorder = None
        self.ended = time.time()
        self._sizes.clear()  # release the arguments held for identity
        from . import _run_findings

        _run_findings.save_later(self)  # the EugoHPC Manager shows the findings on the card

    def _arg_size(self, value: Any) -> int:
        import ray
        from ray import cloudpickle

        if isinstance(value, ray.ObjectRef):
            return 0
        cached = self._sizes.get(id(value))
        if cached is not None and cached[0] is value:
            return cached[1]
        try:
            size = len(cloudpickle.dumps(value))
        except Exception:  # noqa: BLE001 - Ray will report the pickling error itself
            size = 0
        self._sizes[id(value)] = (value, size)
        return size

    def _names(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[str]:
        key = id(fn)
        if key not in self._signatures:
            try:
                self._signatures[key] = inspect.signature(fn)
            except (TypeError, ValueError):
                self._signatures[key] = None
        sig = self._signatures[key]
        if sig is not None:
            try:
                return list(sig.bind_partial(*args, **kwargs).arguments)
            except TypeError:
                pass
        return [f"#{i}" for i in range(len(args))] + list(kwargs)

    def _remote_for(self, fn: Callable[..., Any], label: str, options: Mapping[str, Any]) -> Any:
        import ray

        key = (id(fn), repr(sorted(options.items())))
        remote = self._remotes.get(key)
        if remote is None:
            opts = {"name": label, **options, "num_returns": 2}
            remote = ray.remote(_timed(fn)).options(**opts)
            self._remotes[key] = (fn, remote)
        else:
            remote = remote[1]
        return remote

    def submit(
        self,
        label: str,
        fn: Callable[..., Any],
        options: Mapping[str, Any],
        request: Mapping[str, float],
        args: tuple,
        kwargs: dict,
    ) -> Any:
        """Submit ``fn(*args, **kwargs)`` as a timed task; returns the task's own future."""
        import ray

        names = self._names(fn, args, kwargs)
        values = list(args) + list(kwargs.values())
        arg_records = []
        deps = []
        for name, value in zip(names, values):
            if isinstance(value, ray.ObjectRef):
                producer = self._by_ref.get(value.binary())
                if producer is not None:
                    deps.append(producer)
            size = self._arg_size(value)
            arg_records.append(
                {
                    "name": name,
                    "bytes": size,
                    "type": type(value).__name__,
                    "key": id(value) if size >= self.LARGE_ARG else None,
                }
            )
        call = f"{label}({', '.join(_short.repr(v) for v in values)})"
        plain = options.get("num_returns", 1) not in (1, None)
        submitted = time.time()
        if plain:  # several returns or a generator: record the submission only
            value_ref = ray.remote(fn).options(**options).remote(*args, **kwargs)
            timing_ref = None
        else:
            value_ref, timing_ref = self._remote_for(fn, label, options).remote(*args, **kwargs)
        first = value_ref[0] if isinstance(value_ref, list) else value_ref
        with self._lock:
            index = len(self._tasks)
            self._tasks.append(
                {
                    "id": index,
                    "function": label,
                    "call": call[:120],
                    "submit": submitted,
                    "request": dict(request),
                    "args": arg_records,
                    "arg_bytes": sum(a["bytes"] for a in arg_records),
                    "deps": deps,
                }
            )
            self._timing_refs.append(timing_ref)
            if hasattr(first, "binary"):
                self._by_ref[first.binary()] = index
            self._timings = None
        return value_ref

    def got(self, refs: Iterable[Any], began: float, ended: float) -> None:
        """Note a ``get`` call: when it blocked, and on which recorded tasks."""
        futures = []
        for ref in refs:
            binary = getattr(ref, "binary", None)
            futures.append(self._by_ref.get(binary()) if binary else None)
        with self._lock:
            self._gets.append({"start": began, "end": ended, "futures": futures})

    # -- reading ---------------------------------------------------------------------------
    def _collect(self, wait: float) -> list[dict[str, Any] | None]:
        import ray

        if self._timings is not None and len(self._timings) == len(self._timing_refs):
            return self._timings
        refs = [r for r in self._timing_refs if r is not None]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=wait, fetch_local=True)
        timings: list[dict[str, Any] | None] = []
        complete = True
        for ref in self._timing_refs:
            if ref is None:
                timings.append(None)
                continue
            ready, _ = ray.wait([ref], timeout=0)
            if not ready:
                timings.append(None)
                complete = False
                continue
            try:
                timings.append(ray.get(ref))
            except Exception:  # noqa: BLE001 - the task failed; its own future says why
                timings.append({"failed": True})
        if complete:
            self._timings = timings
        return timings

    def model(self, wait: float = 60.0) -> dict[str, Any]:
        """The run as plain data; times are seconds since the block began.

        Waits up to ``wait`` seconds for tasks still running. Keys: ``duration``, ``cluster``
        (resource totals), ``tasks`` (each with ``function``, ``call``, ``submit``, ``start``,
        ``end``, ``worker``, ``pid``, ``node``, ``status``, ``request``, ``args``, ``arg_bytes``,
        ``deps``) and ``gets`` (each with ``start``, ``end``, ``futures``: task ids or None).
        """
        t0 = self.started if self.started is not None else time.time()
        timings = self._collect(wait)
        tasks = []
        for task, timing in zip(self._tasks, timings):
            row = dict(task)
            row["submit"] = task["submit"] - t0
            if timing and not timing.get("failed"):
                node = timing["node"] or "?"
                row.update(
                    start=timing["start"] - t0,
                    end=timing["end"] - t0,
                    pid=timing["pid"],
                    node=node,
                    worker=f"{node[:8]}:{timing['pid']}",
                    status="finished",
                )
            else:
                status = "failed" if timing else "unknown"
                row.update(start=None, end=None, pid=None, node=None, worker=None, status=status)
            tasks.append(row)
        gets = [
            {"start": g["start"] - t0, "end": g["end"] - t0, "futures": list(g["futures"])}
            for g in self._gets
        ]
        end = self.ended if self.ended is not None else time.time()
        return {"duration": end - t0, "cluster": dict(self.cluster), "tasks": tasks, "gets": gets}

    def report(self, gpu_audit: list[Mapping[str, Any]] | None = None, wait: float = 60.0) -> "Report":
        """Per-function statistics and findings with fixes; renders as tables and a timeline.

        ``gpu_audit``: records of the GPU audit (dicts with ``function``, ``requested_gpus``,
        ``used_gpu`` and ``seconds``); when omitted, the audit of ``eugo_jupyter.gpu.audit`` is
        read if that module offers ``records()``.

        >>> report = run.report()                      # doctest: +SKIP
        >>> [f["kind"] for f in report.findings]       # doctest: +SKIP
        ['blocking_too_early']
        """
        model = self.model(wait)
        audit = list(gpu_audit) if gpu_audit is not None else _audit_records()
        return Report(model, analyze(model, audit))


def _audit_records() -> list[dict[str, Any]]:
    """The GPU audit's records, when that part of the package is present and has any."""
    import importlib

    try:
        audit = importlib.import_module("eugo_jupyter.gpu.audit")
        records = getattr(audit, "records", None)
        return [dict(r) for r in records()] if callable(records) else []
    except Exception:  # noqa: BLE001 - the audit is optional
        return []


def profile() -> Run:
    """Record the tasks and ``get`` calls of a ``with`` block for :meth:`Run.report`.

    >>> import eugo_jupyter as eugo
    >>> with eugo.hpc.profile() as run:                     # doctest: +SKIP
    ...     results = eugo.hpc.get([work(x) for x in range(200)])
    >>> run.report()                                        # doctest: +SKIP
    """
    return Run()


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def _fmt_bytes(size: float | None) -> str:
    if not size:
        return "0 B"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:.0f} B"


_COLUMNS = (
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

    def __init__(self, model: dict[str, Any], analysis: dict[str, Any]) -> None:
        self.model = model
        self.summary: dict[str, Any] = analysis["summary"]
        self.functions: list[dict[str, Any]] = analysis["functions"]
        self.findings: list[dict[str, Any]] = analysis["findings"]

    def kinds(self) -> set[str]:
        """The kinds of finding present, e.g. ``{"tiny_tasks", "straggler"}``."""
        return {f["kind"] for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (for the panel or JSON)."""
        return {"summary": self.summary, "functions": self.functions, "findings": self.findings}

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

        tasks = [t for t in self.model["tasks"] if t["start"] is not None]
        workers = sorted({t["worker"] for t in tasks})
        functions = sorted({t["function"] for t in tasks})
        fig = Figure(figsize=(8, 1.2 + 0.35 * max(1, len(workers))), layout="constrained")
        ax = fig.add_subplot()
        row_of = {w: i for i, w in enumerate(workers)}
        for number, name in enumerate(functions):
            mine = [t for t in tasks if t["function"] == name]
            labelled = False
            for row in sorted({row_of[t["worker"]] for t in mine}):
                spans = [
                    (t["start"], max(t["end"] - t["start"], 1e-4))
                    for t in mine
                    if row_of[t["worker"]] == row
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
        ax.set_xlim(0, max(self.model["duration"], max((t["end"] for t in tasks), default=0)))
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
            "<tr>" + "".join(f"<td>{html.escape(fmt(f[key]))}</td>" for _, key, fmt in _COLUMNS) + "</tr>"
            for f in self.functions
        )
        stats = f"<table class='eugo-profile'><tr>{cells}</tr>{rows}</table>"
        if self.findings:
            found = "".join(
                f"<tr><td>{html.escape(f['kind'])}</td><td>{html.escape(f['function'])}</td>"
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
        return f"<div class='eugo-report'>{head}{stats}{findings}{image}</div>"

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
        for f in self.findings:
            lines.append(f"- [{f['kind']}] {f['message']} Fix: {f['fix']}")
        return "\n".join(lines)
