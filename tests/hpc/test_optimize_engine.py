"""The optimizer on one process, with real numba: what is compiled, verified and explained.

Every function is defined as a notebook cell (its own file, the shared namespace), so the line
numbers checked are the cell's own. No wall-clock bound anywhere: speed is the benchmark's.
"""

from __future__ import annotations

import builtins
import re
import sys
import warnings
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import OptionsError
from eugo_jupyter.hpc.optimize import OptimizationReport, Optimized, _state
from eugo_jupyter.hpc.optimize._differs import explain_difference
from eugo_jupyter.hpc.optimize._verify import Difference

from .optimize_corpus import COMPILABLE, DIFFERENT, NOT_COMPILED, UNSIGNED_STORE, Notebook


def _last_def(source: str) -> str:
    return re.findall(r"^def (\w+)", source, re.M)[-1]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore")  # numba's deprecation notes on reflected lists


@pytest.mark.parametrize("name", sorted(COMPILABLE))
def test_compilable_corpus_is_compiled_verified_and_equal(name: str) -> None:
    source, args = COMPILABLE[name]
    nb = Notebook()
    nb.cell(source)
    fn = nb[_last_def(source)]
    expected = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    report = eugo.hpc.optimize(fn, *args)
    assert report.compiled, repr(report)
    np.testing.assert_array_equal(np.asarray(report.result), np.asarray(expected))
    data = report.as_dict()
    assert data["verification"]["calls"] >= 2 and data["verification"]["difference"] == ""
    assert data["compile_s"] > 0 and data["versions"]
    assert "compiled, serial (numba.njit)" in repr(report)
    assert "verified on" in repr(report) and "<b>" in report._repr_html_()


def test_helper_from_another_cell_is_compiled_with_it() -> None:
    source, args = COMPILABLE["monte_carlo"]
    nb = Notebook()
    helper, caller = source.split("\ndef estimate_pi")
    nb.cell(helper)
    nb.cell("def estimate_pi" + caller)
    report = eugo.hpc.optimize(nb["estimate_pi"], *args)
    assert report.compiled and report.helpers == ["inside"]
    assert "with the helpers inside" in repr(report)


@pytest.mark.parametrize("name", sorted(NOT_COMPILED))
def test_not_compiled_names_its_line_and_a_fix(name: str, tmp_path: Path) -> None:
    source, args, kind, line = NOT_COMPILED[name]
    nb = Notebook()
    nb.ns["pd"] = pd
    nb.cell(source)
    fn = nb[_last_def(source)]
    if isinstance(args[0], str) and args[0] == "SERIES":
        args = (pd.Series([1.0, 2.0, 3.0]),)
    if isinstance(args[0], str) and args[0] == "POINT":
        args = (nb["Point"](1.5),)
    if isinstance(args[0], str) and args[0] == "NPY_FILE":
        np.save(tmp_path / "data.npy", np.arange(5.0))
        args = (str(tmp_path / "data.npy"),)
    expected = fn(*args)
    report = eugo.hpc.optimize(fn, *args)
    assert not report.compiled
    if kind == "generator":
        assert list(report.result) == list(expected)
    else:
        np.testing.assert_equal(report.result, expected)
    found = report.as_dict()["not_compiled"][0]
    assert (found["kind"], found["line"]) == (kind, line), found
    assert found["fix"] and f"line {line}" in repr(report)
    if kind != "generator":
        assert found["numba_message"]  # numba's own words kept under ours
        assert "numba&#x27;s message" in report._repr_html_() or "numba's message" in (
            report._repr_html_()
        )


def test_integer_overflow_is_caught_and_python_kept() -> None:
    nb = Notebook()
    nb.cell(
        "def factorial(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n"
        "    return r\n"
    )
    report = eugo.hpc.optimize(nb["factorial"], 25)
    assert not report.compiled and report.result == 15511210043330985984000000
    assert (
        "factorial(25) result: compiled 7034535277573963776, Python "
        "15511210043330985984000000: 64-bit integer overflow; kept Python"
    ) in repr(report)


