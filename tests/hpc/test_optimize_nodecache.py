"""The node-wide compile cache with real numba: a version compiled once on a machine is loaded by
later processes, and a changed helper, global or engine version never loads a stale one.

Each test points the cache at a folder of its own. ``eugo.hpc.optimize`` builds new numba
dispatchers on every call, as a fresh worker process does, so a second call here shows what a
second process of the node gets. Several processes writing at once are real processes.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
import warnings
from pathlib import Path

import numpy as np
import pytest

import eugo_jupyter as eugo
from eugo_jupyter.hpc.optimize import _candidates, _nodecache

from .optimize_corpus import Notebook


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    warnings.simplefilter("ignore")
    folder = tmp_path / "node-cache"
    monkeypatch.setenv(_nodecache.ENV, str(folder))
    return folder


def _weighted(nb: Notebook, factor: float) -> None:
    nb.cell(f"def weight(x):\n    return x * {factor}\n")
    nb.cell(
        "def weighted_sum(a):\n    s = 0.0\n    for i in range(a.shape[0]):\n"
        "        s += weight(a[i])\n    return s\n"
    )


def test_a_second_process_loads_what_the_first_compiled(cache: Path) -> None:
    nb = Notebook()
    _weighted(nb, 2.0)
    a = np.arange(10_000.0)
    first = eugo.hpc.optimize(nb["weighted_sum"], a)
    assert first.compiled and first.compile_s > 0 and not first.loaded
    second = eugo.hpc.optimize(nb["weighted_sum"], a)  # new dispatchers, as a new process has
    assert second.compiled and second.loaded, repr(second)
    assert second.compile_s == 0 and second.load_s > 0
    assert second.result == a.sum() * 2.0
    assert "loaded from the node cache in" in repr(second)
    data = second.as_dict()
    assert data["loaded_from_node_cache"] and data["node_cache"].startswith(str(cache))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_an_edited_helper_or_global_compiles_again_and_gives_the_new_answer() -> None:
    nb = Notebook()
    _weighted(nb, 2.0)
    a = np.arange(10_000.0)
    assert eugo.hpc.optimize(nb["weighted_sum"], a).compiled
    nb.cell("def weight(x):\n    return x * 3.0\n")  # the helper's cell, edited
    edited = eugo.hpc.optimize(nb["weighted_sum"], a)
    assert edited.compiled and not edited.loaded and edited.compile_s > 0
    assert edited.result == a.sum() * 3.0
    nb.cell("SHIFT = 1.0\n")
    nb.cell("def weight(x):\n    return x * 3.0 + SHIFT\n")
    with_global = eugo.hpc.optimize(nb["weighted_sum"], a)
    nb.cell("SHIFT = 5.0\n")  # a later cell changes the global the helper reads
    changed = eugo.hpc.optimize(nb["weighted_sum"], a)
    assert with_global.compiled and changed.compiled and not changed.loaded
    assert changed.result == a.sum() * 3.0 + 5.0 * a.shape[0]
    # The compiled version itself gives the new answer (not only the verified plain one).
    fn = eugo.hpc.optimize(nb["weighted_sum"], a)  # loaded now: compiled once above
    assert fn.loaded
    entry_result = _compiled_answer(nb["weighted_sum"], a)
    assert entry_result == a.sum() * 3.0 + 5.0 * a.shape[0]


def _compiled_answer(fn: object, a: np.ndarray) -> float:
    from eugo_jupyter.hpc.optimize import Optimized

    optimized = Optimized(fn, force=True)
    for _ in range(4):
        optimized(a)
    entry = optimized.entry()
    assert entry.state == "compiled" and entry.compiled is not None
    return float(entry.compiled.dispatcher(a))  # numba's dispatcher: the compiled answer


def test_the_node_key_changes_with_the_engine_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    nb = Notebook()
    _weighted(nb, 2.0)
    cands = _candidates.Candidates(nb["weighted_sum"])
    now = cands.node_key(False)
    assert now == _candidates.Candidates(nb["weighted_sum"]).node_key(False)
    assert now != cands.node_key(True)  # a parallel compile is another version
    other = tuple(v.replace("numba ", "numba 0.0.") for v in _candidates.engine_versions())
    monkeypatch.setattr(_candidates, "engine_versions", lambda: other)
    assert _candidates.Candidates(nb["weighted_sum"]).node_key(False) != now


def test_a_folder_other_users_can_read_is_not_used(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setenv(_nodecache.ENV, str(shared))
    nb = Notebook()
    _weighted(nb, 2.0)
    report = eugo.hpc.optimize(nb["weighted_sum"], np.arange(100.0))
    assert report.compiled and not report.loaded
    assert "open to other users (mode 755)" in report.node_cache
    assert "chmod 700" in report.node_cache
    assert os.listdir(shared) == []
    monkeypatch.setenv(_nodecache.ENV, "off")
    off = eugo.hpc.optimize(nb["weighted_sum"], np.arange(9.0))
    assert "the node cache is off" in off.node_cache


_RACE_CELL = (
    "def scaled(a):\n    out = np.empty_like(a)\n    for i in range(a.shape[0]):\n"
    "        out[i] = a[i] * 3 + 1\n    return out\n"
)
_DTYPES = ["float64", "float32", "int64", "int32", "int16", "uint8"]


def _save_together(dtype: str, folder: str, barrier: object) -> None:
    """A process of its own: compile ``scaled`` for ``dtype`` into the node cache, and save it
    when every other process is ready to save too (numba's save path, at the same moment)."""
    import numba

    os.environ[_nodecache.ENV] = folder
    warnings.simplefilter("ignore")
    nb = Notebook()
    nb.cell(_RACE_CELL)
    cands = _candidates.Candidates(nb["scaled"])
    where, _ = _nodecache.folder_for(cands.node_key(False))
    dispatcher = numba.njit(nb["scaled"])
    cache = _nodecache.attach(dispatcher, where)
    assert cache is not None
    cache.hold()
    dispatcher.compile((numba.typeof(np.arange(3, dtype=dtype)),))
    barrier.wait()  # type: ignore[attr-defined]
    cache.release(keep=True)


def _load_each(folder: str) -> list[tuple[str, bool, bool]]:
    """A fresh process: each version loaded from the cache, and its answer."""
    os.environ[_nodecache.ENV] = folder
    warnings.simplefilter("ignore")
    nb = Notebook()
    nb.cell(_RACE_CELL)
    out = []
    for dtype in _DTYPES:
        a = np.arange(100, dtype=dtype)
        report = eugo.hpc.optimize(nb["scaled"], a)
        from eugo_jupyter.hpc.optimize import Optimized

        optimized = Optimized(nb["scaled"], force=True)
        for _ in range(4):
            optimized(a)
        compiled = optimized.entry().compiled.dispatcher(a)  # type: ignore[union-attr]
        right = compiled.dtype == a.dtype and bool(np.array_equal(compiled, a * 3 + 1))
        out.append((dtype, report.loaded, right))
    return out


def test_processes_saving_different_versions_at_once_leave_a_cache_that_loads_right(
    cache: Path,
) -> None:
    # numba#9348: processes that save versions of one function at the same moment could leave
    # one version's index entry pointing at another's data file. Here six processes save six
    # versions together; a fresh one then loads each and runs it.
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(_DTYPES))
    savers = [
        context.Process(target=_save_together, args=(dtype, str(cache), barrier))
        for dtype in _DTYPES
    ]
    for process in savers:
        process.start()
    for process in savers:
        process.join()
    assert [p.exitcode for p in savers] == [0] * len(savers)
    with context.Pool(1) as pool:
        read = pool.apply(_load_each, (str(cache),))
    assert read == [(dtype, True, True) for dtype in _DTYPES], read


