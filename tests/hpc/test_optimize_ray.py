"""optimize=True on real Ray workers: tasks and map give plain Python's answers, compiled once
per node (a second worker process loads it from the node cache), and a global or helper changed
in a later cell reaches the next call."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import eugo_jupyter as eugo
from eugo_jupyter.hpc.optimize import _candidates

from .optimize_corpus import COMPILABLE, Notebook


@pytest.fixture(scope="module")
def nb(ray_local: object) -> Notebook:
    warnings.simplefilter("ignore")
    notebook = Notebook()
    notebook.cell(COMPILABLE["pairwise"][0])
    notebook.cell("SCALE = 2.0\n")
    notebook.cell(
        "def scaled_sum(a):\n    s = 0.0\n    for v in a:\n        s += v * SCALE\n    return s\n"
    )
    return notebook


def _stats_of(fn_name: str) -> list[dict]:
    @eugo.hpc.distribute
    def read_stats(_: int) -> list[dict]:
        from eugo_jupyter.hpc.optimize import _state

        return [dict(s) for s in _state.snapshot()]

    rows = [r for batch in eugo.hpc.get([read_stats(i) for i in range(4)]) for r in batch]
    return [r for r in rows if r["function"] == fn_name]


def test_task_with_optimize_returns_plain_answers_and_compiles(nb: Notebook) -> None:
    x = COMPILABLE["pairwise"][1][0]
    expected = nb["pairwise"](x)
    task = eugo.hpc.distribute(nb["pairwise"])
    results = eugo.hpc.get([task.options(optimize=True)(x) for _ in range(6)])
    for result in results:
        np.testing.assert_array_equal(result, expected)
    stats = _stats_of("pairwise")
    assert stats and all(s["state"] in ("compiled", "verifying") for s in stats)
    assert all(s["compiles"] + s["loads"] == 1 for s in stats)  # once per process at most


def test_global_changed_in_a_later_cell_reaches_the_next_call(nb: Notebook) -> None:
    a = np.arange(10_000.0)
    task = eugo.hpc.distribute(nb["scaled_sum"])
    assert eugo.hpc.get(task.options(optimize=True)(a)) == nb["scaled_sum"](a)
    nb.cell("SCALE = 3.0\n")
    assert eugo.hpc.get(task.options(optimize=True)(a)) == a.sum() * 3.0


def test_map_with_optimize_equals_plain_python(nb: Notebook) -> None:
    nb.cell("def collatz(n):\n    steps = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 "
            "else 3 * n + 1\n        steps += 1\n    return steps\n")  # fmt: skip
    items = list(range(1, 3001))
    expected = [nb["collatz"](i) for i in items]
    assert eugo.hpc.map(nb["collatz"], items, optimize=True) == expected
    assert eugo.hpc.map(nb["collatz"], items, optimize=False) == expected


def test_notebook_switch_optimizes_calls_that_do_not_say(nb: Notebook) -> None:
    nb.cell(
        "def cube_sum(n):\n    t = 0\n    for i in range(n):\n        t += i * i * i\n"
        "    return t\n"
    )
    task = eugo.hpc.distribute(nb["cube_sum"])
    eugo.hpc.set_optimize(True)
    try:
        assert eugo.hpc.get([task(20_000) for _ in range(3)]) == [nb["cube_sum"](20_000)] * 3
    finally:
        eugo.hpc.set_optimize(False)
    assert _stats_of("cube_sum")


def test_profile_report_shows_the_optimizations_measured_on_the_workers(nb: Notebook) -> None:
    x = COMPILABLE["pairwise"][1][0]
    task = eugo.hpc.distribute(nb["pairwise"])
    with eugo.hpc.profile() as run:
        results = eugo.hpc.get([task.options(optimize=True)(x) for _ in range(6)])
    for result in results:
        np.testing.assert_array_equal(result, nb["pairwise"](x))
    report = run.report()
    rows = {r["function"]: r for r in report.to_dict()["optimizations"]}
    row = rows["pairwise"]
    assert row["processes"] >= 1 and len(row["versions"]) == 1
    assert row["versions"][0].endswith("array(float64, 2d, C)")  # read-only when from the store
    assert row["verified"] >= 1 and row["max_diff"] == 0.0
    assert "Optimizations:" in repr(report) and "pairwise: " in repr(report)
    assert "<h4>Optimizations</h4>" in report._repr_html_()


def test_read_only_arrays_from_the_object_store_add_one_version_not_one_per_call(
    nb: Notebook,
) -> None:
    nb.cell(
        "def row_sums(m):\n    out = np.zeros(m.shape[0])\n    for i in range(m.shape[0]):\n"
        "        for j in range(m.shape[1]):\n            out[i] += m[i, j]\n    return out\n"
    )
    m = np.random.default_rng(3).random((300, 300))
    ref = eugo.hpc.put(m)  # arrives read-only and zero-copy on the workers
    task = eugo.hpc.distribute(nb["row_sums"]).options(optimize=True)
    for result in eugo.hpc.get([task(ref) for _ in range(8)]):
        np.testing.assert_allclose(result, m.sum(axis=1), rtol=1e-12)
    stats = _stats_of("row_sums")
    assert stats and all(len(s["versions"]) <= 2 for s in stats)
    assert any("readonly" in v for s in stats for v in s["versions"])


def test_readiness_says_when_compiling_pays_with_the_numbers(nb: Notebook) -> None:
    nb.cell(
        "def walk(n):\n    x = 0.0\n    for i in range(20_000):\n"
        "        x = (x * 1.0001 + i) % 7.0\n"
        "    return x + n\n"
    )
    report = eugo.hpc.readiness(nb["walk"], list(range(200)))
    advice = [c for c in report.checks if c.name == "compiling"]
    assert len(advice) == 1, report.checks
    assert re.search(
        r"compiled, an item takes .+ instead of .+: with optimize=True the run is predicted at "
        r".+ instead of .+",
        advice[0].detail,
    )
    assert advice[0].ok is None  # advice: it does not change the verdict


def test_pandas_accessor_with_optimize_equals_pandas(nb: Notebook) -> None:
    import pandas as pd

    nb.cell(
        "def steps(n):\n    s = 0\n    while n > 1:\n"
        "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n"
        "        s += 1\n    return s\n"
    )
    series = pd.Series(range(1, 5001))
    expected = series.map(nb["steps"])
    got = series.eugo.map(nb["steps"], optimize=True, partitions=2)
    pd.testing.assert_series_equal(got, expected)


def _per_process(run: object, fn: object) -> dict[int, dict]:
    """The latest optimizer stats of ``fn`` as it is now (its key) in each worker process of a
    profiled run."""
    key = _candidates.Candidates(fn).key()[:12]  # type: ignore[arg-type]
    latest: dict[int, dict] = {}
    for task in run.model()["tasks"]:  # type: ignore[attr-defined]
        for stats in task.get("optimizations") or []:
            held = latest.get(stats["pid"])
            if stats["key"] == key and (held is None or stats["at"] >= held["at"]):
                latest[stats["pid"]] = stats
    return latest


def _orbit_cell(nb: Notebook, name: str, r: float) -> list[float]:
    """A map item of about a third of a millisecond in Python (compiling 10,000 of them pays
    even where each worker must first start numba, under load too); returns its answers for
    20,000 seeds, computed with NumPy (the same float operations, elementwise)."""
    nb.cell(
        f"def {name}(seed):\n    x = (seed % 997) / 997.0\n    s = 0.0\n"
        f"    for _ in range(5000):\n        x = {r} * x * (1.0 - x)\n        s += x\n"
        "    return s\n"
    )
    x = (np.arange(20_000) % 997) / 997.0
    s = np.zeros_like(x)
    for _ in range(5000):
        x = r * x * (1.0 - x)
        s += x
    return s.tolist()


def test_a_second_worker_process_loads_what_the_first_compiled(nb: Notebook) -> None:
    expected = _orbit_cell(nb, "spread", 3.9)
    # The map's first (probe) batch runs in one worker process, which compiles; the other
    # worker processes of the node meet the function after that.
    with eugo.hpc.profile() as run:
        assert eugo.hpc.map(nb["spread"], range(20_000), optimize=True) == expected
    processes = _per_process(run, nb["spread"])
    assert len(processes) >= 2, processes
    counts = sorted((s["compiles"], s["loads"]) for s in processes.values())
    states = [(s["state"], s["reason"]) for s in processes.values()]
    assert counts == [(0, 1)] * (len(processes) - 1) + [(1, 0)], states
    row = {r["function"]: r for r in run.report().to_dict()["optimizations"]}["spread"]
    assert (row["processes_compiled"], row["processes_loaded"]) == (1, len(processes) - 1)
    text = repr(run.report())
    assert f"compiled in 1 of {len(processes)} worker processes" in text
    assert f"loaded from the node cache in {len(processes) - 1} (" in text


def test_a_second_run_of_the_same_map_compiles_nothing(nb: Notebook) -> None:
    expected = _orbit_cell(nb, "orbit", 3.7)
    with eugo.hpc.profile() as first:
        assert eugo.hpc.map(nb["orbit"], range(20_000), optimize=True) == expected
    with eugo.hpc.profile() as second:
        assert eugo.hpc.map(nb["orbit"], range(20_000), optimize=True) == expected
    before, after = _per_process(first, nb["orbit"]), _per_process(second, nb["orbit"])
    assert sum(s["compiles"] for s in before.values()) == 1, before
    assert all(s["state"] == "compiled" for s in after.values()), after
    # A process of the first run compiled nothing more; a new one would have loaded it.
    assert {pid: s["compiles"] for pid, s in after.items()} == {
        pid: before[pid]["compiles"] if pid in before else 0 for pid in after
    }


def test_a_helper_edited_in_a_later_cell_compiles_again_on_the_workers(nb: Notebook) -> None:
    nb.cell("def bump(x):\n    return x * 2.0 + 1.0\n")
    nb.cell(
        "def bumped_total(a):\n    s = 0.0\n    for i in range(a.shape[0]):\n"
        "        s += bump(a[i])\n    return s\n"
    )
    a = np.arange(20_000.0)
    task = eugo.hpc.distribute(nb["bumped_total"]).options(optimize=True)
    assert eugo.hpc.get([task(a) for _ in range(6)]) == [nb["bumped_total"](a)] * 6
    nb.cell("def bump(x):\n    return x * 3.0 - 1.0\n")  # the helper's cell, edited
    with eugo.hpc.profile() as run:
        got = eugo.hpc.get([task(a) for _ in range(8)])
    assert got == [float((a * 3.0 - 1.0).sum())] * 8
    processes = _per_process(run, nb["bumped_total"])
    assert sum(s["compiles"] for s in processes.values()) == 1  # the new version, once
    assert sum(s["loads"] for s in processes.values()) == len(processes) - 1
    assert any(s["state"] == "compiled" for s in processes.values())
    assert not any(s["difference"] for s in processes.values())


def test_a_version_the_notebook_did_not_compile_is_compiled_once_on_the_node(
    nb: Notebook,
) -> None:
    nb.cell(
        "def col_sums(m):\n    out = np.zeros(m.shape[1])\n    for i in range(m.shape[0]):\n"
        "        for j in range(m.shape[1]):\n            out[j] += m[i, j]\n    return out\n"
    )
    m = np.random.default_rng(8).random((400, 300))
    assert eugo.hpc.optimize(nb["col_sums"], m).compiled  # saves the writable version here
    ref = eugo.hpc.put(m)  # read-only on the workers: a version the node cache lacks
    task = eugo.hpc.distribute(nb["col_sums"]).options(optimize=True)
    with eugo.hpc.profile() as run:
        for result in eugo.hpc.get([task(ref) for _ in range(6)]):
            np.testing.assert_allclose(result, m.sum(axis=0), rtol=1e-12)
    processes = _per_process(run, nb["col_sums"])
    assert sum(s["compiles"] for s in processes.values()) == 1, processes
    assert sum(s["loads"] for s in processes.values()) == len(processes) - 1


def test_a_smoke_test_on_the_workers_does_not_pin_the_production_calls(nb: Notebook) -> None:
    # The case as a user meets it: a few task calls of 10 steps, then the production
    # calls of 10^6. Before, the smoke calls dropped the compiled version on every worker (its
    # timing included the muting of its prints) and the production calls ran as Python.
    nb.cell(
        "def logistic_run(x, n):\n    for _ in range(n):\n        x = 3.65 * x * (1.0 - x)\n"
        "    return x\n"
    )
    fn = nb["logistic_run"]
    task = eugo.hpc.distribute(fn).options(optimize=True)
    assert eugo.hpc.get([task(0.3, 10) for _ in range(6)]) == [fn(0.3, 10)] * 6
    expected = fn(0.3, 10**6)
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get([task(0.3, 10**6) for _ in range(6)]) == [expected] * 6
    processes = _per_process(run, fn)
    assert processes, run
    states = {pid: (s["state"], s["reason"], s.get("per_cost")) for pid, s in processes.items()}
    assert all(s["state"] == "compiled" for s in processes.values()), states


_FRESH_CLUSTER = """
import json, warnings
warnings.simplefilter("ignore")
import eugo_jupyter as eugo
from tests.hpc.optimize_corpus import Notebook

