"""A notebook cell run as one task: the names it reads and binds, its streamed output, its errors.

The driver side (``analyse``, ``submit_cell``, :class:`CellRun`) and the worker side
(``notebook_cell``, the output capture, the :class:`OutputHub` actor) live together so the wire
format has one owner. Nothing here imports IPython: the magics in ``eugo_jupyter.magics`` do
the notebook parts (namespace, display, tracebacks).

Output streaming: the task swaps ``sys.stdout``/``sys.stderr`` for a buffer that a thread sends,
every 0.1 s, to a small per-session actor (the hub); the kernel polls the hub while it waits and
prints what came, so prints show under the cell while it runs, without Ray's ``(pid=...)``
prefix. What was still buffered at the end travels back with the result.

>>> plan = analyse("y = x + 1\\nprint(y)")
>>> plan.free, plan.assigned
(('x',), ('y',))
"""

from __future__ import annotations

import ast
import builtins
import io
import symtable
import sys
import threading
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

__all__ = [
    "CellError",
    "CellPlan",
    "CellRun",
    "OutputHub",
    "analyse",
    "notebook_cell",
    "submit_cell",
]

#: How often the task sends buffered output, and the kernel asks for it (seconds).
FLUSH_INTERVAL = 0.1

Chunks = list[tuple[str, str]]  # [("stdout" | "stderr", text), ...]


# --------------------------------------------------------------------------- analysis (driver)


@dataclass(frozen=True)
class CellPlan:
    """What a cell reads from the notebook, what it binds, and whether it ends in an expression."""

    free: tuple[str, ...]
    assigned: tuple[str, ...]
    has_value: bool
    source: str = field(repr=False, default="")


