"""The driver side of a ``%%distribute`` cell: submit, wait, show its output, bind its names.

:func:`submit_cell` sends a cell through the same path as ``@eugo.hpc.distribute`` (option
checks, infeasible diagnosis, submission records, the output every call has) and returns a
:class:`CellRun`, which owns what follows: waiting (with a timeout that cancels the task), the
output of a blocking cell handed to ``emit`` while it runs, and binding the names the cell
assigned into the notebook's namespace (a plain dict). The magic only parses flags and renders
errors.

>>> plan = analyze("total = sum(data)")
>>> run = submit_cell(plan, "<cell>", {"data": [1, 2]}, {}, "demo")  # doctest: +SKIP
>>> run.wait(emit=print)                                   # doctest: +SKIP
>>> user_ns = {}; run.bind(run.payload, user_ns); user_ns  # doctest: +SKIP
{'total': 3}
"""

from __future__ import annotations

import sys
import time
import types
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ...exceptions import CellError, GetTimeoutError
from .._output.hub import Chunks
from .analysis import CellPlan
from .worker import notebook_cell, pickle_problem

__all__ = ["CellRun", "adopt", "submit_cell", "unpicklable_inputs"]

#: How often a waiting kernel polls for the result and the output (seconds).
POLL = 0.1

Emit = Callable[[Chunks], object]

_function: Any = None


def _cell_function() -> Any:
    global _function
    from .._distribute import DistributedFunction

    if _function is None:
        _function = DistributedFunction(notebook_cell, {"num_returns": 2})
    return _function


def adopt(value: Any, user_ns: dict[str, Any]) -> Any:
    """A function defined in the cell comes back seeing the notebook's globals, as if made there."""
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


