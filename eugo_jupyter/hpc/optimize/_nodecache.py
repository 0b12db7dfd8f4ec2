"""The compile cache on each node: numba's own cache files, found by our key.

A worker process that meets a function already compiled on its node (by another worker, by an
earlier cluster or kernel) loads the machine code instead of compiling it. Numba does the
caching; this module only tells its cache machinery where to look:

- **Where**: ``$EUGO_OPTIMIZE_CACHE`` when set (``off`` turns the cache off), else
  ``$XDG_CACHE_HOME/eugo_jupyter/numba``, else ``~/.cache/eugo_jupyter/numba``. The folder must
  be the user's own and closed to others (it is created with mode 0700; one that another user
  owns or can write into is not used, and the stats say why): its files are loaded as code.
- **Key**: one sub-folder per :meth:`~._candidates.Candidates.node_key` (the code of the
  function and of its helpers, the values of the globals they read, defaults and closures,
  the versions of Python, numba, llvmlite and NumPy, parallel or serial). Inside, numba's index
  keys each version by its argument types and the CPU (``codegen.magic_tuple()``). Numba's own
  locators are not used: their key is one function's source file (numba's notebook cache
  misses an edited helper, and ``cache=True`` is lost through cloudpickle anyway).
- **Once per node**: a process first only tries to load a version (``Folder.loading_only``);
  missing, it compiles it holding an exclusive ``flock`` on a lock file of that version's
  argument types (``compiling()``): another process of the node meeting the same version
  meanwhile waits for it, then loads what it saved, instead of compiling it too.
- **Several writers** (numba#9348: two processes saving different versions at once can give one
  index entry the other's data file): every save holds an exclusive ``flock`` on the folder's
  lock file and every load a shared one; numba writes each file to a temporary name and renames
  it. A file that does not load (cut short, another numba) is a miss: the version compiles.
- **Keep or drop once per node**: the first process to time a verified version against Python
  writes what it found (:func:`verdict`); the node's other processes follow it, so every worker
  of a node runs the same version and returns the same type.
- **Clearing**: delete the folder, on each node (``rm -r ~/.cache/eugo_jupyter/numba``); it is
  safe at any time, a running process keeps what it loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import stat
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import _numba_private

__all__ = [
    "ENV",
    "Folder",
    "attach",
    "compiling",
    "folder_for",
    "has_entry",
    "mark",
    "marked",
    "root",
    "verdict",
]

#: The environment variable naming the cache folder ("off" turns the cache off).
ENV = "EUGO_OPTIMIZE_CACHE"
_LOCK = ".lock"

#: The folder each function handed to numba caches into (read by the locator numba calls).
_folders: weakref.WeakKeyDictionary[Any, Path] = weakref.WeakKeyDictionary()


def root() -> tuple[Path | None, str]:
    """``(folder, "")`` for this process's cache, or ``(None, why it is not used)``."""
    return _root(os.environ.get(ENV), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _root(chosen: str | None, xdg: str | None, home: str | None) -> tuple[Path | None, str]:
    if chosen is not None and chosen.strip().lower() in ("off", "0", "false", "no"):
        return None, f"the node cache is off ({ENV}={chosen})"
    if chosen:
        folder = Path(chosen).expanduser()
    else:
        base = Path(xdg) if xdg else Path(home or Path.home()) / ".cache"
        folder = base / "eugo_jupyter" / "numba"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError as exc:
        return None, f"the node cache folder {folder} cannot be made ({exc.strerror})"
    if info.st_uid != os.getuid():
        return None, (
            f"the node cache folder {folder} belongs to another user; set {ENV} to a folder of "
            "your own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        return None, (
            f"the node cache folder {folder} is open to other users (mode "
            f"{stat.S_IMODE(info.st_mode):o}) and its files are loaded as code: chmod 700 it, "
            f"or set {ENV} to a folder only you can read"
        )
    return folder, ""


def folder_for(node_key: str | None) -> tuple[Path | None, str]:
    """The cache folder of one key, or ``(None, why not)``."""
    base, why = root()
    if base is None:
        return None, why
    if node_key is None:
        return None, "not cached on the node: a value it reads is an array of Python objects"
    return base / node_key, ""


def has_entry(folder: Path | None) -> bool:
    """Whether some version was saved in ``folder`` (for the break-even: loading is cheap)."""
    if folder is None:
        return False
    try:
        return any(name.endswith(".nbi") for name in os.listdir(folder))
    except OSError:
        return False


def mark(folder: Path | None, name: str) -> None:
    """Leave a finding for the other processes of the node (``nothing-parallel``)."""
    if folder is None:
        return
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        (folder / name).touch()
    except OSError:
        pass


def marked(folder: Path | None, name: str) -> bool:
    return folder is not None and (folder / name).exists()


def verdict(folder: Path | None, signature: Any, decide: Callable[[], str]) -> str:
    """The node's keep-or-drop of one version (``signature``): what the first process of the
    node to ``decide`` found, written once (a link: never half a file), read by the others."""
    if folder is None:
        return decide()
    path = folder / (
        ".verdict-" + hashlib.blake2b(str(signature).encode(), digest_size=8).hexdigest()
    )
    with contextlib.suppress(OSError):
        return path.read_text()
    found = decide()
    temporary = folder / f".verdict-{os.getpid()}-{time.monotonic_ns()}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary.write_text(found)
        os.link(temporary, path)
    except FileExistsError:  # another process decided first: the node follows it
        with contextlib.suppress(OSError):
            found = path.read_text() or found
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    return found


@contextlib.contextmanager
def compiling(folder: Path | None, signature: Any) -> Iterator[None]:
    """Held while this process compiles ``signature`` into ``folder``: the node's other
    processes wait for it, then load. Nothing is held without a folder, or where it cannot be
    made."""
    if folder is None:
        yield
        return
    name = ".compiling-" + hashlib.blake2b(str(signature).encode(), digest_size=8).hexdigest()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        context: Any = _locked(folder, exclusive=True, name=name)
    except OSError:
        context = contextlib.nullcontext()
    with context:
        yield


class _Missing(Exception):
    """The version is not in the node cache (raised while only loading, see Folder)."""


@contextlib.contextmanager
def _locked(folder: Path, exclusive: bool, name: str = _LOCK) -> Iterator[None]:
    with open(folder / name, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Folder:
    """The node cache of one compiled function (numba's ``FunctionCache`` in our folder).

    Counts what it loaded (and the seconds it took). ``hold()`` keeps saves
    back until :meth:`release` (a parallel compile is saved only once it is known to be kept).
    """

    def __init__(self, cache: Any, folder: Path) -> None:
        self.cache = cache
        self.folder = folder
        self.loads = 0
        self.load_s = 0.0
        self.held: list[tuple[Any, Any]] | None = None
        self.loading_only = False  #: a miss raises _Missing instead of letting numba compile

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        began = time.perf_counter()
        found = None
        try:
            if has_entry(self.folder):
                with _locked(self.folder, exclusive=False):
                    found = self.cache.load_overload(sig, target_context)
        except Exception:  # noqa: BLE001 - a file that does not load is a miss: compile
            found = None
        if found is None:
            if self.loading_only:
                raise _Missing(str(sig))
            return None
        self.loads += 1
        self.load_s += time.perf_counter() - began
        return found

    def save_overload(self, sig: Any, cres: Any) -> None:
        if self.held is not None:
            self.held.append((sig, cres))
            return
        try:
            _numba_private.ensure_cache_path(self.cache)
            with _locked(self.folder, exclusive=True), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "cannot cache ... dynamic globals": not saved
                self.cache.save_overload(sig, cres)
        except Exception:  # noqa: BLE001 - a cache that cannot be written only costs a compile
            return

    def hold(self) -> None:
        self.held = []

    def release(self, keep: bool) -> None:
        held, self.held = self.held or [], None
        if keep:
            for sig, cres in held:
                self.save_overload(sig, cres)

    # numba's Dispatcher reads these too
    @property
    def cache_path(self) -> str:
        return str(self.folder)

    def enable(self) -> None:
        self.cache.enable()

    def disable(self) -> None:
        self.cache.disable()

    def flush(self) -> None:
        self.cache.flush()


def attach(dispatcher: Any, folder: Path | None) -> Folder | None:
    """Make ``dispatcher`` load from and save to ``folder``; None when it cannot."""
    if folder is None:
        return None
    _folders[dispatcher.py_func] = folder
    try:
        cache = Folder(_numba_private.cache_class(_folders.get)(dispatcher.py_func), folder)
    except Exception:  # noqa: BLE001 - numba's internals changed: compile without the cache
        return None
    _numba_private.set_cache(dispatcher, cache)
    return cache