nb = Notebook()
nb.cell("def orbit(seed):\\n    x = (seed % 997) / 997.0\\n    s = 0.0\\n"
        "    for _ in range(1000):\\n        x = 3.7 * x * (1.0 - x)\\n        s += x\\n"
        "    return s\\n")
fn = nb["orbit"]
items = list(range(40_000))
expected = [fn(i) for i in items]

def start():  # a fresh cluster of one CPU; a busy machine can time a raylet's start out
    for attempt in range(3):
        try:
            return eugo.hpc.init(num_cpus=1)
        except eugo.exceptions.ClusterError:
            if attempt == 2:
                raise

start()
maps = []
for _ in range(8):  # the same map again until the worker switched (a slow machine's numba)
    with eugo.hpc.profile() as run:
        assert eugo.hpc.map(fn, items, optimize=True) == expected
    rows = sorted((s for t in run.model()["tasks"] for s in t.get("optimizations") or []
                   if s["function"] == "orbit"), key=lambda s: s["at"])
    maps.append([{k: r[k] for k in ("pid", "state", "calls", "preparing_calls", "verified",
                                    "compiles", "loads")} for r in rows])
    if rows and rows[-1]["state"] == "compiled":
        break
# The notebook's optimizer on, then a new cluster: its workers start numba at connect too,
# though its first job has the same number as the last cluster's.
eugo.hpc.set_optimize(True)
eugo.hpc.shutdown()
start()
with eugo.hpc.profile() as run:
    assert eugo.hpc.map(fn, items[:100]) == expected[:100]