def test_float32_sum_of_another_type_keeps_python() -> None:
    # Python adds float32 items in float32 (NumPy's promotion); numba accumulates in float64.
    nb = Notebook()
    nb.cell("def total(a):\n    s = 0.0\n    for v in a:\n        s += v\n    return s\n")
    data = np.random.default_rng(1).random(200_000).astype(np.float32)
    expected = nb["total"](data)
    report = eugo.hpc.optimize(nb["total"], data)
    assert not report.compiled and report.result == expected
    # Python's answer is a float32, numba's a float64: a different type is a different answer.
    assert "types differ: Python gives float32, compiled float64" in report.reason


def test_in_place_change_is_compared_and_the_callers_array_is_left_alone() -> None:
    source, args = COMPILABLE["in_place"]
    nb = Notebook()
    nb.cell(source)
    m = args[0].copy()
    before = m.copy()
    report = eugo.hpc.optimize(nb["normalize_rows"], m)
    assert report.compiled
    np.testing.assert_array_equal(m, before)  # optimize() runs on copies


def test_an_object_array_changed_in_place_is_explained_and_left_to_python() -> None:
    nb = Notebook()
    nb.cell(
        "def grow(a):\n    for i in range(a.shape[0]):\n        a[i] = a[i] * 3\n    return None\n"
    )
    a = np.array([2**62, 1], dtype=object)
    report = eugo.hpc.optimize(nb["grow"], a)
    assert not report.compiled  # an object array: explained, plain result kept
    assert report.as_dict()["not_compiled"][0]["kind"] == "object array"


def test_optimized_call_path_compiles_once_per_process_and_sees_changes() -> None:
    nb = Notebook()
    nb.cell("SCALE = 2.0\n")
    nb.cell("def helper(x):\n    return x * SCALE\n")
    nb.cell(
        "def apply(a):\n    out = np.empty_like(a)\n    for i in range(a.shape[0]):\n"
        "        out[i] = helper(a[i])\n    return out\n"
    )
    a = np.arange(20_000.0)  # long enough that compiled is clearly faster: it is kept
    first = Optimized(nb["apply"])
    for _ in range(4):
        np.testing.assert_array_equal(first(a), a * 2.0)
    entry = first.entry()
    assert entry.state == "compiled" and entry.compile_s > 0
    again = Optimized(nb["apply"])  # the same function shipped again: the same entry
    assert again.entry() is entry
    nb.cell("SCALE = 3.0\n")  # a later cell changes a global the helper reads
    changed = Optimized(nb["apply"])
    np.testing.assert_array_equal(changed(a), a * 3.0)
    assert changed.entry() is not entry
    nb.cell("def helper(x):\n    return x + SCALE\n")  # and then the helper itself
    edited = Optimized(nb["apply"])
    for _ in range(3):
        np.testing.assert_array_equal(edited(a), a + 3.0)
    assert edited.entry().state == "compiled"
    assert {s["key"] for s in _state.snapshot() if s["function"] == "apply"} >= {
        entry.key[:12],
        changed.entry().key[:12],
        edited.entry().key[:12],
    }


def test_the_key_of_a_function_is_the_same_after_it_compiled() -> None:
    # It was not: marshal's bytes for a code object change with the reference counts of its
    # constants, which numba's compile raises, so a second map compiled everything again.
    from eugo_jupyter.hpc.optimize import _candidates

    nb = Notebook()
    nb.cell(COMPILABLE["recurrence"][0])
    before = _candidates.Candidates(nb["logistic"]).key()
    fn = Optimized(nb["logistic"])
    for _ in range(4):
        fn(*COMPILABLE["recurrence"][1])
    assert fn.entry().state == "compiled"
    assert _candidates.Candidates(nb["logistic"]).key() == before
    assert Optimized(nb["logistic"]).entry() is fn.entry()


def test_a_call_that_fails_in_compiled_code_reruns_in_python_and_is_counted() -> None:
    nb = Notebook()
    nb.cell(
        "def total(xs):\n    t = 0.0\n    for x in xs:\n        if x is not None:\n"
        "            t += x\n    return t\n"
    )
    # force: numba's list unboxing is slower than Python here, which would keep Python at once.
    fn = Optimized(nb["total"], force=True)
    floats = [1.0, 2.0] * 20_000
    for _ in range(3):
        assert fn(floats) == 60_000.0
    assert fn.entry().state == "compiled", fn.entry().reason
    assert fn([1.0, None, 2.0]) == 3.0  # a None among floats: numba cannot take this list
    stats = fn.entry().stats()
    assert stats["python_fallbacks"] == 1 and stats["fallback_error"]