def test_keep_or_drop_is_decided_once_per_node_and_every_process_follows(cache: Path) -> None:
    # Each process timing its own two verifying calls kept the compiled version in one worker
    # and Python in the other. Now the first to decide writes it; the others follow.
    from eugo_jupyter.hpc.optimize._runtime import Settings, find_entry

    nb = Notebook()
    nb.cell("def damped(x, n):\n    for _ in range(n):\n        x = 0.9 * x + 0.1\n    return x\n")
    fn = nb["damped"]
    first = find_entry(fn, Settings(), cached=False)  # a worker process of the node
    for _ in range(3):
        assert first.call((0.3, 50), {}) == fn(0.3, 50)
    [written] = cache.rglob(".verdict-*")
    word, *numbers = written.read_text().split()
    assert (first.state == "compiled") == (word == "keep"), (word, first.reason)
    other = "drop" if word == "keep" else "keep"  # as if another process had found otherwise
    written.write_text(" ".join([other, *numbers]))
    second = find_entry(fn, Settings(), cached=False)  # the node's next process
    for _ in range(3):
        assert second.call((0.3, 50), {}) == fn(0.3, 50)
    assert second.loads == 1 and second.compiles == 0  # loaded, then followed the node
    assert (second.state == "compiled") == (other == "keep"), second.reason
