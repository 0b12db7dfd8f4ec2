"""A run's journal on disk: every finished item's result or failure, so a rerun does only what
is left.

The format, readable without eugo (plain ``pickle`` and JSON)::

    runs/resample/
      journal.json             {"format": 1, "generations": [{"id": 1, "function": "resample",
                                "identity": "9f0c...", "base": null, "started": "2026-..."}]}
      lock                     held (``flock``) by the one process writing; says who it is
      g0001/000001.pkl         a chunk: pickle of {"format": 1, "entries": [ENTRY, ...]}
      g0001/000002.pkl         ...

An ``ENTRY`` is a dict: ``{"key": str, "index": int, "ok": True, "value": result}`` for an item
that finished, or ``{"key": str, "index": int, "ok": False, "failure": {...}}`` for one that
failed (``failure`` holds plain fields: ``error_type``, ``message``, ``traceback``, ``item``,
``node``, ``attempts``, and ``error``, the pickled exception or None). A later entry of the same
key wins (an item that failed and then succeeded on a rerun is done).

A *generation* is one identity of the function: its code, the notebook helpers it calls and
the globals it reads (its portable key, see :mod:`._code_identity`), plus its ``shared=``
values. A changed function starts a new
generation: results made by the old code are kept on disk and never reused, unless the rerun
asks for it (``rerun_failed=True`` carries the old generation's finished items over: the fix
concerned the failed ones).

Why it is safe: a chunk is written to a temporary name, flushed to disk, then renamed, so a
process killed in the middle of a write leaves a whole journal (the half-written ``.tmp`` file
is ignored and removed on the next open). One process writes at a time: the writer holds an
exclusive ``flock`` on ``lock`` (released by the kernel when the process dies, so a killed
kernel leaves no stale lock); a second writer is refused with a sentence naming the first.
A damaged chunk (cut short by a full disk, say) is skipped with a warning: its items run again.

>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> with Writer.open(folder, identity="abc", function="square") as writer:
...     writer.done("k1", 0, 1)
...     writer.failed("k2", 1, {"error_type": "ValueError", "message": "bad"})
>>> journal = Journal(folder)
>>> journal.done, journal.failed
(1, 1)
>>> journal.clear(); Journal(folder).done
0
"""

from __future__ import annotations

import contextlib
import datetime
import html
import json
import os
import pickle
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..exceptions import JournalError, JournalWarning
from ._journal_files import (
    FORMAT,
    LOCK_FILE,
    LOCK_WAIT_S,
    Lock,
    atomic_write,
    identity_of,
    item_key,
    now,
    pickled_chunk,
    resolve,
)

__all__ = ["FORMAT", "Journal", "Writer", "identity_of", "item_key", "journal", "resolve"]

#: A chunk is written when the run flushes (once per finished batch) or when this many
#: entries are buffered.
CHUNK_ENTRIES = 2000

_INDEX = "journal.json"


def journal(path: str | os.PathLike[str]) -> Journal:
    """What the journal at ``path`` holds: ``.done`` and ``.failed`` counts, the function and
    its identity, ``.generations``, ``.size`` and ``.updated``; an HTML summary in a notebook.
    ``.results()`` and ``.failures`` read the entries, ``.clear()`` removes the journal.

    >>> j = eugo.hpc.journal("runs/resample")          # doctest: +SKIP
    >>> j.done, j.failed                               # doctest: +SKIP
    (18724, 3)
    """
    return Journal(resolve(path))


