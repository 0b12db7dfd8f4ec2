"""optimize=True on real Ray workers: tasks and map give plain Python's answers, compiled once
per worker process, and a global changed in a later cell reaches the next call."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import eugo_jupyter as eugo

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
    assert all(s["compile_s"] > 0 for s in stats)


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
