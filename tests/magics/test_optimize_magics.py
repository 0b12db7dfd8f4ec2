"""`%%distribute --optimize` and `%eugo optimize on|off` through a real IPython shell and Ray."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.usefixtures("ray_local")


def test_optimize_cell_compiles_the_notebook_function_it_calls(shell: Any, run: Any) -> None:
    run("import numpy as np\nsamples = np.arange(50_000.0)\n")
    run("def sum_squares(a):\n    s = 0.0\n    for v in a:\n        s += v * v\n    return s\n")
    ran = run(
        "%%distribute --optimize\n"
        "total = sum_squares(samples)\n"
        "again = sum_squares(samples)\n"
        "from eugo_jupyter.hpc.optimize import _state\n"
        "states = [s['state'] for s in _state.snapshot() if s['function'] == 'sum_squares']\n"
    )
    assert ran.result.success, ran.text
    expected = float((shell.user_ns["samples"] ** 2).sum())
    assert shell.user_ns["total"] == pytest.approx(expected, rel=1e-12)
    assert shell.user_ns["again"] == shell.user_ns["total"]
    assert shell.user_ns["states"] and shell.user_ns["states"][0] in ("verifying", "compiled")
    assert (
        callable(shell.user_ns["sum_squares"])
        and shell.user_ns["sum_squares"].__module__ == "__main__"
    )


def test_optimize_flag_refuses_an_unknown_mode(run: Any) -> None:
    ran = run("%%distribute --optimize fast\nx = 1\n")
    assert not ran.result.success
    assert "--optimize fast: use one of on, off, cpu or gpu." in ran.text


def test_eugo_optimize_on_and_off_is_the_notebook_switch(run: Any) -> None:
    from eugo_jupyter import _hooks

    ran = run("%eugo optimize on")
    assert ran.result.success, ran.text
    try:
        assert _hooks.optimize_default is True
        assert "optimize=True for every call of this notebook" in ran.text
    finally:
        off = run("%eugo optimize off")
    assert off.result.success and _hooks.optimize_default is False
    bad = run("%eugo optimize sometimes")
    assert not bad.result.success and "use one of on, off, cpu or gpu" in bad.text
