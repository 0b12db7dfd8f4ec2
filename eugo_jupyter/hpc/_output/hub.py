"""The output hub (one actor per cluster) and the sink a running call sends its lines through.

A call's sink buffers what it prints and a thread sends it to the hub every
:data:`FLUSH_INTERVAL` seconds as numbered batches, keyed by the call's task id; the kernel
takes what arrived (:meth:`OutputHub.take`). The sink finds the hub by name on its first print,
so a quiet call pays for neither. Nothing here imports IPython.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["FLUSH_INTERVAL", "CallSink", "Chunks", "OutputHub"]

#: How often a running call sends its buffered output (seconds).
FLUSH_INTERVAL = 0.1

Chunks = list[tuple[str, str]]  # [("stdout" | "stderr" | "fd:stdout" | "node" | ..., text)]


class OutputHub:
    """Holds the batches running calls sent until the kernel takes them (one per cluster)."""

    def __init__(self) -> None:
        self._batches: dict[str, dict[int, Chunks]] = {}
        self._next: dict[str, int] = {}  # per call: the next batch take() hands out
        self._sent: dict[str, int] = {}  # per finished call: how many batches it sent

    def write(self, key: str, seq: int, chunks: Chunks) -> None:
        self._batches.setdefault(key, {})[seq] = chunks

    def done(self, key: str, sent: int) -> None:
        """A call finished after sending ``sent`` batches."""
        self._sent[key] = sent

    def take(self) -> tuple[dict[str, Chunks], list[str]]:
        """Every batch that arrived since the last take, in order per key, and the keys whose
        calls finished with all their batches taken (then forgotten here)."""
        out: dict[str, Chunks] = {}
        for key, batches in list(self._batches.items()):
            since, chunks = self._next.get(key, 0), []
            while since in batches:
                chunks.extend(batches.pop(since))
                since += 1
            self._next[key] = since
            if not batches:
                del self._batches[key]
            if chunks:
                out[key] = chunks
        finished = [key for key, sent in self._sent.items() if self._next.get(key, 0) >= sent]
        for key in finished:
            self._sent.pop(key)
            self._next.pop(key, None)
        return out, finished


def _wait(ref: Any) -> None:
    """Wait for the hub's reply ``ref``. In an async actor (its ``__init__``, plain and generator
    methods) not with ``ray.get``, which Ray refuses there: it warns into the notebook. Its
    future is set from Ray's own threads, so waiting on it cannot hold up its own reply."""
    from ..._raystate import in_async_actor

    if in_async_actor():
        ref.future().result()
    else:
        import ray

        ray.get(ref)


class CallSink:
    """One call's output: buffered, sent to the hub in batches, its node named in the first."""

    def __init__(self, hub_name: str) -> None:
        import ray

        self._context = ray.get_runtime_context()
        self._hub_name, self._key = hub_name, self._context.get_task_id() or ""
        self._hub: Any = None
        self.started = False
        self.lost = False  # no hub could be found: lines go to the process's own streams
        self._lock = threading.Lock()
        self._chunks: Chunks = []
        self._sending = threading.Lock()  # one batch number per batch, whichever thread sends
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, stream: str, text: str) -> None:
        if not self.started:
            self.started = True
            self._find_hub()
            self.add("node", self._context.get_node_id()[:8])
        if self.lost:
            real = sys.__stderr__ if stream.endswith("stderr") else sys.__stdout__
            if stream in ("stdout", "stderr") and real is not None:
                real.write(text)
            return
        with self._lock:
            if self._chunks and self._chunks[-1][0] == stream:
                self._chunks[-1] = (stream, self._chunks[-1][1] + text)
            else:
                self._chunks.append((stream, text))

    def _find_hub(self) -> None:
        import ray

        try:
            self._hub = ray.get_actor(self._hub_name)
        except ValueError:
            # No hub on this cluster (its kernel went away, or has not made one since it
            # connected again): the lines go to Ray's log stream. Never fail the call.
            self.lost = True
            return
        self._thread = threading.Thread(target=self._loop, name="eugo-call-output", daemon=True)
        self._thread.start()

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
            ref = self._hub.write.remote(self._key, self.sent, chunks)
            self.sent += 1
            return ref

    def _loop(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            self.send()

    def _tail(self) -> Chunks | None:
        """Stop sending; what is left, or None when nothing was ever printed (nothing to wait
        for)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        tail = self._take()
        return None if not self.started or self.lost else tail

    def _finishing(self) -> Iterator[Any]:
        """The hub's replies to wait on, each before the next is sent: the rest, then the end
        (none when nothing was printed)."""
        tail = self._tail()
        if tail is None:
            return
        if tail:
            yield self._hub.write.remote(self._key, self.sent, tail)
            self.sent += 1
        yield self._hub.done.remote(self._key, self.sent)

    def finish(self) -> None:
        """Send the rest and wait until the hub holds every batch (only if anything printed)."""
        for ref in self._finishing():
            _wait(ref)

    async def finish_async(self) -> None:
        """:meth:`finish` for an async actor: awaits the hub instead of blocking its loop."""
        for ref in self._finishing():
            await ref

    def _step_batch(self) -> Any:
        """Send what a generator step printed now: the hub's reply, to wait on (or None)."""
        return None if self.lost else self.send()

    def sync(self) -> None:
        """Before a generator yields: the lines of its step are at the hub."""
        ref = self._step_batch()
        if ref is not None:
            _wait(ref)

    async def sync_async(self) -> None:
        ref = self._step_batch()
        if ref is not None:
            await ref
