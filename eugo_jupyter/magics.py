"""The ``%%distribute`` cell magic and the ``%eugo`` line magic: parse flags, call ``eugo.hpc``.

>>> %load_ext eugo_jupyter                                   # doctest: +SKIP
>>> %%distribute --num-cpus 2                                # doctest: +SKIP
... total = sum(x * x for x in data)    # `data` comes from the notebook, `total` goes back
... total

The cell runs as one task through the same path as ``@eugo.hpc.distribute`` (option checks,
infeasible diagnosis, submission records); ``eugo_jupyter.hpc._cells`` owns the wire format.

``--no-block --out fut`` returns at once with ``fut``, the future of the cell's last expression.
The names the cell assigns are bound in the notebook as soon as the kernel sees the cell has
finished: when ``eugo.hpc.get(fut)`` returns, or before the next cell runs, whichever is first.
"""

from __future__ import annotations

import difflib
import shlex
import sys
import threading
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, argument_group, magic_arguments, parse_argstring

from .exceptions import (
    EugoError,
    GetTimeoutError,
    InfeasibleRequestError,
    InfeasibleRequestWarning,
    OptionsError,
    SerializationError,
)
from .hpc import _cells, _checks, _futures, _options

__all__ = ["EugoMagics", "load"]

_CELL_FLAGS = (
    "--num-cpus N, --num-gpus F, --memory M, --gpu-memory M, --options W, --name NAME, --timeout S, "
    "--no-block --out VAR"
)
_EUGO_COMMANDS = ("status", "connect", "options", "check")
_POLL = 0.1


