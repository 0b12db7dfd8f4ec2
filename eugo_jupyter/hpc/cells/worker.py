"""The worker side of a ``%%distribute`` cell: run its code, stream its output, send names back.

The task swaps ``sys.stdout``/``sys.stderr`` for a buffer that a thread sends, every
:data:`FLUSH_INTERVAL` seconds, to a small per-session actor (:class:`OutputHub`); the kernel
polls the hub while it waits (see :class:`~eugo_jupyter.hpc.cells.run.CellRun`), so prints show
under the cell while it runs, without Ray's ``(pid=...)`` prefix. What was still buffered at
the end travels back with the result. Nothing here imports IPython.

>>> spec = {"cell_id": "c1", "source": "y = x * 2\\ny", "filename": "<cell>",
...         "has_value": True, "assigned": ("y",)}
>>> value, payload = notebook_cell(spec, {"x": 21})
>>> value, payload["bound"]
(42, {'y': 42})
"""

from __future__ import annotations

import ast
import builtins
import io
import sys
import threading
import traceback
from typing import Any

from ...exceptions import CellError
from .._serialized import pickle_problem

__all__ = ["FLUSH_INTERVAL", "Chunks", "OutputHub", "notebook_cell", "pickle_problem"]

#: How often the task sends buffered output, and the kernel asks for it (seconds).
FLUSH_INTERVAL = 0.1

Chunks = list[tuple[str, str]]  # [("stdout" | "stderr", text), ...]


class OutputHub:
    """Holds output batches sent by running cells until the kernel reads them (one per session)."""

    def __init__(self) -> None:
        self._batches: dict[str, dict[int, Chunks]] = {}
        self._next: dict[str, int] = {}  # per call: the next batch take() hands out
        self._sent: dict[str, int] = {}  # per finished call: how many batches it sent

    def write(self, cell_id: str, seq: int, chunks: Chunks) -> None:
        self._batches.setdefault(cell_id, {})[seq] = chunks

    def read(self, cell_id: str, since: int) -> tuple[int, Chunks]:
        """Batches ``since``, ``since + 1``, ... that have arrived, in order (then dropped here)."""
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

    # -- calls (tasks whose prints a notebook shows; see hpc/_printed.py) ----------------------
    def done(self, key: str, sent: int) -> None:
        """A call finished after sending ``sent`` batches."""
        self._sent[key] = sent

    def take(self) -> tuple[dict[str, Chunks], list[str]]:
        """Every batch that arrived since the last take, in order per key, and the keys whose
        calls finished with all their batches taken (then forgotten here)."""
        out: dict[str, Chunks] = {}
        for key in list(self._batches):
            since = self._next.get(key, 0)
            since, chunks = self.read(key, since)
            self._next[key] = since
            if chunks:
                out[key] = chunks
        finished = [key for key, sent in self._sent.items() if self._next.get(key, 0) >= sent]
        for key in finished:
            self._sent.pop(key)
            self._next.pop(key, None)
        return out, finished


class _Sink:
    """Collects a task's output and sends it to the hub every FLUSH_INTERVAL seconds."""

    def __init__(self, hub_name: str | None, cell_id: str) -> None:
        self._hub_name, self._cell_id = hub_name, cell_id
        self._hub: Any = None
        self.lost = False  # no hub could be found: lines go to the process's own streams
        self._lock = threading.Lock()
        self._chunks: Chunks = []
        self._sending = threading.Lock()  # one batch number per batch, whichever thread sends
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, stream: str, text: str) -> None:
        if self._thread is None and self._hub_name is not None and not self.lost:
            # Found and started on the first print: a quiet cell pays for neither.
            import ray

            try:
                self._hub = ray.get_actor(self._hub_name)
            except ValueError:
                # No hub on this cluster (its kernel went away, or has not made one since it
                # connected again): the lines go to Ray's log stream. Never fail the call.
                self.lost = True
            else:
                self._thread = threading.Thread(
                    target=self._loop, name="eugo-cell-output", daemon=True
                )
                self._thread.start()
        if self.lost:
            real = sys.__stderr__ if stream == "stderr" else sys.__stdout__
            if stream in ("stdout", "stderr") and real is not None:
                real.write(text)
            return
        with self._lock:
            if self._chunks and self._chunks[-1][0] == stream:
                self._chunks[-1] = (stream, self._chunks[-1][1] + text)
            else:
                self._chunks.append((stream, text))

    def _take(self) -> Chunks:
        with self._lock:
            chunks, self._chunks = self._chunks, []
        return chunks

    def send(self) -> Any:
        """Send what is buffered as the next batch; the hub's reply to wait on, or None."""
        with self._sending:
            chunks = self._take()
            if not chunks or self._hub is None:
                return None
            ref = self._hub.write.remote(self._cell_id, self.sent, chunks)
            self.sent += 1
            return ref

    def _loop(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            self.send()

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


def _collect(ns: dict[str, Any], plan: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    bound, unsent = {}, {}
    for name in plan["assigned"]:
        if name in ns:
            problem = pickle_problem(ns[name])
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
    except Exception as exc:  # noqa: BLE001 - the user's error, sent back as a CellError
        sys.stdout, sys.stderr = saved
        tail = sink.close()
        frames = _cell_frames(exc.__traceback__, spec["filename"])
        text = (
            "Traceback (most recent call last):\n"
            + "".join(
                traceback.format_list(
                    traceback.StackSummary.from_list([(f, n, q, None) for f, n, q in frames])
                )
            )
            + "".join(traceback.format_exception_only(type(exc), exc))
        )
        info = {
            "frames": frames,
            "type": type(exc).__name__,
            "message": str(exc),
            "exception": None if pickle_problem(exc) else exc.with_traceback(None),
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
        problem = pickle_problem(value)
        if problem is not None:
            payload["value_problem"] = f"{type(value).__name__}; {problem}"
            value = None
    return value, payload
