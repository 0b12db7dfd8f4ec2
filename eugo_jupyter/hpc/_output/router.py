"""The kernel's side of a call's output: which cell made each call, and the pump from the hub.

Ray streams a worker's lines to whatever cell runs when they arrive (JupyterLab then shows them
under the wrong cell, or drops them once the cell that made the call has finished), folds lines
that several workers print alike, and names only the process. Here each call's lines, taken from
the hub (:mod:`.hub`), go into an output area that the calling cell owns (a display with a
``display_id``, created in that cell at its first call and updated later with
``update_display``, which JupyterLab, Notebook 7 and VS Code route by id whatever cell runs
now; JupyterLab and Notebook 7 are checked in a browser). Each line carries the function's
name, and the node once more than one node printed into the cell. What the call's C code or
subprocesses wrote to its descriptors arrives as streams of its own (``fd:stdout``,
``fd:stderr``) and is shown the same way. A call tracked with a *writer* (a blocking
``%%distribute`` cell, whose prints are the cell's own) gets its chunks handed to it instead.

A flood is capped: at most :data:`PER_CALL` lines of one call and :data:`PER_CELL` lines per
cell are shown (``EUGO_OUTPUT_PER_CALL`` / ``EUGO_OUTPUT_PER_CELL`` change them), then one line
says how many more there are; ``eugo.hpc.logs(fut)`` returns every line of a call.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from .hub import Chunks

__all__ = ["PER_CALL", "PER_CELL", "Router", "Writer", "task_ref"]

#: Where the chunks of a call tracked with a writer go (streams ``stdout`` and ``stderr``).
Writer = Callable[[Chunks], object]


def _limit(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


#: Lines of one call shown under its cell; the rest are counted, and kept for ``logs(fut)``.
PER_CALL = _limit("EUGO_OUTPUT_PER_CALL", 200)
#: Lines shown under one cell, all its calls together.
PER_CELL = _limit("EUGO_OUTPUT_PER_CELL", 1000)
#: How often the kernel collects lines while nothing waits for them (seconds).
POLL = 0.25
#: How long one take from the hub may wait on its cluster (seconds), and the slices it waits in:
#: between slices the pump sees that the cluster was let go of, and leaves Ray alone.
TAKE_S, TAKE_SLICE_S = 10.0, 0.1
#: Calls whose lines the kernel remembers for ``logs(fut)`` (the oldest are let go).
KEEP_CALLS = 100_000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class _Call:
    """One call's lines: all of them (for ``logs``), and how many its cell showed."""

    __slots__ = ("label", "area", "writer", "lines", "partial", "node", "finished")

    def __init__(self, label: str, area: _Area | None, writer: Writer | None = None) -> None:
        self.label = label
        self.area = area
        self.writer = writer
        self.lines: list[str] = []
        self.partial: dict[str, str] = {}  # per stream: text after the last newline
        self.node = ""
        self.finished = False


class _Area:
    """The output area a cell owns: a display created in the cell, updated by its id."""

    def __init__(self) -> None:
        self.handle: Any = None
        self.shown: list[tuple[str, str, str]] = []  # (label, node, line)
        self.per_call: dict[int, int] = {}  # id(call) -> lines of it shown
        self.hidden: OrderedDict[str, int] = OrderedDict()  # label -> lines not shown
        self.nodes: set[str] = set()
        self.dirty = False

    def open(self) -> None:
        from IPython.display import display

        # No data until a line comes: a cell whose calls print nothing shows (and saves) no
        # output of ours, not even an empty text; the first update gives it its text.
        self.handle = display({}, raw=True, display_id=True)

    def add(self, call: _Call, line: str) -> None:
        self.dirty = True
        if call.node:  # a --no-block cell's lines come without one
            self.nodes.add(call.node)
        count = self.per_call.get(id(call), 0)
        if count < PER_CALL and len(self.shown) < PER_CELL:
            self.per_call[id(call)] = count + 1
            self.shown.append((call.label, call.node, line))
        else:
            self.hidden[call.label] = self.hidden.get(call.label, 0) + 1

    def text(self) -> str:
        many = len(self.nodes) > 1
        out = [
            f"[{label} @{node}] {line}" if many and node else f"[{label}] {line}"
            for label, node, line in self.shown
        ]
        if self.hidden:
            more = sum(self.hidden.values())
            names = ", ".join(self.hidden)
            out.append(
                f"... {more:,} more line{'s' if more != 1 else ''} from {names} not shown "
                f"(at most {PER_CALL} per call, {PER_CELL} per cell): eugo.hpc.logs(fut) "
                "returns every line a call printed."
            )
        return "\n".join(out)

    def update(self) -> None:
        if self.dirty and self.handle is not None:
            self.dirty = False
            self.handle.update({"text/plain": self.text()}, raw=True)


