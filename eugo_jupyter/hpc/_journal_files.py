"""The journal's files, one job each: the keys and identities it stores results under, the
atomic write every file goes through, a chunk's pickle, and the one writer's lock. The folder's
layout and why it is safe are in :mod:`._journal`.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import os
import pickle
import socket
import time
import types
import warnings
from pathlib import Path
from typing import Any

from ..exceptions import JournalError, JournalWarning

__all__ = [
    "FORMAT",
    "LOCK_FILE",
    "LOCK_WAIT_S",
    "Lock",
    "atomic_write",
    "identity_of",
    "item_key",
    "now",
    "pickled_chunk",
    "resolve",
]

#: The version of the on-disk format (in ``journal.json`` and in each chunk).
FORMAT = 1
#: How long a second writer waits for the first to finish before it is refused.
LOCK_WAIT_S = 2.0
LOCK_FILE = "lock"


def item_key(item: Any, key: Any = None) -> str:
    """The key an item is matched by: ``key(item)`` when given (a string is used as it is),
    else a stable hash of the item's pickled value.

    >>> item_key("tile_001.tif", key=lambda p: p)
    'tile_001.tif'
    >>> item_key(3) == item_key(3), item_key(3) == item_key(3.0)
    (True, False)
    """
    value = key(item) if key is not None else item
    if isinstance(value, str) and key is not None:
        return value
    try:
        data = pickle.dumps(value, protocol=4)
    except Exception:  # noqa: BLE001 - a lambda or a local class: cloudpickle can
        from ray import cloudpickle

        data = cloudpickle.dumps(value)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def identity_of(fn: Any, shared: Any = None) -> str:
    """The identity of a run's function for the journal: its code, the notebook helpers it
    calls, the globals it reads, and its ``shared=`` values.

    >>> def f(x): return x + 1
    >>> def g(x): return x + 2
    >>> identity_of(f) == identity_of(f), identity_of(f) == identity_of(g)
    (True, False)
    """
    from ._code_identity import CodeIdentity

    digest = hashlib.blake2b(digest_size=16)
    if isinstance(fn, types.FunctionType):
        digest.update(CodeIdentity(fn).portable_key().encode())
    else:  # a callable object or a partial: what it pickles to
        from ray import cloudpickle

        digest.update(cloudpickle.dumps(fn))
    if shared:
        digest.update(item_key(dict(sorted(shared.items()))).encode())
    return digest.hexdigest()


def resolve(path: str | os.PathLike[str]) -> Path:
    """A journal's folder: a relative path is taken from the current folder (in a notebook, the
    notebook's own folder)."""
    return Path(path).expanduser().absolute()


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def atomic_write(path: Path, data: bytes, sync: bool = False) -> None:
    """Write to a temporary name, then rename: a reader sees the whole file or none of it.

    ``sync`` also waits for the disk (the index); a chunk does not, since a killed process's
    writes survive it, and a chunk cut short by a machine's crash is skipped on the next open.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        if sync:
            out.flush()
            os.fsync(out.fileno())
    os.replace(tmp, path)


def pickled_chunk(entries: list[dict[str, Any]]) -> bytes:
    """A chunk's bytes: plain pickle, cloudpickle for what only it can pickle (a lambda in a
    result), and an entry that neither can pickle left out with a warning (it runs again)."""
    chunk = {"format": FORMAT, "entries": entries}
    try:
        return pickle.dumps(chunk, protocol=5)
    except Exception:  # noqa: BLE001 - fall back, entry by entry
        pass
    from ray import cloudpickle

    kept: list[dict[str, Any]] = []
    for entry in entries:
        try:
            cloudpickle.dumps(entry)
            kept.append(entry)
        except Exception as exc:  # noqa: BLE001 - this item is not journaled, and says so
            warnings.warn(
                f"The result of item #{entry['index']} cannot be written to the journal "
                f"({type(exc).__name__}: {exc}); it is returned, but a rerun computes it "
                "again. Return plain data (numbers, arrays, dicts) to journal it.",
                JournalWarning,
                stacklevel=4,
            )
    return cloudpickle.dumps({"format": FORMAT, "entries": kept}, protocol=5)


class Lock:
    """An exclusive ``flock`` on the journal's ``lock`` file; the refusal names the holder."""

    def __init__(self, path: Path, wait: float = LOCK_WAIT_S) -> None:
        self.file = path / LOCK_FILE
        self.wait = wait
        self.handle: Any = None

    def __enter__(self) -> Lock:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.file, "a+")  # held for the lock's lifetime
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self.handle.seek(0)
                    holder = self.handle.read().strip() or "another process"
                    self.handle.close()
                    raise JournalError(
                        f"The journal {self.file.parent} is being written by {holder}. Wait "
                        "for that run to finish (or stop it), or give this run another "
                        "journal=."
                    ) from None
                time.sleep(0.05)
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {now()}\n")
        self.handle.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.seek(0)
        self.handle.truncate()
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