class CellRun:
    """One submitted cell: its two futures (value, payload), its output, its names.

    ``payload`` is set once :meth:`wait` returned (what the worker sent back besides the value).
    """

    def __init__(
        self,
        value_ref: Any,
        payload_ref: Any,
        inputs: Iterable[str] = (),
        shown: deque[Chunks] | None = None,
    ) -> None:
        self.value_ref, self.payload_ref = value_ref, payload_ref
        #: The notebook names the cell read: only these may be deleted by a ``del`` in the cell.
        self.inputs = set(inputs)
        #: A blocking cell's output, as the router took it from the hub, until it is emitted.
        self.shown: deque[Chunks] = deque() if shown is None else shown
        self.payload: dict[str, Any] | None = None

    # -- state ------------------------------------------------------------------------------
    def ready(self, timeout: float = 0) -> bool:
        import ray

        done, _ = ray.wait([self.payload_ref], timeout=timeout, fetch_local=False)
        return bool(done)

    def cancel(self) -> None:
        """Stop the cell's task: a queued one never starts, a running one's worker is ended.

        Ray 2.60 ignores a polite cancel for a task with two results, so this is the forced one
        (``eugo.hpc.cancel(fut, force=True)`` does the same for a ``--no-block`` future). A task
        that has finished is left alone: ``ray.cancel`` racing a task's completion aborts the
        driver in Ray 2.60 (see :mod:`eugo_jupyter.hpc._batching`); only the user's timeout or
        Ctrl-C of a still running cell calls it.
        """
        import ray

        if self.ready():
            return
        ray.cancel(self.value_ref, force=True, recursive=True)

    # -- output -----------------------------------------------------------------------------
    def emit_output(self, emit: Emit, final: bool = False, printed: bool = True) -> None:
        """Hand ``emit`` what the cell printed since the last time (all of it when ``final``:
        the call sent its last lines before its result was ready). A cell that printed
        nothing asks the hub nothing. While the cell runs, the router's own thread takes its
        lines from the hub: this loop never waits on the cluster for output, so a cluster that
        dies meanwhile is noticed by the wait's watch within seconds."""
        from .. import _output

        try:
            if printed and final:
                _output.settle([self.value_ref])
        except Exception:  # noqa: BLE001 - a lost hub loses output, never the result
            pass
        while self.shown:
            emit(self.shown.popleft())

    # -- waiting ----------------------------------------------------------------------------
    def wait(self, timeout: float | None = None, emit: Emit | None = None) -> Any:
        """Block until the cell finished, streaming its output to ``emit``; returns its value.

        Raises :class:`~eugo_jupyter.exceptions.CellError` when the cell's code raised (its
        ``info`` carries the traceback; the output was emitted first), and
        :class:`~eugo_jupyter.exceptions.GetTimeoutError` after ``timeout`` seconds, having
        cancelled the task. Ctrl-C cancels the task too.
        """
        import ray
        from ray.exceptions import GetTimeoutError as RayGetTimeoutError
        from ray.exceptions import RayTaskError

        from .._futures import diagnose
        from .._watch import Watch

        emit = emit or (lambda _chunks: None)
        deadline = None if timeout is None else time.monotonic() + timeout
        watch = Watch()  # a dead cluster raises ClusterError within seconds (Ray would wait on)
        try:
            # One get per poll (not a wait, then a get): a quick cell costs one round trip.
            while True:
                try:
                    value, payload = ray.get([self.value_ref, self.payload_ref], timeout=POLL)
                    break
                except RayGetTimeoutError:
                    pass
                watch.check()  # a dead cluster: ClusterError within seconds
                self.emit_output(emit)
                if deadline is not None and time.monotonic() > deadline and not self.ready():
                    diagnosis = diagnose([self.value_ref])
                    self.cancel()
                    raise GetTimeoutError(
                        f"The cell did not finish within {timeout:g} s, so its task was "
                        f"cancelled.\n{diagnosis}"
                    )
        except KeyboardInterrupt:
            self.cancel()
            raise
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if not isinstance(cause, CellError):
                raise
            self.payload = cause.info
            self.emit_output(emit, True, cause.info.get("printed", True))
            raise cause from None
        self.payload = payload
        self.emit_output(emit, True, payload.get("printed", True))
        return value

    def result_payload(self) -> dict[str, Any] | None:
        """A finished ``--no-block`` cell's payload (its error's ``info`` if it raised), or None
        if it was cancelled or its cluster is gone."""
        import ray

        try:
            return dict(ray.get(self.payload_ref))
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            return cause.info if isinstance(cause, CellError) else None
        except Exception:  # noqa: BLE001 - cancelled or lost: nothing to bind
            return None

    # -- names ------------------------------------------------------------------------------
    def bind(self, payload: dict[str, Any], user_ns: dict[str, Any]) -> None:
        """Put the names the cell assigned into ``user_ns`` and drop those it deleted.

        A name that could not be pickled is reported on stderr: it existed only on the worker.
        """
        for name, value in payload.get("bound", {}).items():
            user_ns[name] = adopt(value, user_ns)
        for name in payload.get("deleted", []):
            if name in self.inputs:
                user_ns.pop(name, None)
        for name, why in payload.get("unsent", {}).items():
            print(
                f"{name} was not brought back into the notebook: it cannot be pickled ({why}). "
                "It existed only on the worker; return something picklable instead "
                "(for example its data, or a path).",
                file=sys.stderr,
            )


def submit_cell(
    plan: CellPlan,
    filename: str,
    inputs: dict[str, Any],
    options: dict[str, Any],
    label: str,
    echo: Emit | None = None,
) -> CellRun:
    """Submit a cell through the same path as ``@distribute`` (validation, warnings, records).

    Its output is a call's: a blocking cell's (``echo`` None) is handed to :meth:`CellRun.wait`'s
    ``emit``; a ``--no-block`` cell's goes to an output area of the calling cell in a notebook
    (as a task's does), else to ``echo`` as it arrives.
    """
    from .. import _output, _session

    _session.ensure()
    router = _output.cell_router()
    run_shown: deque[Chunks] = deque()
    writer = run_shown.append if echo is None else (None if router.tasks else echo)
    spec = {
        "source": plan.source,
        "filename": filename,
        "has_value": plan.has_value,
        "assigned": plan.assigned,
    }
    call = _cell_function().options(**{"name": label, **options})
    with router.claim(label if writer is not None else None):
        value_ref, payload_ref = call(spec, inputs)
    if writer is not None:
        router.track(value_ref, label, writer)
    return CellRun(value_ref, payload_ref, inputs, run_shown)


def unpicklable_inputs(inputs: dict[str, Any]) -> Iterable[tuple[str, Any, str]]:
    """``(name, value, reason)`` for each input that cannot be sent to a worker."""
    for name, value in inputs.items():
        problem = pickle_problem(value)
        if problem is not None:
            yield name, value, problem