class Router:
    """The kernel's side: which cell made each call, and the pump from the hub to the cells."""

    def __init__(self, shell: Any, tasks: bool) -> None:
        self.shell = shell
        #: Whether every call's lines are routed (a notebook kernel), or only cells' (a shell).
        self.tasks = tasks
        self.hub_name = f"eugo-calls-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.hub: Any = None
        self.cluster = ""  # the GCS address the hub lives on
        self.calls: OrderedDict[str, _Call] = OrderedDict()  # task id (hex) -> its call
        self.areas: OrderedDict[str, _Area] = OrderedDict()  # cell's message id -> its area
        self.skip: set[str] = set()  # labels of eugo's own functions (not wrapped)
        self.actors: set[str] = set()  # class names whose methods were wrapped
        self.claimed: str | None = None  # a label whose submitter tracks it itself
        self.lock = threading.RLock()  # the calls, the areas, the hub
        #: One take from the hub at a time, so that lines keep their order; held while the take
        #: waits on the cluster, which :attr:`lock` never is (see :meth:`pump`).
        self.pumping = threading.RLock()
        self.thread: threading.Thread | None = None
        self.exported = False  # whether a wrapped function or class names the hub

    # -- at export and at submission (the cell's own thread) ---------------------------------
    def ensure_hub(self) -> None:
        import ray

        self.exported = True
        # One hub per cluster: a new connection (another address, or after a restart) gets its
        # own, under the same name, so functions exported before still find it.
        cluster = ray.get_runtime_context().gcs_address
        if self.hub is None or self.cluster != cluster:
            from .hub import OutputHub

            self.cluster = cluster
            self.hub = ray.remote(OutputHub).options(num_cpus=0, name=self.hub_name).remote()
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="eugo-output", daemon=True)
            self.thread.start()

    def cell(self) -> str:
        header = getattr(self.shell, "parent_header", None) or {}
        return str(header.get("header", {}).get("msg_id", ""))

    def track(self, ref: Any, label: str, writer: Writer | None = None) -> _Call | None:
        return self.track_task(task_ref(ref).task_id().hex(), label, writer)

    def track_task(self, task_id: str, label: str, writer: Writer | None = None) -> _Call | None:
        """Lines of the task ``task_id`` (hex) go under the cell running now, named ``label``
        (or to ``writer``, as chunks)."""
        if writer is None and (label in self.skip or label == self.claimed):
            return None
        with self.lock:
            area = None if writer is not None else self._area()
            call = self.calls[task_id] = _Call(label, area, writer)
            while len(self.calls) > KEEP_CALLS:
                self.calls.popitem(last=False)
            return call

    def _area(self) -> _Area:
        cell = self.cell()
        area = self.areas.get(cell)
        if area is None:
            area = self.areas[cell] = _Area()
            area.open()  # now, in the calling cell: lines printed later land here
            while len(self.areas) > 1000:
                self.areas.popitem(last=False)
        return area

    @contextlib.contextmanager
    def claim(self, label: str | None) -> Iterator[None]:
        """Calls named ``label`` submitted inside get no area: the submitter tracks them."""
        self.claimed = label
        try:
            yield
        finally:
            self.claimed = None

    # -- collecting -----------------------------------------------------------------------
    def pump(self) -> None:
        """Take what the hub holds and put each line under its call's cell."""
        import ray

        with self.pumping:
            with self.lock:
                # Never from a disconnected kernel: ray.get would start a fresh default Ray
                # here, on this thread, racing the notebook's own next connection.
                hub = self.hub
                if hub is None or not ray.is_initialized():
                    return
            # Outside the lock: on a cluster that just died this waits (up to TAKE_S), in slices,
            # so that letting go of that cluster (disconnect, then Ray's shutdown) waits one
            # slice at most, and Ray never shuts down under a thread waiting in it.
            take = hub.take.remote()
            deadline = time.monotonic() + TAKE_S
            while not ray.wait([take], timeout=TAKE_SLICE_S)[0]:
                if self.hub is not hub:
                    return  # let go of meanwhile: its answer is dropped
                if time.monotonic() > deadline:
                    raise TimeoutError("the output hub did not answer")  # the loop goes on
            batches, finished = ray.get(take)
            with self.lock:
                if self.hub is not hub:
                    return  # let go of meanwhile: these calls' cells are gone with it
                self._apply(batches, finished)

    def _apply(self, batches: dict[str, Chunks], finished: list[str]) -> None:
        touched: set[int] = set()
        for key, chunks in batches.items():
            call = self.calls.get(key)
            if call is None:
                call = self.calls[key] = _Call("?", None)
            self._feed(call, chunks)
            if call.area is not None:
                touched.add(id(call.area))
        for key in finished:
            call = self.calls.get(key)
            if call is not None:
                self._finish(call)
                if call.area is not None:
                    touched.add(id(call.area))
        for area in self.areas.values():
            if id(area) in touched:
                area.update()

    def _feed(self, call: _Call, chunks: Chunks) -> None:
        if call.writer is not None:  # as printed: fd:stdout is stdout, a note goes to stderr
            call.writer(
                [
                    ("stderr" if s == "note" else s.removeprefix("fd:"), t + "\n" * (s == "note"))
                    for s, t in chunks
                    if s != "node"
                ]
            )
        for stream, text in chunks:
            if stream == "node":
                call.node = text
            elif stream == "note":  # a line about the call (not printed by it)
                if call.area is not None:
                    call.area.add(call, text)
            else:  # stdout, stderr, and fd:stdout, fd:stderr (written straight to them)
                self._lines(call, stream, _ANSI.sub("", text))

    def _finish(self, call: _Call) -> None:
        call.finished = True
        for rest in list(call.partial.values()):
            if rest:
                self._line(call, rest)
        call.partial.clear()

    def _lines(self, call: _Call, stream: str, text: str) -> None:
        text = call.partial.pop(stream, "") + text
        *whole, rest = text.split("\n")
        for line in whole:
            self._line(call, line)
        if rest:
            call.partial[stream] = rest

    def _line(self, call: _Call, line: str) -> None:
        call.lines.append(line)
        if call.area is not None:
            call.area.add(call, line)

    def _loop(self) -> None:
        while True:
            time.sleep(POLL)
            try:
                self.pump()
            except Exception:  # noqa: BLE001 - a lost hub (cluster gone) loses output only
                pass

    def disconnect(self) -> None:
        """Called before Ray shuts down: once this returns, the pump leaves Ray alone until
        the next connection makes a new hub.

        A take in flight is waited for: it sees the change within one slice. Ray's shutdown
        while another thread waits in Ray can crash the process (ray-project/ray#31145).
        """
        with self.lock:
            self.hub = None
            self.cluster = ""
        if self.pumping.acquire(timeout=TAKE_S):
            self.pumping.release()

    def text_of(self, ref: Any) -> str | None:
        with self.lock:
            call = self.calls.get(task_ref(ref).task_id().hex())
            if call is None:
                return None
            lines = list(call.lines)
            lines += [rest for rest in call.partial.values() if rest]
            return "".join(line + "\n" for line in lines)


def task_ref(ref: Any) -> Any:
    """The future that names the task behind ``ref``: a streaming generator's own (Ray's
    ``completed()``, the same task as every item it yields), else ``ref`` itself."""
    if not hasattr(ref, "task_id") and hasattr(ref, "completed"):
        return ref.completed()
    return ref
