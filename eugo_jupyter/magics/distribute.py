"""``%%distribute``: parse the flags, submit the cell, hand the running cell to :class:`CellRun`.

>>> %%distribute --num-cpus 2                                # doctest: +SKIP
... total = sum(x * x for x in data)    # `data` comes from the notebook, `total` goes back
... total

The cell runs as one task through the same path as ``@eugo.hpc.distribute`` (option checks,
infeasible diagnosis, submission records); ``eugo_jupyter.hpc.cells`` owns the wire format,
the waiting, the streamed output and the binding of names.

``--no-block --out fut`` returns at once with ``fut``, the future of the cell's last expression.
The names the cell assigns are bound in the notebook as soon as the kernel sees the cell has
finished: when ``eugo.hpc.get(fut)`` returns, or before the next cell runs, whichever is first.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import magic_arguments

from ..exceptions import (
    CellError,
    ClusterError,
    GetTimeoutError,
    InfeasibleRequestError,
    InfeasibleRequestWarning,
    SerializationError,
)
from ..hpc._internal import (
    cells,
    current_snapshot,
    explain_unpicklable,
    infeasible_message,
    optimize_mode,
    optimized_inputs,
    request_of,
)
from .flags import CELL_FLAGS, cell_flags, check_cell_flags, options_from, parse, resource_flags
from .tracebacks import raise_cell_error, short

__all__ = ["EugoMagics", "syntax_transformer"]


@dataclass
class _Pending:
    """A ``--no-block`` cell whose names are not bound yet."""

    run: cells.CellRun
    out: str
    label: str


def _emit(chunks: cells.Chunks) -> None:
    for stream, text in chunks:
        target = sys.stderr if stream == "stderr" else sys.stdout
        target.write(text)
        target.flush()


@magics_class
class EugoMagics(Magics):
    """``%%distribute``: one cell as one task on the cluster."""

    shell: Any  # IPython types it Optional; a registered magic always has its shell

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._pending: dict[bytes, _Pending] = {}
        #: The last cell submitted (its futures), for inspection.
        self.last_run: cells.CellRun | None = None
        self._lock = threading.Lock()

    def _cell_number(self) -> int:
        """The execution count of the cell being run (its ``In[N]``)."""
        known = getattr(self.shell.compile, "_filename_map", {})
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in known:
                return int(known[frame.f_code.co_filename])
            frame = frame.f_back  # type: ignore[assignment]
        return int(self.shell.execution_count)

    def _check_picklable(self, inputs: dict[str, Any], error: BaseException) -> None:
        for name, value, problem in cells.unpicklable_inputs(inputs):
            if callable(value):
                explained = explain_unpicklable(value, (), {}, error)
                if explained is not None:
                    raise short(
                        SerializationError(f"The cell calls {name}, and {explained}")
                    ) from None
            raise short(
                SerializationError(
                    f"The cell reads the variable {name!r} ({type(value).__name__}), which cannot "
                    f"be sent to a worker: {problem}. Nothing was submitted. Fix: create it inside "
                    "the cell, or pass what it is made from (a path, a config dict) and build it "
                    "there."
                )
            ) from None

    @cell_magic
    @magic_arguments()
    @resource_flags
    @cell_flags
    def distribute(self, line: str, cell: str) -> Any:
        """Run this cell as one task on the cluster.

        The variables it reads come from the notebook, the names it assigns come back, its last
        expression is displayed, its prints appear while it runs. Example::

            %%distribute --num-cpus 4 --num-gpus 0.25
            model = train(data)
            model.score
        """
        __tracebackhide__ = True
        args = parse(self.distribute, line, f"%%distribute takes {CELL_FLAGS}.")
        options = options_from(args, self.shell.user_ns)
        check_cell_flags(args)

        number = self._cell_number()
        raw = (f"%%distribute {line}".rstrip()) + "\n" + cell
        filename = self.shell.compile.cache(raw, number)
        plan = cells.analyze(cell, filename, first_line=2)
        user_ns = self.shell.user_ns
        inputs = {name: user_ns[name] for name in plan.free if name in user_ns}
        label = args.name or f"%%distribute In[{number}]"
        options, mode = optimize_mode(options)
        if mode:  # --optimize: the notebook's functions the cell calls run through the optimizer
            inputs = optimized_inputs(inputs, mode, options)

        if not args.no_block:
            snap = current_snapshot()
            verdict = infeasible_message(request_of(options), snap) if snap is not None else None
            if verdict:
                raise short(
                    InfeasibleRequestError(
                        f"This cell {verdict} Nothing was submitted (a blocking cell would wait "
                        "forever); use --no-block to submit it anyway and wait for such a node."
                    )
                )

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", InfeasibleRequestWarning)
                echo = _emit if args.no_block else None  # where a --no-block cell's lines go
                run = cells.submit_cell(plan, filename, inputs, options, label, echo)
        except (SerializationError, TypeError, ValueError, AttributeError) as exc:
            self._check_picklable(inputs, exc)
            raise
        self.last_run = run

        if args.no_block:
            self._start_no_block(run, args.out, label)
            return None
        value = self._wait(run, args.timeout)
        if plan.has_value and self.shell.displayhook.semicolon_at_end_of_expression(cell):
            return None  # a trailing ';' silences the output, as in a normal cell
        return value

    def _wait(self, run: cells.CellRun, timeout: float | None) -> Any:
        __tracebackhide__ = True
        try:
            value = run.wait(timeout, _emit)
        except KeyboardInterrupt:
            print("Interrupted: the cell's task was cancelled on the cluster.", file=sys.stderr)
            raise
        except (GetTimeoutError, ClusterError) as exc:
            raise short(exc) from None
        except CellError as exc:
            run.bind(exc.info, self.shell.user_ns)
            raise_cell_error(self.shell, exc.info)
        payload = run.payload or {}
        run.bind(payload, self.shell.user_ns)
        if "value_problem" in payload:
            print(
                "The value of the cell's last expression cannot be sent back "
                f"({payload['value_problem']}); assign what you need to a picklable variable.",
                file=sys.stderr,
            )
        return value

    # -- --no-block -------------------------------------------------------------------------
    def _start_no_block(self, run: cells.CellRun, out: str, label: str) -> None:
        # Its output is a call's: in a notebook under this cell (shown there even after the
        # cell finished, kept for eugo.hpc.logs(fut)), else on this process's streams.
        self.shell.user_ns[out] = run.value_ref
        with self._lock:
            self._pending[run.value_ref.binary()] = _Pending(run, out, label)

    def bind_finished(self, refs: list[Any] | None = None) -> None:
        """Bind the names of finished ``--no-block`` cells (all, or those among ``refs``)."""
        with self._lock:
            if refs is None:
                candidates = list(self._pending.values())
            else:
                keys = {r.binary() for r in refs if hasattr(r, "binary")}
                candidates = [p for k, p in self._pending.items() if k in keys]
            finished: list[_Pending] = []
            lost: list[_Pending] = []
            for p in candidates:
                try:
                    (finished if p.run.ready(0) else []).append(p)
                except Exception:  # noqa: BLE001 - its cluster is gone (shutdown, reconnect)
                    lost.append(p)
            for p in [*finished, *lost]:
                self._pending.pop(p.run.value_ref.binary(), None)
        for p in finished:
            p.run.emit_output(_emit, final=True)  # its last lines first, as for a call
            payload = p.run.result_payload()
            if payload is None:
                continue  # cancelled or lost: nothing to bind
            p.run.bind(payload, self.shell.user_ns)
            if "frames" in payload:  # the cell raised: its info, not a result
                print(
                    f"The --no-block cell {p.label} (future {p.out}) raised "
                    f"{payload.get('type')}: {payload.get('message')}; "
                    f"eugo.hpc.get({p.out}) shows the traceback.",
                    file=sys.stderr,
                )

    def pre_run_cell(self, info: Any = None) -> None:
        """Before each cell: bind the names of ``--no-block`` cells that finished meanwhile."""
        if self._pending:
            try:
                self.bind_finished()
            except Exception as exc:  # noqa: BLE001 - never block the user's next cell
                print(f"eugo: could not bind a --no-block cell's names: {exc}", file=sys.stderr)

    def after_get(self, refs: list[Any]) -> None:
        """After ``eugo.hpc.get``: bind the names of the ``--no-block`` cells it waited for."""
        if self._pending:
            self.bind_finished(refs)


def syntax_transformer(shell: Any) -> Callable[[list[str]], list[str]]:
    """Reports a ``%%distribute`` cell's syntax error before anything runs, as a normal cell."""

    def check(lines: list[str]) -> list[str]:
        if not lines or not lines[0].lstrip().startswith("%%distribute"):
            return lines
        body = "".join(lines[1:])
        try:
            compile("\n" + body, "<cell>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            filename = shell.compile.cache("".join(lines), shell.execution_count)
            exc.filename = filename
            text = (exc.text or "").lstrip()
            if text.startswith(("%", "!")):
                exc.msg = (
                    f"{exc.msg} (IPython magics and !commands do not run inside %%distribute: "
                    "the cell runs as plain Python on a worker)"
                )
            raise exc.with_traceback(None) from None
        return lines

    check.has_side_effects = True  # type: ignore[attr-defined]  # skipped by is-complete checks
    return check
