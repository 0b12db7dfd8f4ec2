"""A journaled run (``map``/``imap`` with ``journal=``): stored items answered from disk, the
rest run, every outcome written as it arrives.

The run itself is the ordinary engine's: this module only filters the input (an item whose key
has a stored result is not submitted), writes each outcome the engine yields (as it finishes,
so a kernel killed mid-run loses at most what was in flight and not yet written), and puts the
stored and the new results back in the input's order. Storage is :mod:`._journal`'s.

Rules, where the journal and the keywords meet:

- a stored result is returned as it is; a stored failure too (the same function would fail
  the same way), unless ``rerun_failed=True``, which runs the failed items again;
- a changed function (see :func:`._journal.identity_of`) starts a new generation and reuses
  nothing, with a warning that says so; ``rerun_failed=True`` then keeps the old generation's
  finished items (the change fixed the failed ones) and runs the rest with the new function;
- ``errors="raise"``: a failure stops the run as without a journal; what finished is written
  first, so the rerun after the fix does only the rest.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .. import _hooks
from ..exceptions import JournalWarning, MapItemError
from ._journal import Writer, identity_of, item_key, resolve
from ._results import Failed

__all__ = ["Resumed", "failure_record", "failed_from"]


def failure_record(failed: Failed) -> dict[str, Any]:
    """A failure as plain fields, for the journal (readable without eugo)."""
    return {
        "item": failed.item,
        "error_type": failed.kind,
        "message": failed.text,
        "traceback": failed.traceback,
        "node": failed.node,
        "attempts": failed.attempts,
        "error": failed._error_bytes,
        "frames": failed.frames,
    }


def failed_from(record: dict[str, Any], index: int, item: Any) -> Failed:
    """The :class:`Failed` value of a stored failure, at ``index`` of this run."""
    made = Failed(
        index,
        record.get("item", ""),
        None,
        record.get("traceback", ""),
        record.get("node"),
        record.get("attempts", 1),
        record.get("frames"),
        record.get("error"),
    )
    made._value = item
    made.kind = record.get("error_type", "Exception")
    made.text = record.get("message", "")
    return made


class Resumed:
    """One journaled run: what came from the journal, what ran, and the merged results."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fn: Any,
        label: str,
        shared: Any,
        key: Callable[[Any], Any] | None,
        rerun_failed: bool,
        collect: bool,
    ) -> None:
        if key is not None and not callable(key):
            raise TypeError(
                f"key= takes a function of the item (for example key=lambda path: path), not "
                f"{type(key).__name__}."
            )
        self.path = resolve(path)
        self.label = label
        self.key = key
        self.rerun_failed = rerun_failed
        self.collect = collect
        self.writer = Writer.open(
            self.path, identity_of(fn, shared), label, carry_done=rerun_failed
        )
        self.stored_failure: Failed | None = None  # errors="raise": the one that stops it
        self.from_journal = 0  # items answered from the journal
        self.ran = 0  # items the engine ran (and wrote)
        self._say_generation()

    def _say_generation(self) -> None:
        previous = self.writer.previous
        if previous is None:
            return
        generation = self.writer.generation
        if self.rerun_failed:
            words = (
                f"keeps the {len(self.writer.stored):,} finished items of generation "
                f"{previous['id']} (rerun_failed=True) and runs the rest with the changed code"
            )
        else:
            words = (
                "reuses none of its results (pass rerun_failed=True if the change only fixes "
                "the failed items)"
            )
        warnings.warn(
            f"{self.label} changed since the journal {self.path} was written (generation "
            f"{previous['id']}, from {previous['started']}): this run starts generation "
            f"{generation['id']} and {words}.",
            JournalWarning,
            stacklevel=4,
        )

    def pending(self, items: Iterable[Any], answered: dict[int, Any]) -> Iterator[Any]:
        """The items to run, read lazily; a stored outcome goes into ``answered`` instead."""
        stored = self.writer.stored
        self.keys: list[str] = []  # the key of each item sent to the engine, by its position
        self.positions: list[int] = []  # the input index of each item sent to the engine
        for index, item in enumerate(items):
            key = item_key(item, self.key)
            entry = stored.get(key)
            if entry is not None and (entry["ok"] or not self.rerun_failed):
                self.from_journal += 1
                if entry["ok"]:
                    answered[index] = entry["value"]
                    continue
                answered[index] = failed_from(entry["failure"], index, item)
                if not self.collect:  # errors="raise": the run stops at this stored failure
                    self.stored_failure = answered[index]
                    return
                continue
            self.keys.append(key)
            self.positions.append(index)
            yield item

    def _write(self, sub_index: int, value: Any) -> int:
        """Write one outcome of the engine; its index in the input."""
        index, key = self.positions[sub_index], self.keys[sub_index]
        if isinstance(value, Failed):
            value.index = index
            self.writer.failed(key, index, failure_record(value))
        else:
            self.writer.done(key, index, value)
        self.ran += 1
        return index

    def start(self, items: Iterable[Any], make_run: Callable[[Iterable[Any]], Any]) -> None:
        """Build the engine's run over the items the journal has no answer for (at the call,
        so that bad keywords raise there)."""
        self.answered: dict[int, Any] = {}  # input index -> a value not yet yielded
        pending: Iterable[Any] = self.pending(items, self.answered)
        if isinstance(items, (list, tuple, range)):
            # A sequence is in memory already: sort it out now, so the engine knows how many
            # items are left (its batch sizes and the progress bar use that).
            pending = list(pending)
        self.run_ = make_run(pending)

    def results(self, ordered: bool) -> Iterator[Any]:
        """The run's results in input order, or ``(index, value)`` as they finish; each batch
        written to the journal as it arrives."""
        answered, following = self.answered, 0
        # The engine bounds what runs ahead by the batches the consumer still holds: count
        # the engine's batches with an item not yet yielded, not the journal's answers.
        held: dict[int, int] = {}  # engine batch key -> its items not yet yielded
        batch_of: dict[int, int] = {}  # input index -> the engine batch it came in

        def take(index: int) -> Any:
            key = batch_of.pop(index, None)
            if key is not None:
                held[key] -= 1
                if not held[key]:
                    del held[key]
            return answered.pop(index)

        def ready() -> Iterator[Any]:
            """What can be yielded now: the next ones in input order, or all (as finished)."""
            nonlocal following
            if ordered:
                while following in answered:
                    yield take(following)
                    following += 1
            else:
                while answered:  # the stored ones as the input passed them, then the new
                    index = next(iter(answered))
                    yield index, take(index)

        try:
            for key, chunk in self.run_.units(backlog=held.__len__):
                for offset, value in enumerate(chunk):
                    index = self._write(key + offset, value)
                    answered[index], batch_of[index] = value, key
                held[key] = len(chunk)
                self.writer.flush()
                del chunk
                yield from ready()
            if self.stored_failure is not None:
                raise self._stored_error(self.stored_failure, answered)
            yield from ready()
        except MapItemError as error:
            self._stored_into(error, answered)
            raise
        finally:
            self.writer.close()
            recorder = _hooks.recorder
            if recorder is not None:
                recorder.resumed(self.label, str(self.path), self.from_journal, self.ran)

    def _stored_error(self, failed: Failed, answered: dict[int, Any]) -> MapItemError:
        error = MapItemError(
            f"{self.label} raised {failed.kind} on item #{failed.index} ({failed.item}): "
            f"{failed.text}\nThis failure is stored in the journal {self.path} from an earlier "
            "run of the same code: fix the function, or pass rerun_failed=True to run the "
            f"failed items again. Worker traceback:\n{failed.traceback}",
            failed.index,
            failed.item,
        )
        error.failed = failed
        answered.pop(failed.index, None)
        error.partial.update({i: v for i, v in answered.items() if not isinstance(v, Failed)})
        return error

    def _stored_into(self, error: MapItemError, answered: dict[int, Any]) -> None:
        """``errors="raise"``: journal what the failing batch finished before its failure, and
        the failure itself (a rerun of the same code answers it at once); then key
        ``error.partial`` and ``error.index`` by the input's positions."""
        if self.stored_failure is not None and error.failed is self.stored_failure:
            return  # made here from the journal, keyed by the input already
        partial: dict[int, Any] = getattr(error, "partial", {})
        for i, value in partial.items():  # the failing batch's: never delivered
            self._write(i, value)
        failed = getattr(error, "failed", None)
        if isinstance(failed, Failed) and failed.index < len(self.positions):
            self._write(failed.index, failed)
        self.writer.flush()
        moved = {self.positions[i]: v for i, v in partial.items()}
        partial.clear()
        partial.update(moved)
        partial.update({i: v for i, v in answered.items() if not isinstance(v, Failed)})
        if error.index is not None and error.index < len(self.positions):
            # The engine numbered the items it was given: say the input's number instead.
            sub, error.index = error.index, self.positions[error.index]
            error.args = (str(error).replace(f"item #{sub} (", f"item #{error.index} (", 1),)

    def summary(self) -> str:
        """One line: where the results came from."""
        return (
            f"{self.label}: {self.from_journal:,} items from the journal {self.path.name}, "
            f"{self.ran:,} ran"
        )