again = [s["numba_started_early"] for t in run.model()["tasks"]
         for s in t.get("optimizations") or [] if s["function"] == "orbit"]
# The optimizer off again, a new cluster, and a function declared with optimize= (a cell before
# the one that calls it): its declaration starts numba on the workers.
eugo.hpc.set_optimize(False)
eugo.hpc.shutdown()
start()
declared = eugo.hpc.distribute(optimize=True)(fn)
with eugo.hpc.profile() as run:
    assert eugo.hpc.map(declared, items[:100]) == expected[:100]
declared_early = [s["numba_started_early"] for t in run.model()["tasks"]
                  for s in t.get("optimizations") or [] if s["function"] == "orbit"]

@eugo.hpc.distribute
def fired_in_worker():  # reads `declared`: shipped with it, rebuilt (declared again) there
    from eugo_jupyter.hpc.optimize import _prewarm
    assert declared is not None
    return len(_prewarm._fired)

worker_fired = eugo.hpc.get(fired_in_worker())
eugo.hpc.shutdown()
print(json.dumps({"maps": maps, "items": len(items), "again": again,
                  "declared": declared_early, "worker_fired": worker_fired}))
"""


def test_a_fresh_clusters_first_optimized_map_returns_results_before_the_compile(
    tmp_path: Path,
) -> None:
    # A fresh cluster (its own Ray, one worker) and an empty node cache: the worker's first
    # batches come back computed in Python while numba starts and compiles beside them; then
    # the worker switches, and the items after the switch go to the compiled version.
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "EUGO_OPTIMIZE_CACHE": str(tmp_path / "c")}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_CLUSTER], cwd=root, env=env, capture_output=True,
        text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    maps, items = out["maps"], out["items"]
    first = maps[0]
    assert len({r["pid"] for m in maps for r in m}) == 1, maps  # one worker process
    # After the first (sampled) batches, batches of the first map returned while the
    # compiled version was not ready yet, computed in Python.
    assert any(r["state"] == "preparing" and r["preparing_calls"] >= 1 for r in first), first
    last = maps[-1][-1]
    assert last["state"] == "compiled", maps
    assert last["verified"] == 2 and last["compiles"] + last["loads"] == 1, last
    # Every call that took the checked path is counted; the others ran compiled.
    ran_compiled = items * len(maps) - last["calls"]
    assert last["preparing_calls"] >= 1 and ran_compiled >= 1, (last, ran_compiled)
    # set_optimize(True), then a new cluster: its worker had numba started before the map.
    assert out["again"] and all(out["again"]), out["again"]
    # @distribute(optimize=True) on a new cluster: numba started at the declaration.
    assert out["declared"] and all(out["declared"]), out["declared"]
    # Only the notebook starts numba on the workers: a worker that rebuilt the declared function
    # sent no tasks of its own.
    assert out["worker_fired"] == 0