def test_break_even_keeps_python_for_a_short_run_and_decides_again_for_another() -> None:
    nb = Notebook()
    nb.cell("def add(a, b):\n    return a + b\n")
    fn = Optimized(nb["add"], expected_calls=3)
    assert [fn(i, 2) for i in range(3)] == [2, 3, 4]
    entry = fn.entry()
    assert entry.state == "python"
    assert re.search(r"pays after about \d+ calls per worker; this run has 3 per "
                     r"worker: kept Python", entry.reason)  # fmt: skip
    task_call = Optimized(nb["add"])  # a call site whose count is not known: compiles
    assert task_call(1, 2) == 3
    assert task_call.entry() is entry and entry.state == "verifying", entry.reason


def test_a_map_whose_first_item_is_cheap_is_sampled_before_the_break_even() -> None:
    # work(0) takes a fraction of a microsecond, work(20) a millisecond: deciding on the first
    # item alone would keep Python for a map of 100,000 such items.
    nb = Notebook()
    nb.cell(
        "def work(n):\n    s = 0\n    for i in range(n * 1000):\n        s += i % 7\n    return s\n"
    )
    fn = Optimized(nb["work"], expected_calls=100_000)
    assert [fn(n) for n in range(40)] == [nb["work"](n) for n in range(40)]
    entry = fn.entry()
    assert entry.state == "compiled", entry.reason
    assert re.search(r"this run has 100000 per worker: compiled", entry.decision)


def test_options_accept_optimize_and_refuse_the_rest() -> None:
    @eugo.hpc.distribute(optimize=True)
    def f(x):
        return x

    assert f.options(optimize="cpu").options_dict == {}
    with pytest.raises(OptionsError, match=r'optimize=\'fast\' is not allowed.*"cpu" or "gpu"'):
        f.options(optimize="fast")
    with pytest.raises(OptionsError, match="needs a GPU for the call: request one with num_gpus"):
        f.options(optimize="gpu")
    assert f.options(optimize="gpu", num_gpus=1).options_dict == {"num_gpus": 1}
    with pytest.raises(OptionsError, match="optimize="):
        eugo.hpc.set_optimize("always")
    eugo.hpc.set_optimize(True)
    try:
        from eugo_jupyter import _hooks

        assert _hooks.optimize_default is True
    finally:
        eugo.hpc.set_optimize(False)


def test_an_actor_refuses_optimize_with_a_fix() -> None:
    with pytest.raises(OptionsError, match="optimize= is not an option for an actor"):

        @eugo.hpc.distribute(optimize=True)
        class Counter:
            pass


def test_two_cpus_try_the_parallel_compile_first_and_fall_back_to_serial() -> None:
    nb = Notebook()
    nb.cell("def hyp(a, b):\n    return np.sqrt(a * a + b * b).sum()\n")
    nb.cell("def loop_sum(a):\n    s = 0.0\n    for v in a:\n        s += v\n    return s\n")
    a, b = np.random.default_rng(4).random((2, 100_000))
    with_arrays = Optimized(nb["hyp"], num_cpus=2, force=True)
    assert with_arrays(a, b) == nb["hyp"](a, b)
    assert with_arrays.entry().stats()["how"].startswith("parallel (numba.njit(parallel=True))")
    plain_loop = Optimized(nb["loop_sum"], num_cpus=2, force=True)
    assert plain_loop(a) == nb["loop_sum"](a)
    entry = plain_loop.entry()
    assert entry.stats()["how"].startswith("serial")
    assert "parallel=True found nothing to run in parallel" in " ".join(entry.notes)