def _stack(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Apply decorators as if written top to bottom, so groups can be shared between magics."""

    def apply(func: Any) -> Any:
        for deco in reversed(decorators):
            func = deco(func)
        return func

    return apply


#: Per-call resources, shared by %%distribute, %eugo options and %eugo check.
resource_flags = _stack(
    argument_group("resources", "What one call asks the scheduler for (as in f.options(...))."),
    argument("--num-cpus", type=float, metavar="N", help="CPUs for the task (default 1)."),
    argument(
        "--num-gpus", type=float, metavar="F",
        help="GPUs: a fraction below 1 (0.25, 0.5) shares one GPU, or whole GPUs (1, 2).",
    ),
    argument("--memory", metavar="M", help='Memory to reserve: bytes or "4GB", "512MiB".'),
    argument(
        "--gpu-memory", metavar="M",
        help='GPU memory one call needs ("6GB"): sized into a num_gpus fraction of the cluster\'s GPUs.',
    ),
    argument(
        "--options", metavar="W",
        help="A ResourceOptions widget or a dict from the notebook; the flags above win over it.",
    ),
)  # fmt: skip

#: How a cell is run and waited for.
cell_flags = _stack(
    argument_group("running", "How the cell is submitted and waited for."),
    argument("--name", metavar="NAME", help="Task name shown in the dashboard and eugo.hpc.waiting()."),
    argument("--timeout", type=float, metavar="S", help="Cancel the cell if it has not finished after S seconds."),
    argument("--no-block", action="store_true", help="Return at once; needs --out VAR."),
    argument("--out", metavar="VAR", help="With --no-block: the variable that gets the cell's future."),
)  # fmt: skip


def _short(exc: BaseException) -> BaseException:
    """Show ``Type: message`` only: the frames would be the magic's, never the user's."""
    try:
        exc._render_traceback_ = lambda: [f"{type(exc).__name__}: {exc}"]  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return exc


def _parse(magic: Callable[..., Any], line: str, usage: str) -> Any:
    try:
        return parse_argstring(magic, line)
    except UsageError as exc:
        message = str(exc)
        words = [w for w in shlex.split(line, posix=True) if w.startswith("--")] if line else []
        known = [a for action in magic.parser._actions for a in action.option_strings]  # type: ignore[attr-defined]
        hints = [
            f"{word} is not a flag; did you mean {close[0]}?"
            for word in words
            if word.split("=")[0] not in known
            for close in [difflib.get_close_matches(word.split("=")[0], known, n=1)]
            if close
        ]
        hint = (" " + " ".join(hints)) if hints else ""
        raise UsageError(f"{message}.{hint} {usage}") from None


def _fake_traceback(frames: list[tuple[str, int, str]]) -> types.TracebackType | None:
    """A traceback whose frames point at the given (file, line, function) places.

    Each frame runs a one-line ``raise`` compiled at that line under that file name, so IPython
    prints the notebook cell's own source for frames in cells.
    """
    tbs: list[types.TracebackType] = []
    for filename, lineno, name in frames:
        code = compile("\n" * max(lineno - 1, 0) + "raise __eugo_marker__", filename, "exec")
        try:
            code = code.replace(co_name=name)
        except (TypeError, ValueError):
            pass
        try:
            exec(code, {"__eugo_marker__": _Marker, "__name__": "__main__"})
        except _Marker:
            tb = sys.exc_info()[2]
            if tb is not None and tb.tb_next is not None:
                tbs.append(tb.tb_next)
    for current, following in zip(tbs, tbs[1:]):
        current.tb_next = following
    if tbs:
        tbs[-1].tb_next = None
    return tbs[0] if tbs else None


class _Marker(Exception):
    pass


class RemoteCellError(EugoError, RuntimeError):
    """The cell raised an exception that could not be sent back as itself (only its text came)."""


def _adopt(value: Any, user_ns: dict[str, Any]) -> Any:
    """A function defined in the cell comes back seeing the notebook's globals, as if defined here."""
    if isinstance(value, types.FunctionType) and value.__module__ == "__main__":
        if value.__globals__ is not user_ns:
            adopted = types.FunctionType(
                value.__code__, user_ns, value.__name__, value.__defaults__, value.__closure__
            )
            adopted.__kwdefaults__ = value.__kwdefaults__
            adopted.__qualname__ = value.__qualname__
            adopted.__doc__ = value.__doc__
            adopted.__annotations__ = value.__annotations__
            adopted.__dict__.update(value.__dict__)
            return adopted
    return value


@dataclass
class _Pending:
    """A ``--no-block`` cell whose names are not bound yet."""

    run: _cells.CellRun
    out: str
    label: str
    inputs: set[str] = field(default_factory=set)


@magics_class
class EugoMagics(Magics):
    """``%%distribute`` and ``%eugo``."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._pending: dict[bytes, _Pending] = {}
        #: The last cell submitted (its futures), for inspection.
        self.last_run: _cells.CellRun | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ helpers

    def _cell_number(self) -> int:
        """The execution count of the cell being run (its ``In[N]``)."""
        known = getattr(self.shell.compile, "_filename_map", {})
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in known:
                return int(known[frame.f_code.co_filename])
            frame = frame.f_back  # type: ignore[assignment]
        return int(self.shell.execution_count)

    def _options(self, args: Any) -> dict[str, Any]:
        """Options from --options W, then the flags; checked by the API's rules."""
        options: dict[str, Any] = {}
        if args.options:
            name = args.options
            if name not in self.shell.user_ns:
                raise UsageError(
                    f"--options {name}: there is no variable {name!r} in the notebook. Pass the "
                    "name of a ResourceOptions widget or of a dict, such as "
                    "opts = {'num_cpus': 2} then --options opts."
                )
            source = self.shell.user_ns[name]
            value = getattr(source, "value", source)
            if not isinstance(value, dict):
                raise UsageError(
                    f"--options {name}: {name} is a {type(source).__name__}; it must be a "
                    "ResourceOptions widget (eugo.widgets.ResourceOptions()) or a dict of options."
                )
            options.update(value)
        for key in ("num_cpus", "num_gpus", "memory", "gpu_memory"):
            flag = getattr(args, key, None)
            if flag is not None:
                options[key] = int(flag) if isinstance(flag, float) and flag.is_integer() else flag
        if getattr(args, "name", None):
            options["name"] = args.name
        try:
            return _options.validate_options(options, "task")
        except OptionsError as exc:
            flag = str(exc).split("=")[0].replace("_", "-")
            raise UsageError(f"{exc} (from --{flag.lstrip('-')} or --options)") from None

    def _emit(self, chunks: list[tuple[str, str]]) -> None:
        for stream, text in chunks:
            target = sys.stderr if stream == "stderr" else sys.stdout
            target.write(text)
            target.flush()

    def _bind(self, payload: dict[str, Any], plan_inputs: set[str] | None = None) -> None:
        user_ns = self.shell.user_ns
        for name, value in payload.get("bound", {}).items():
            user_ns[name] = _adopt(value, user_ns)
        for name in payload.get("deleted", []):
            if plan_inputs is None or name in plan_inputs:
                user_ns.pop(name, None)
        for name, why in payload.get("unsent", {}).items():
            print(
                f"{name} was not brought back into the notebook: it cannot be pickled ({why}). "
                "It existed only on the worker; return something picklable instead "
                "(for example its data, or a path).",
                file=sys.stderr,
            )

    def _raise_cell_error(self, info: dict[str, Any]) -> None:
        __tracebackhide__ = True  # noqa: F841 - IPython hides this frame
        exc = info.get("exception")
        if not isinstance(exc, BaseException):
            exc = RemoteCellError(f"{info.get('type')}: {info.get('message')}")
        tb = _fake_traceback([tuple(f) for f in info.get("frames", [])])  # type: ignore[misc]
        exc = exc.with_traceback(tb)
        shell = self.shell
        try:
            stb = shell.InteractiveTB.structured_traceback(type(exc), exc, tb, tb_offset=0)
            exc._render_traceback_ = lambda: stb  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - fall back to IPython's own rendering
            pass
        raise exc

    def _check_picklable(self, inputs: dict[str, Any], error: BaseException) -> None:
        for name, value, problem in _cells.unpicklable_inputs(inputs):
            if callable(value):
                explained = _checks.explain_unpicklable(value, (), {}, error)
                if explained is not None:
                    raise _short(
                        SerializationError(f"The cell calls {name}, and {explained}")
                    ) from None
            raise _short(
                SerializationError(
                    f"The cell reads the variable {name!r} ({type(value).__name__}), which cannot "
                    f"be sent to a worker: {problem}. Nothing was submitted. Fix: create it inside "
                    "the cell, or pass what it is made from (a path, a config dict) and build it "
                    "there."
                )
            ) from None

    # ------------------------------------------------------------------ %%distribute

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
        __tracebackhide__ = True  # noqa: F841
        args = _parse(self.distribute, line, f"%%distribute takes {_CELL_FLAGS}.")
        options = self._options(args)
        if args.no_block and not args.out:
            raise UsageError(
                "--no-block needs --out VAR to name the cell's future, for example "
                "%%distribute --no-block --out fut; then eugo.hpc.get(fut)."
            )
        if args.out and not args.no_block:
            raise UsageError("--out VAR goes with --no-block; a blocking cell binds its own names.")
        if args.out and not args.out.isidentifier():
            raise UsageError(f"--out {args.out}: that is not a valid variable name.")
        if args.no_block and args.timeout is not None:
            raise UsageError(
                "--timeout applies to a blocking cell; with --no-block pass the timeout to "
                "eugo.hpc.get(fut, timeout=S)."
            )
        if args.timeout is not None and args.timeout <= 0:
            raise UsageError(f"--timeout {args.timeout:g}: the timeout must be a positive number of seconds.")

        number = self._cell_number()
        raw = (f"%%distribute {line}".rstrip()) + "\n" + cell
        filename = self.shell.compile.cache(raw, number)
        plan = _cells.analyse(cell, filename, first_line=2)
        user_ns = self.shell.user_ns
        inputs = {name: user_ns[name] for name in plan.free if name in user_ns}
        label = args.name or f"%%distribute In[{number}]"

        request = _options.request_of(options)
        if not args.no_block:
            snap = _checks.current_snapshot()
            verdict = _checks.infeasible_message(request, snap) if snap is not None else None
            if verdict:
                raise _short(
                    InfeasibleRequestError(
                        f"This cell {verdict} Nothing was submitted (a blocking cell would wait "
                        "forever); use --no-block to submit it anyway and wait for such a node."
                    )
                )

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", InfeasibleRequestWarning)
                run = _cells.submit_cell(plan, filename, inputs, options, label)
        except (SerializationError, TypeError, ValueError, AttributeError) as exc:
            self._check_picklable(inputs, exc)
            raise
        self.last_run = run

        if args.no_block:
            return self._start_no_block(run, args.out, label, set(inputs))
        value = self._wait(run, args.timeout, set(inputs))
        if plan.has_value and self.shell.displayhook.semicolon_at_end_of_expression(cell):
            return None  # a trailing ';' silences the output, as in a normal cell
        return value

    def _wait(self, run: _cells.CellRun, timeout: float | None, inputs: set[str]) -> Any:
        __tracebackhide__ = True  # noqa: F841
        import time

        import ray
        from ray.exceptions import GetTimeoutError as RayGetTimeoutError
        from ray.exceptions import RayTaskError

        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            # One get per poll (not a wait, then a get): a quick cell costs one round trip.
            while True:
                try:
                    value, payload = ray.get([run.value_ref, run.payload_ref], timeout=_POLL)
                    break
                except RayGetTimeoutError:
                    pass
                self._emit(run.read_output())
                if deadline is not None and time.monotonic() > deadline:
                    diagnosis = _futures.diagnose([run.value_ref])
                    run.cancel()
                    raise _short(
                        GetTimeoutError(
                            f"The cell did not finish within {timeout:g} s, so its task was "
                            f"cancelled.\n{diagnosis}"
                        )
                    )
        except KeyboardInterrupt:
            run.cancel()
            print("Interrupted: the cell's task was cancelled on the cluster.", file=sys.stderr)
            raise
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if not isinstance(cause, _cells.CellError):
                raise
            info = cause.info
            run.drain(info.get("sent", 0), self._emit)
            self._emit(info.get("tail", []))
            self._bind(info, inputs)
            self._raise_cell_error(info)
        run.drain(payload["sent"], self._emit)
        self._emit(payload["tail"])
        self._bind(payload, inputs)
        if "value_problem" in payload:
            print(
                f"The value of the cell's last expression cannot be sent back ({payload['value_problem']}); "
                "assign what you need to a picklable variable.",
                file=sys.stderr,
            )
        return value

    # ------------------------------------------------------------------ --no-block

    def _start_no_block(self, run: _cells.CellRun, out: str, label: str, inputs: set[str]) -> None:
        self.shell.user_ns[out] = run.value_ref
        pending = _Pending(run, out, label, inputs)
        with self._lock:
            self._pending[run.value_ref.binary()] = pending
        write = self._no_block_writer()
        thread = threading.Thread(
            target=self._pump, args=(run, write), name=f"eugo-{out}-output", daemon=True
        )
        thread.start()
        return None

    def _no_block_writer(self) -> Callable[[list[tuple[str, str]]], None]:
        """Where a --no-block cell's prints go: an Output under the cell in a notebook."""
        from .hpc._progress import in_notebook

        if in_notebook():
            import ipywidgets
            from IPython.display import display

            output = ipywidgets.Output()
            display(output)

            def to_widget(chunks: list[tuple[str, str]]) -> None:
                for stream, text in chunks:
                    (output.append_stderr if stream == "stderr" else output.append_stdout)(text)

            return to_widget
        return self._emit

    def _pump(self, run: _cells.CellRun, write: Callable[[list[tuple[str, str]]], None]) -> None:
        import ray

        try:
            while not run.ready(_POLL):
                chunks = run.read_output()
                if chunks:
                    write(chunks)
            try:
                info = ray.get(run.payload_ref)
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                info = cause.info if isinstance(cause, _cells.CellError) else {}
            run.drain(info.get("sent", 0), write)
            if info.get("tail"):
                write(info["tail"])
        except Exception:  # noqa: BLE001 - output is best effort; the result is in the future
            return

    def bind_finished(self, refs: list[Any] | None = None) -> None:
        """Bind the names of finished ``--no-block`` cells (all, or those among ``refs``)."""
        import ray

        with self._lock:
            if refs is None:
                candidates = list(self._pending.values())
            else:
                keys = {r.binary() for r in refs if hasattr(r, "binary")}
                candidates = [p for k, p in self._pending.items() if k in keys]
            finished, lost = [], []
            for p in candidates:
                try:
                    (finished if p.run.ready(0) else []).append(p)
                except Exception:  # noqa: BLE001 - its cluster is gone (shutdown, reconnect)
                    lost.append(p)
            for p in [*finished, *lost]:
                self._pending.pop(p.run.value_ref.binary(), None)
        for p in finished:
            inputs = p.inputs
            try:
                payload = ray.get(p.run.payload_ref)
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, _cells.CellError):
                    self._bind(cause.info, inputs)
                    print(
                        f"The --no-block cell {p.label} (future {p.out}) raised "
                        f"{cause.info.get('type')}: {cause.info.get('message')}; "
                        f"eugo.hpc.get({p.out}) shows the traceback.",
                        file=sys.stderr,
                    )
                continue
            except Exception:  # noqa: BLE001 - cancelled or lost: nothing to bind
                continue
            self._bind(payload, inputs)

    def _pre_run_cell(self, info: Any = None) -> None:
        if self._pending:
            try:
                self.bind_finished()
            except Exception as exc:  # noqa: BLE001 - never block the user's next cell
                print(f"eugo: could not bind a --no-block cell's names: {exc}", file=sys.stderr)

    def _after_get(self, refs: list[Any]) -> None:
        if self._pending:
            self.bind_finished(refs)

    # ------------------------------------------------------------------ %eugo

    @line_magic
    @magic_arguments()
    @argument("command", metavar="COMMAND", help="status | connect ADDRESS | options | check")
    @argument("address", nargs="?", metavar="ADDRESS", help="For connect: host:port of the head (GCS).")
    @resource_flags
    def eugo(self, line: str) -> Any:
        """The cluster from the notebook: ``%eugo status``, ``%eugo connect ADDRESS``,
        ``%eugo options [--num-gpus 0.25 ...]`` (the options widget), ``%eugo check`` (GPU check).
        """
        __tracebackhide__ = True  # noqa: F841
        usage = "Use %eugo status | connect ADDRESS | options [--num-cpus N --num-gpus F] | check."
        args = _parse(self.eugo, line, usage)
        command = args.command
        if command not in _EUGO_COMMANDS:
            close = difflib.get_close_matches(command, _EUGO_COMMANDS, n=1)
            hint = f" Did you mean %eugo {close[0]}?" if close else ""
            raise UsageError(f"%eugo has no command {command!r}.{hint} {usage}")
        if command == "connect" and not args.address:
            raise UsageError("%eugo connect needs an address: %eugo connect 10.0.0.5:6379.")
        if command != "connect" and args.address:
            raise UsageError(f"%eugo {command} takes no address ({args.address!r}). {usage}")
        flags = any(getattr(args, k) is not None for k in ("num_cpus", "num_gpus", "memory", "gpu_memory", "options"))
        if flags and command not in ("options", "check"):
            raise UsageError(f"Resource flags go with %eugo options or %eugo check, not %eugo {command}.")
        try:
            return getattr(self, f"_eugo_{command}")(args)
        except EugoError as exc:
            raise _short(exc) from None

    def _eugo_status(self, args: Any) -> Any:
        from . import hpc

        return hpc.cluster()

    def _eugo_connect(self, args: Any) -> Any:
        import ray

        from . import hpc
        from .hpc import _session

        if ray.is_initialized():
            current = _session.connection()
            if current.address != args.address:
                print(f"Disconnecting from {current.address} ({current.source}).")
                hpc.shutdown()
        hpc.init(address=args.address)
        return hpc.cluster()

    def _eugo_options(self, args: Any) -> Any:
        from .widgets import ResourceOptions

        options = self._options(args)
        return ResourceOptions(
            num_cpus=options.get("num_cpus", 1),
            num_gpus=options.get("num_gpus", 0),
            memory=options.get("memory"),
        )

    def _eugo_check(self, args: Any) -> Any:
        from .gpu import check

        options = self._options(args)
        num_gpus = options.pop("num_gpus", 1)
        return check(num_gpus=num_gpus, **options)


# ---------------------------------------------------------------------- loading


def _syntax_transformer(shell: Any) -> Callable[[list[str]], list[str]]:
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


def load(shell: Any) -> None:
    """Register the magics once per shell and put ``eugo`` in the namespace (idempotent)."""
    import eugo_jupyter

    shell.push({"eugo": eugo_jupyter})
    if "EugoMagics" in shell.magics_manager.registry:
        return
    magics = EugoMagics(shell)
    shell.register_magics(magics)
    shell.input_transformers_cleanup.append(_syntax_transformer(shell))
    shell.events.register("pre_run_cell", magics._pre_run_cell)
    _futures.get_hooks.append(magics._after_get)