class _TopLevelReads(ast.NodeVisitor):
    """Names a statement reads in the module scope (nested scopes are read through symtable)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Load, ast.Del)):
            self.names.add(node.id)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.names.add(node.target.id)  # x += 1 reads x first
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        # Decorators, defaults and annotations run now, in this scope; the body runs later.
        for deco in getattr(node, "decorator_list", []):
            self.visit(deco)
        args = node.args
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    self.visit(arg.annotation)
            if node.returns is not None:
                self.visit(node.returns)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)

    def _comprehension(self, node: Any) -> None:
        self.visit(node.generators[0].iter)  # only the first iterable is evaluated out here

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _bound_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _simple_binds(stmt: ast.stmt) -> set[str]:
    """Names a simple statement surely binds when it completes."""
    if isinstance(stmt, ast.Assign):
        return set().union(*(_bound_names(t) for t in stmt.targets))
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id} if not isinstance(stmt, ast.AnnAssign) or stmt.value else set()
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {
            (alias.asname or alias.name.split(".")[0]) for alias in stmt.names if alias.name != "*"
        }
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    return set()


class _Scanner:
    """Walks statements in order, noting each name read while it may not be bound yet."""

    def __init__(self, table: symtable.SymbolTable) -> None:
        self.children = [(c.get_lineno(), c) for c in table.get_children()]
        self.free: list[str] = []

    def _read(self, node: ast.AST | None, done: set[str]) -> None:
        if node is None:
            return
        visitor = _TopLevelReads()
        visitor.visit(node)
        reads = set(visitor.names)
        first, last = node.lineno, getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        for lineno, child in self.children:
            if first <= lineno <= last:
                reads |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
                reads |= _nested_global_reads(child)
        self.free.extend(sorted(n for n in reads - done if n not in self.free))

    def scan(self, body: list[ast.stmt], done: set[str]) -> set[str]:
        """Record free reads in ``body``; return the names surely bound after it (``done`` grows)."""
        for stmt in body:
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                self._read(stmt.iter, done)
                self.scan(stmt.body, done | _bound_names(stmt.target))
                self.scan(stmt.orelse, set(done))
            elif isinstance(stmt, ast.While):
                self._read(stmt.test, done)
                self.scan(stmt.body, set(done))
                self.scan(stmt.orelse, set(done))
            elif isinstance(stmt, ast.If):
                self._read(stmt.test, done)
                both = self.scan(stmt.body, set(done)) & self.scan(stmt.orelse, set(done))
                done |= both
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    self._read(item.context_expr, done)
                    if item.optional_vars is not None:
                        done |= _bound_names(item.optional_vars)
                self.scan(stmt.body, done)
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                self.scan(stmt.body, set(done))  # type: ignore[attr-defined]
                for handler in stmt.handlers:  # type: ignore[attr-defined]
                    self._read(handler.type, done)
                    self.scan(handler.body, done | ({handler.name} if handler.name else set()))
                self.scan(stmt.orelse, set(done))  # type: ignore[attr-defined]
                self.scan(stmt.finalbody, set(done))  # type: ignore[attr-defined]
            elif type(stmt).__name__ == "Match":
                self._read(stmt.subject, done)  # type: ignore[attr-defined]
                for case in stmt.cases:  # type: ignore[attr-defined]
                    self._read(case.guard, done)
                    self.scan(case.body, set(done))
            else:
                self._read(stmt, done)
                done |= _simple_binds(stmt)
                if isinstance(stmt, ast.Delete):
                    done -= set().union(*(_bound_names(t) for t in stmt.targets))
        return done


def _nested_global_reads(table: symtable.SymbolTable) -> set[str]:
    names = set()
    for child in table.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced()}
        names |= _nested_global_reads(child)
    return names


def _nested_global_writes(table: symtable.SymbolTable) -> set[str]:
    names = set()
    for child in table.get_children():
        names |= {s.get_name() for s in child.get_symbols() if s.is_declared_global() and s.is_assigned()}
        names |= _nested_global_writes(child)
    return names


def analyse(source: str, filename: str = "<cell>", first_line: int = 1) -> CellPlan:
    """Parse a cell: free names (read before the cell binds them), bound names, a last expression.

    Line numbers in a ``SyntaxError`` (and later in tracebacks) count from ``first_line``, so a
    body that starts on line 2 of a notebook cell reports the cell's own line numbers.

    >>> analyse("import math\\nr = math.sqrt(a)\\nr").free
    ('a',)
    """
    padded = "\n" * (first_line - 1) + source
    tree = ast.parse(padded, filename, "exec")  # raises SyntaxError with the cell's line numbers
    table = symtable.symtable(padded, filename, "exec")
    scanner = _Scanner(table)
    scanner.scan(tree.body, set())
    free = scanner.free

    assigned = {
        s.get_name()
        for s in table.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    assigned |= _nested_global_writes(table)
    has_value = bool(tree.body) and isinstance(tree.body[-1], ast.Expr)
    return CellPlan(tuple(free), tuple(sorted(assigned)), has_value, padded)


# --------------------------------------------------------------------------- the hub (an actor)


class OutputHub:
    """Holds output batches sent by running cells until the kernel reads them (one per session)."""

    def __init__(self) -> None:
        self._batches: dict[str, dict[int, Chunks]] = {}

    def write(self, cell_id: str, seq: int, chunks: Chunks) -> None:
        self._batches.setdefault(cell_id, {})[seq] = chunks

    def read(self, cell_id: str, since: int) -> tuple[int, Chunks]:
        """Batches ``since``, ``since + 1``, ... that have arrived, in order; they are dropped here."""
        batches = self._batches.get(cell_id, {})
        out: Chunks = []
        while since in batches:
            out.extend(batches.pop(since))
            since += 1
        if not batches:
            self._batches.pop(cell_id, None)
        return since, out

    def forget(self, cell_id: str) -> None:
        self._batches.pop(cell_id, None)


# --------------------------------------------------------------------------- worker side


class _Sink:
    """Collects a task's output and sends it to the hub every FLUSH_INTERVAL seconds."""

    def __init__(self, hub_name: str | None, cell_id: str) -> None:
        self._hub_name, self._cell_id = hub_name, cell_id
        self._hub: Any = None
        self._lock = threading.Lock()
        self._chunks: Chunks = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, stream: str, text: str) -> None:
        if self._thread is None and self._hub_name is not None:
            # Found and started on the first print: a quiet cell pays for neither.
            import ray

            self._hub = ray.get_actor(self._hub_name)
            self._thread = threading.Thread(target=self._loop, name="eugo-cell-output", daemon=True)
            self._thread.start()
        with self._lock:
            if self._chunks and self._chunks[-1][0] == stream:
                self._chunks[-1] = (stream, self._chunks[-1][1] + text)
            else:
                self._chunks.append((stream, text))

    def _take(self) -> Chunks:
        with self._lock:
            chunks, self._chunks = self._chunks, []
        return chunks

    def _loop(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            chunks = self._take()
            if chunks:
                self._hub.write.remote(self._cell_id, self.sent, chunks)
                self.sent += 1

    def close(self) -> Chunks:
        """Stop sending; what is left is returned with the result (the tail)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._take()


class _Stream(io.TextIOBase):
    def __init__(self, sink: _Sink, name: str) -> None:
        self._sink, self.name = sink, name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self._sink.add(self.name, str(text))
        return len(text)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class CellError(Exception):
    """Raised by a cell's task when the cell's code raised; carries what the kernel needs.

    Its text is the cell's own traceback, so ``eugo.hpc.get(fut)`` on a ``--no-block`` cell says
    what went wrong; the magic re-raises the original exception with the cell's line numbers.
    """

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("text", "the cell raised an exception"))
        self.info = info

    def __reduce__(self) -> tuple[Any, ...]:
        return (CellError, (self.info,))

    def __str__(self) -> str:
        return str(self.info.get("text", ""))


def _pickle_problem(value: Any) -> str | None:
    """None if ``value`` can travel back; else the reason. Buffers stay out of band (no copy)."""
    from ray import cloudpickle

    try:
        cloudpickle.dumps(value, protocol=5, buffer_callback=lambda _buffer: None)
    except Exception as exc:  # noqa: BLE001 - any failure to pickle is the answer
        return f"{type(exc).__name__}: {exc}"
    return None


def _collect(ns: dict[str, Any], plan: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    bound, unsent = {}, {}
    for name in plan["assigned"]:
        if name in ns:
            problem = _pickle_problem(ns[name])
            if problem is None:
                bound[name] = ns[name]
            else:
                unsent[name] = f"{type(ns[name]).__name__}; {problem}"
    deleted = [name for name in inputs if name not in ns]
    return {"bound": bound, "unsent": unsent, "deleted": deleted}


def _cell_frames(tb: Any, filename: str) -> list[tuple[str, int, str]]:
    frames = [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(tb)]
    for index, (name, _, _) in enumerate(frames):
        if name == filename:
            return frames[index:]
    return frames


def notebook_cell(spec: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Run one cell's code on a worker: returns (value of the last expression, payload).

    ``spec`` holds the padded source, its filename, the names to send back and ``has_value``;
    ``inputs`` the free variables taken from the notebook.
    """
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    ns.update(inputs)
    sink = _Sink(spec.get("hub"), spec["cell_id"])
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(sink, "stdout"), _Stream(sink, "stderr")
    value = None
    try:
        tree = ast.parse(spec["source"], spec["filename"], "exec")
        last = tree.body.pop() if spec["has_value"] else None
        exec(compile(tree, spec["filename"], "exec"), ns)
        if last is not None:
            expression = ast.Expression(last.value)  # type: ignore[attr-defined]
            value = eval(compile(expression, spec["filename"], "eval"), ns)
    except Exception as exc:
        sys.stdout, sys.stderr = saved
        tail = sink.close()
        frames = _cell_frames(exc.__traceback__, spec["filename"])
        text = "Traceback (most recent call last):\n" + "".join(
            traceback.format_list(traceback.StackSummary.from_list([(f, n, q, None) for f, n, q in frames]))
        ) + "".join(traceback.format_exception_only(type(exc), exc))
        info = {
            "frames": frames,
            "type": type(exc).__name__,
            "message": str(exc),
            "exception": None if _pickle_problem(exc) else exc.with_traceback(None),
            "text": text,
            "tail": tail,
            "sent": sink.sent,
            **_collect(ns, spec, inputs),
        }
        raise CellError(info) from None
    finally:
        sys.stdout, sys.stderr = saved
    tail = sink.close()
    payload = {"tail": tail, "sent": sink.sent, **_collect(ns, spec, inputs)}
    if value is not None:
        problem = _pickle_problem(value)
        if problem is not None:
            payload["value_problem"] = f"{type(value).__name__}; {problem}"
            value = None
    return value, payload


# --------------------------------------------------------------------------- driver side

_hub: Any = None
_hub_name = ""
_hub_generation = -1
_function: Any = None


def _output_hub() -> Any:
    """The session's hub actor, started on first use and again after a reconnect."""
    global _hub, _hub_name, _hub_generation
    from . import _session
    from ._distribute import distribute

    if _hub is None or _hub_generation != _session.generation:
        _hub_name = f"eugo-output-{uuid.uuid4().hex[:8]}"
        _hub = distribute(OutputHub).options(num_cpus=0, name=_hub_name)().handle
        _hub_generation = _session.generation
    return _hub


def _cell_function() -> Any:
    global _function
    from ._distribute import DistributedFunction

    if _function is None:
        _function = DistributedFunction(notebook_cell, {"num_returns": 2})
    return _function


class CellRun:
    """One submitted cell: its two futures (value, payload) and its output stream."""

    def __init__(self, value_ref: Any, payload_ref: Any, cell_id: str, hub: Any) -> None:
        self.value_ref, self.payload_ref = value_ref, payload_ref
        self.cell_id, self.hub = cell_id, hub
        self.next_batch = 0

    def ready(self, timeout: float = 0) -> bool:
        import ray

        done, _ = ray.wait([self.payload_ref], timeout=timeout, fetch_local=False)
        return bool(done)

    def read_output(self) -> Chunks:
        """Output batches that arrived since the last read, in order."""
        import ray

        try:
            self.next_batch, chunks = ray.get(self.hub.read.remote(self.cell_id, self.next_batch))
        except Exception:  # noqa: BLE001 - a lost hub loses output, never the result
            return []
        return chunks

    def drain(self, sent: int, emit: Callable[[Chunks], None], patience: float = 10.0) -> None:
        """Read until the ``sent`` batches the task reported have all arrived."""
        import time

        deadline = time.monotonic() + patience
        while self.next_batch < sent and time.monotonic() < deadline:
            chunks = self.read_output()
            if chunks:
                emit(chunks)
            elif self.next_batch < sent:
                time.sleep(0.02)

    def cancel(self) -> None:
        """Stop the cell's task: a queued one never starts, a running one's worker is ended.

        Ray 2.60 ignores a polite cancel for a task with two results, so this is the forced one
        (``eugo.hpc.cancel(fut, force=True)`` does the same for a ``--no-block`` future).
        """
        import ray

        ray.cancel(self.value_ref, force=True, recursive=True)


def submit_cell(
    plan: CellPlan,
    filename: str,
    inputs: dict[str, Any],
    options: dict[str, Any],
    label: str,
) -> CellRun:
    """Submit a cell through the same path as ``@distribute`` (validation, warnings, records)."""
    from . import _session

    _session.ensure()
    cell_id = uuid.uuid4().hex
    spec = {
        "cell_id": cell_id,
        "source": plan.source,
        "filename": filename,
        "has_value": plan.has_value,
        "assigned": plan.assigned,
    }
    hub = _output_hub()
    spec["hub"] = _hub_name  # looked up by name on the first print, not shipped with each cell
    call = _cell_function().options(**{"name": label, **options})
    value_ref, payload_ref = call(spec, inputs)
    return CellRun(value_ref, payload_ref, cell_id, hub)


def unpicklable_inputs(inputs: dict[str, Any]) -> Iterable[tuple[str, Any, str]]:
    """``(name, value, reason)`` for each input that cannot be sent to a worker."""
    from ray import cloudpickle

    for name, value in inputs.items():
        try:
            cloudpickle.dumps(value, protocol=5, buffer_callback=lambda _buffer: None)
        except Exception as exc:  # noqa: BLE001
            yield name, value, f"{type(exc).__name__}: {exc}"