def test_without_numba_optimize_says_how_to_install_it_and_runs_plain() -> None:
    # A fresh interpreter in which numba cannot be imported (as where it is not installed).
    import subprocess
    import sys

    code = (
        "import sys, importlib.abc, warnings\n"
        "class NoNumba(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('numba', 'llvmlite'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, NoNumba())\n"
        "import eugo_jupyter as eugo\n"
        "def total(n):\n    return sum(range(n))\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    report = eugo.hpc.optimize(total, 10)\n"
        "print(report.result, report.compiled)\n"
        "print(report.reason)\n"
        "print([str(w.message) for w in caught])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "45 False"
    assert "pip install numba" in lines[1] and "the plain function ran" in lines[1]
    assert "pip install numba" in lines[2]


def test_a_function_that_reads_a_file_keeps_python_and_its_numeric_helper_is_compiled(
    tmp_path: object,
) -> None:
    # What a task that reads its input in Python and calls a numeric helper gets: numba cannot
    # type open() or np.load, so the function itself runs as Python around the compiled helper.
    nb = Notebook()
    nb.cell(
        "def smooth(a, passes):\n    out = a.copy()\n    n = a.shape[0]\n"
        "    for _ in range(passes):\n        src = out.copy()\n        for i in range(n):\n"
        "            out[i] = (src[i - 1] + src[i] + src[(i + 1) % n]) / 3\n    return out\n"
    )
    nb.cell(
        "import numpy as np\n\ndef load_and_smooth(path):\n    with open(path, 'rb') as f:\n"
        "        data = np.load(f)\n    return float(smooth(data, 4).sum())\n"
    )
    path = f"{tmp_path}/data.npy"
    np.save(path, np.linspace(0.0, 1.0, 5_000))
    plain = nb["load_and_smooth"](path)
    report = eugo.hpc.optimize(nb["load_and_smooth"], path)
    assert report.result == pytest.approx(plain, rel=1e-12)
    text = repr(report)
    assert report.compiled, text
    assert "the helper smooth compiled (numba.njit)" in text
    assert "load_and_smooth itself runs as Python" in text
    data = report.as_dict()
    assert data["verification"]["calls"] >= 2 and data["verification"]["difference"] == ""


def test_a_helper_numba_cannot_type_stays_python_and_the_answer_is_unchanged(
    tmp_path: object,
) -> None:
    nb = Notebook()
    nb.cell("import os\n\ndef name_of(path):\n    return os.path.basename(path).upper()\n")
    nb.cell(
        "def label(path):\n    with open(path) as f:\n        size = len(f.read())\n"
        "    return name_of(path) + str(size)\n"
    )
    path = f"{tmp_path}/tile.txt"
    with open(path, "w") as f:
        f.write("abc")
    fn = Optimized(nb["label"], force=True)
    for _ in range(3):
        assert fn(path) == "TILE.TXT3"
    entry = fn.entry()
    assert entry.state == "python"  # nothing compiled: said, not shown as compiled
    assert "numba could not type its helpers either" in entry.reason, entry.reason


def test_new_argument_types_after_settling_are_checked_against_python_first() -> None:
    nb = Notebook()
    nb.cell("def power(b, n):\n    r = 1\n    for _ in range(n):\n        r *= b\n    return r\n")
    fn = Optimized(nb["power"], force=True)
    for _ in range(4):
        assert fn(1.5, 40) == 1.5**40
    entry = fn.entry()
    assert entry.state == "compiled" and entry.fast is not None
    assert fn(1.25, 3) == 1.25**3  # a version it has: numba's dispatcher straight away
    # Integers are a new version, and 3**50 overflows 64 bits: Python's answer, and kept.
    assert fn(3, 50) == 3**50
    assert entry.state == "python"
    assert "64-bit integer overflow; kept Python" in entry.reason, entry.reason
    assert fn(2.0, 3) == 8.0


def _settled_normalize_rows() -> Optimized:
    """The corpus's function that changes its argument in place, compiled and verified."""
    source, args = COMPILABLE["in_place"]
    nb = Notebook()
    nb.cell(source)
    fn = Optimized(nb["normalize_rows"], force=True)
    for _ in range(4):
        fn(args[0].copy())
    return fn


def test_a_new_layout_of_an_array_changed_in_place_is_checked_before_it_is_changed() -> None:
    fn = _settled_normalize_rows()
    entry = fn.entry()
    assert entry.state == "compiled" and entry.mutates
    m = np.asfortranarray(np.random.default_rng(5).random((50, 7)))  # a layout not compiled
    expected = m / m.sum(axis=1, keepdims=True)
    assert fn(m) == 50
    np.testing.assert_allclose(m, expected, rtol=1e-12)  # changed once, by Python
    assert entry.state == "compiled" and len(entry.compiled.versions()) == 2, entry.reason


def test_an_error_in_compiled_code_that_changes_its_arguments_is_raised_not_rerun() -> None:
    # Rerunning in Python would normalise the rows before the zero row a second time.
    fn = _settled_normalize_rows()
    assert fn.entry().state == "compiled"
    m = np.ones((4, 3))
    m[2] = 0.0  # numba raises ZeroDivisionError here (Python's NumPy scalars give nan)
    with pytest.raises(ZeroDivisionError) as raised:
        fn(m)
    assert "was not rerun in Python" in "".join(raised.value.__notes__)
    np.testing.assert_array_equal(m[:2], np.full((2, 3), 1 / 3))  # once, not twice


def test_what_a_call_prints_is_printed_once_while_it_is_verified(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Verifying runs the compiled version beside Python: only Python's lines are the call's."""
    nb = Notebook()
    nb.cell("def loud(n):\n    print('step', n)\n    return n * 2\n")
    fn = Optimized(nb["loud"], force=True)
    for n in range(4):
        assert fn(n) == n * 2
    assert fn(2.5) == 5.0  # new argument types: checked against Python once more
    assert fn.entry().state == "compiled", fn.entry().reason
    printed = capfd.readouterr().out.splitlines()
    assert printed == ["step 0", "step 1", "step 2", "step 3", "step 2.5"], printed


def test_a_print_compiles_after_ray_replaced_the_builtin_print(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Ray's tqdm_ray puts its ``safe_print`` in ``builtins`` once a bar shows in a process (a
    Ray Data run in the notebook); numba knows only the builtin, so a function that prints was
    kept Python with "numba does not know print"."""
    from ray.experimental import tqdm_ray

    monkeypatch.setattr(builtins, "print", tqdm_ray.safe_print)
    nb = Notebook()
    nb.cell("def shout(n):\n    print('at', n)\n    return n + 1\n")
    fn = Optimized(nb["shout"], force=True)
    assert [fn(n) for n in range(4)] == [1, 2, 3, 4]
    assert fn.entry().state == "compiled", fn.entry().reason
    assert capfd.readouterr().out.splitlines() == ["at 0", "at 1", "at 2", "at 3"]


@pytest.mark.parametrize(
    "before_ours",
    ["", "numba.njit(lambda x: x + 1)(1)\n"],
    ids=["first-compile-ours", "something-compiled-first"],
)
def test_a_print_compiles_when_ray_replaced_print_after_numba_loaded(before_ours: str) -> None:
    """A notebook's order (numba imported, then a Ray bar, then compiles): numba types the
    builtin ``print`` and lowers Ray's when its CPU target starts after the bar, whether our
    compile starts it or another compile did. A fresh interpreter each, as a kernel."""
    import subprocess

    code = (
        "import builtins, numba\n"
        "from ray.experimental import tqdm_ray\n"
        "builtins.print = tqdm_ray.safe_print\n"
        f"{before_ours}"
        "from eugo_jupyter.hpc.optimize import Optimized\n"
        "ns = {}\n"
        "exec('def shout(n):\\n    print(\\'at\\', n)\\n    return n + 1\\n', ns)\n"
        "fn = Optimized(ns['shout'], force=True)\n"
        "print([fn(n) for n in range(4)], fn.entry().state.value, fn.entry().reason)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-5:-1] == ["at 0", "at 1", "at 2", "at 3"], out.stdout
    assert out.stdout.splitlines()[-1].startswith("[1, 2, 3, 4] compiled"), out.stdout


class _PythonRuns:
    """Counts the runs of a function's Python code that executed a line: a compiled call runs
    none (numba shows a profiler a call of the function's code, never a line of it)."""

    def __init__(self, fn: object) -> None:
        self.code = fn.__code__  # type: ignore[attr-defined]
        self.count = 0

    def _called(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if frame.f_code is not self.code:
            return None
        return self._line

    def _line(self, frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "line":
            self.count += 1
            frame.f_trace = None  # one line is enough: stop tracing this run
        return None

    def __enter__(self) -> _PythonRuns:
        sys.settrace(self._called)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


RECURRENCE = (
    "def logistic(x, n):\n    for _ in range(n):\n        x = 3.7 * x * (1.0 - x)\n    return x\n"
)


def test_a_smoke_test_does_not_pin_the_production_calls_to_python() -> None:
    # A few calls of 10 steps, then the production calls of 10^6: whatever the smoke calls
    # decided (numba's dispatch can cost more than 10 steps), these run compiled.
    nb = Notebook()
    nb.cell(RECURRENCE)
    logistic = nb["logistic"]
    fn = Optimized(logistic)
    for _ in range(3):
        assert fn(0.3, 10) == logistic(0.3, 10)
    expected = logistic(0.3, 10**6)
    with _PythonRuns(logistic) as runs:
        results = [fn(0.3, 10**6) for _ in range(5)]
    assert results == [expected] * 5
    assert runs.count == 0, fn.entry().stats()  # all 5 production calls ran compiled
    assert fn.entry().state == "compiled"


def test_a_version_dropped_as_slower_on_cheap_calls_is_used_on_costlier_ones() -> None:
    # A list of 2,000 floats: numba unboxes it on every call (tens of µs), more than Python's
    # 3 steps cost; 3 steps, then 300,000: the verified version comes back for those.
    nb = Notebook()
    nb.cell(
        "def walk(xs, steps):\n    x = 0.5\n    for i in range(steps):\n"
        "        x = 3.7 * x * (1.0 - x) + xs[i % 3] * 1e-9\n    return x\n"
    )
    walk = nb["walk"]
    xs = [0.1] * 2000
    fn = Optimized(walk)
    for _ in range(3):
        assert fn(xs, 3) == walk(xs, 3)
    entry = fn.entry()
    assert entry.state == "python" and "kept Python for calls of about this cost" in entry.reason
    expected = walk(xs, 300_000)
    with _PythonRuns(walk) as runs:
        assert [fn(xs, 300_000) for _ in range(5)] == [expected] * 5
    # The sizes (2,003 then 302,000) predicted too little for a list numba unboxes each call:
    # the costly calls ran in Python and were measured; 3 in a row (one alone may be a call
    # the machine's load preempted) decided again, and the next ones ran compiled.
    assert runs.count == 3
    assert entry.state == "compiled" and entry.compiles == 1  # the same version, not recompiled
    assert re.fullmatch(
        r"compiled version used from the 7th call on: calls became 10\^\d+ times costlier",
        entry.stats()["per_cost"],
    )
    assert entry.stats()["per_cost"] in repr(OptimizationReport(entry, None, 1))


def test_a_function_kept_python_on_cheap_calls_is_compiled_when_calls_get_costly() -> None:
    nb = Notebook()
    nb.cell(RECURRENCE.replace("3.7", "3.6"))  # its own key: not the entry of the test above
    logistic = nb["logistic"]
    fn = Optimized(logistic, expected_calls=200)  # a map of 200 items
    assert [fn(0.3, 1) for _ in range(100)] == [logistic(0.3, 1)] * 100
    entry = fn.entry()
    assert entry.state == "python" and "kept Python" in entry.reason
    expected = logistic(0.3, 200_000)
    with _PythonRuns(logistic) as runs:
        results = [fn(0.3, 200_000) for _ in range(10)]
    assert results == [expected] * 10
    assert entry.state == "compiled", entry.reason
    # The first costly call decided again (and was timed as Python), two verified both ways;
    # the other seven ran compiled only.
    assert runs.count <= 3
    assert entry.stats()["per_cost"].startswith("compiled version used from the 101st call on")


def test_a_version_that_gave_a_different_answer_stays_dropped_on_costlier_calls() -> None:
    nb = Notebook()
    nb.cell(
        "def factorial(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n"
        "    return r\n"
    )
    factorial = nb["factorial"]
    fn = Optimized(factorial)
    assert fn(25) == factorial(25)
    entry = fn.entry()
    assert entry.state == "python" and entry.difference is not None
    with _PythonRuns(factorial) as runs:
        assert fn(2500) == factorial(2500)
    assert runs.count == 2 and entry.state == "python" and entry.stats()["per_cost"] == ""


def test_an_int16_answer_returned_as_int64_is_a_different_answer() -> None:
    # NumPy 2 keeps int16 + 1 in int16; numba promotes it to int64 (four times the bytes).
    nb = Notebook()
    nb.cell("def shift(a):\n    return a + 1\n")
    a = np.arange(1000, dtype=np.int16)
    report = eugo.hpc.optimize(nb["shift"], a)
    assert not report.compiled and report.result.dtype == np.int16
    assert (
        "result: compiled dtype int64, Python dtype int16: dtypes differ: Python gives int16, "
        "compiled int64 (4 times the bytes)"
    ) in report.reason


@pytest.mark.parametrize("name", sorted(DIFFERENT))
def test_a_different_answer_names_its_likely_cause_and_line(name: str) -> None:
    source, args, kind, line = DIFFERENT[name]
    nb = Notebook()
    nb.cell(source)
    fn = nb[_last_def(source)]
    report = eugo.hpc.optimize(fn, *args)
    assert not report.compiled and report.difference, repr(report)
    found = report.as_dict()["not_compiled"][0]
    assert (found["kind"], found["line"]) == (kind, line), found
    assert found["fix"] and f"how to help it: {fn.__name__}, line {line}" in repr(report)


def test_a_float_stored_into_an_unsigned_array_is_named_where_this_cpu_makes_them_differ() -> None:
    # Undefined in C: whether the answers differ depends on the CPU, so the expectation follows
    # what plain numba gives here. Equal answers: compiling is right. Different: named, with a fix.
    source, args, kind, line = UNSIGNED_STORE
    nb = Notebook()
    nb.cell(source)
    fn = nb["to_counts"]
    plain, compiled = fn(args[0].copy()), numba.njit(fn)(args[0].copy())
    report = eugo.hpc.optimize(fn, *args)
    if np.array_equal(plain, compiled):
        assert report.compiled and np.array_equal(report.result, plain), repr(report)
        return
    assert not report.compiled and report.difference, repr(report)
    found = report.as_dict()["not_compiled"][0]
    assert (found["kind"], found["line"]) == (kind, line), found
    assert "cast to float first" in found["fix"]


def test_the_unsigned_store_is_recognised_on_its_line_whatever_the_cpu() -> None:
    # The recogniser itself, on every machine: given the answers this CPU's vectorised numba
    # gives where it saturates (0 for -1.0), it names the store's line and the fix.
    source, _, kind, line = UNSIGNED_STORE
    nb = Notebook()
    nb.cell(source)
    fn = nb["to_counts"]
    differs = Difference("result[0]", "65535", "0", "values differ")
    helped = explain_difference(None, fn, differs)
    assert helped is not None and (helped.kind, helped.line) == (kind, line), helped
    assert "out[i] = a[i]" in helped.source_line and "clip" in helped.fix


_FRESH_PROCESS = """
import json, sys, time
from tests.hpc.optimize_corpus import Notebook
from eugo_jupyter.hpc.optimize import Optimized

loaded_before = "numba" in sys.modules
nb = Notebook()
nb.cell(RECURRENCE)
logistic = nb["logistic"]
fn = Optimized(logistic, expected_calls=100_000)  # a map's share of items on this worker
expected = logistic(0.3, 1000)
states = []
deadline = time.monotonic() + 300
while time.monotonic() < deadline and fn.entry().state != "compiled":
    assert fn(0.3, 1000) == expected
    states.append(fn.entry().state)
entry = fn.entry()
print(json.dumps({"loaded_before": loaded_before, "states": states, "state": entry.state,
                  "compiles": entry.compiles, "reason": entry.reason}))
"""


def test_a_fresh_process_runs_the_calls_in_python_while_numba_starts(tmp_path: Path) -> None:
    # A fresh worker: numba's start (about a second) and the compile run beside the calls,
    # which go on in Python and switch to the compiled version once it is ready and verified.
    import json
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "EUGO_OPTIMIZE_CACHE": str(tmp_path / "c")}
    script = f"RECURRENCE = {RECURRENCE!r}\n" + _FRESH_PROCESS
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert not out["loaded_before"] and out["state"] == "compiled", out["reason"]
    states = out["states"]
    assert states.count("preparing") >= 1, states  # results came while numba was starting
    assert states.index("preparing") < states.index("verifying")
    assert out["compiles"] == 1