class Journal:
    """What a journal holds (``eugo.hpc.journal(path)``): counts, the function, sizes, when.

    ``done`` and ``failed`` count the items of the current generation (with what it carried
    over); ``generations`` lists every identity the folder has seen.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.generations: list[dict[str, Any]] = []
        self.skipped: list[str] = []  # damaged chunks, in words
        self.entries: dict[str, dict[str, Any]] = {}
        index = self.path / _INDEX
        if index.exists():
            try:
                data = json.loads(index.read_text())
                self.generations = list(data["generations"])
                if data.get("format", FORMAT) > FORMAT:
                    raise JournalError(
                        f"The journal {self.path} was written by a newer eugo_jupyter (format "
                        f"{data['format']}): upgrade, or give this run another journal=."
                    )
            except (ValueError, KeyError, TypeError) as exc:
                raise JournalError(
                    f"The journal's index {index} cannot be read ({exc}). Its results are in "
                    f"the g*/ folders beside it: move the folder away to keep them, or call "
                    f"eugo.hpc.journal({str(self.path)!r}).clear() to start over."
                ) from exc
        if self.generations:
            self.entries = self._load(self.generations[-1])

    @property
    def generation(self) -> dict[str, Any] | None:
        """The current generation's record (``id``, ``function``, ``identity``, ``started``)."""
        return self.generations[-1] if self.generations else None

    def _find(self, generation_id: int | None) -> dict[str, Any] | None:
        return next((g for g in self.generations if g["id"] == generation_id), None)

    def _load(self, generation: dict[str, Any]) -> dict[str, dict[str, Any]]:
        entries: dict[str, dict[str, Any]] = {}
        base = self._find(generation.get("base"))
        if base is not None:  # carried over: the base's finished items only
            entries = {k: e for k, e in self._load(base).items() if e["ok"]}
        folder = self.path / f"g{generation['id']:04d}"
        for chunk in sorted(folder.glob("*.pkl")) if folder.is_dir() else ():
            try:
                with open(chunk, "rb") as source:
                    data = pickle.load(source)
                for entry in data["entries"]:
                    entries[entry["key"]] = entry
            except Exception as exc:  # noqa: BLE001 - a damaged chunk costs its items, no more
                self.skipped.append(f"{chunk.name} ({type(exc).__name__}: {exc})")
        if self.skipped:
            warnings.warn(
                f"The journal {self.path} has damaged files, whose items run again: "
                f"{'; '.join(self.skipped)}. Everything written whole is used.",
                JournalWarning,
                stacklevel=3,
            )
        return entries

    @property
    def done(self) -> int:
        return sum(1 for e in self.entries.values() if e["ok"])

    @property
    def failed(self) -> int:
        return sum(1 for e in self.entries.values() if not e["ok"])

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The current generation's failed items: ``key``, ``index`` and the failure's fields."""
        return [
            {"key": e["key"], "index": e["index"], **e["failure"]}
            for e in self.entries.values()
            if not e["ok"]
        ]

    def results(self) -> Iterator[tuple[str, Any]]:
        """``(key, result)`` for every finished item of the current generation."""
        return ((e["key"], e["value"]) for e in self.entries.values() if e["ok"])

    @property
    def size(self) -> int:
        """Bytes on disk."""
        if not self.path.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())

    @property
    def updated(self) -> datetime.datetime | None:
        """When the journal was last written."""
        files = [p for p in self.path.rglob("*.pkl")] if self.path.is_dir() else []
        newest = max((p.stat().st_mtime for p in files), default=None)
        if newest is None:
            return None
        return datetime.datetime.fromtimestamp(newest, datetime.timezone.utc)

    def clear(self) -> None:
        """Remove the journal (refused while another process writes it)."""
        if not self.path.exists():
            return
        with Lock(self.path, wait=0.0):
            for child in self.path.iterdir():
                if child.name != LOCK_FILE:
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        (self.path / LOCK_FILE).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.rmdir()
        self.generations, self.entries = [], {}

    def _rows(self) -> list[tuple[str, str]]:
        current = self.generation
        if current is None:
            return [("journal", f"{self.path}: empty")]
        from .._units import format_bytes

        updated = self.updated
        return [
            ("journal", str(self.path)),
            ("function", f"{current['function']} (identity {current['identity'][:12]})"),
            (
                "generation",
                f"{current['id']} of {len(self.generations)}, since {current['started']}",
            ),
            ("done", f"{self.done:,}"),
            ("failed", f"{self.failed:,}"),
            ("on disk", format_bytes(self.size)),
            ("updated", updated.isoformat(timespec="seconds") if updated else "never"),
        ]

    def __repr__(self) -> str:
        return "\n".join(f"{name:>10}: {value}" for name, value in self._rows())

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(n)}</th><td>{html.escape(v)}</td></tr>"
            for n, v in self._rows()
        )
        return f"<table class='eugo-journal'>{rows}</table>"


class Writer:
    """Appends a run's entries to a journal's current generation, a chunk at a time.

    Made by :meth:`open`, which takes the lock, reads what is stored, and starts a new
    generation when the identity changed. ``stored`` holds the entries a run may reuse. The
    run calls :meth:`flush` after each finished batch, so a kill loses what was in flight.
    """

    def __init__(self, journal: Journal, lock: Lock, generation: dict[str, Any]) -> None:
        self.journal = journal
        self.lock = lock
        self.generation = generation
        self.folder = journal.path / f"g{generation['id']:04d}"
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in self.folder.glob(".*.tmp"):  # a write cut short by a killed process
            stale.unlink(missing_ok=True)
        self.stored = journal.entries
        self.buffer: list[dict[str, Any]] = []
        existing = [int(p.stem) for p in self.folder.glob("*.pkl") if p.stem.isdigit()]
        self.next_chunk = max(existing, default=0) + 1

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        identity: str,
        function: str,
        carry_done: bool = False,
        wait: float = LOCK_WAIT_S,
    ) -> Writer:
        """The writer of ``path`` for a function of ``identity``; a changed identity starts a
        new generation (``carry_done``: the old one's finished items are kept)."""
        folder = Path(path)
        lock = Lock(folder, wait).__enter__()
        try:
            journal = Journal(folder)
            current = journal.generation
            previous: dict[str, Any] | None = None
            if current is None or current["identity"] != identity:
                previous = current
                current = {
                    "id": (current["id"] + 1) if current else 1,
                    "function": function,
                    "identity": identity,
                    "base": previous["id"] if (previous and carry_done) else None,
                    "started": now(),
                }
                journal.generations.append(current)
                index = {"format": FORMAT, "generations": journal.generations}
                atomic_write(folder / _INDEX, json.dumps(index, indent=1).encode(), sync=True)
                # Carried over: the finished items of the generation just read (its own base
                # included), not a second read of its chunks.
                journal.entries = (
                    {k: e for k, e in journal.entries.items() if e["ok"]} if carry_done else {}
                )
            writer = cls(journal, lock, current)
            writer.previous = previous
            return writer
        except BaseException:
            lock.__exit__(None, None, None)
            raise

    previous: dict[str, Any] | None = None  # the generation this run replaced, if any

    def done(self, key: str, index: int, value: Any) -> None:
        self._add({"key": key, "index": index, "ok": True, "value": value})

    def failed(self, key: str, index: int, failure: dict[str, Any]) -> None:
        self._add({"key": key, "index": index, "ok": False, "failure": failure})

    def _add(self, entry: dict[str, Any]) -> None:
        self.buffer.append(entry)
        if len(self.buffer) >= CHUNK_ENTRIES:
            self.flush()

    def flush(self) -> None:
        """Write the buffered entries as one chunk (atomically)."""
        if not self.buffer:
            return
        data = pickled_chunk(self.buffer)
        atomic_write(self.folder / f"{self.next_chunk:06d}.pkl", data)
        self.next_chunk += 1
        self.buffer = []

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.lock.__exit__(None, None, None)

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
