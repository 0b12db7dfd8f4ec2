"""%%distribute through a real IPython shell against a real local Ray (2 CPUs)."""

from __future__ import annotations

import _thread
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waiting import until

pytestmark = pytest.mark.usefixtures("ray_local")


def test_reads_from_and_writes_to_the_namespace(shell: Any, run: Any) -> None:
    run("base = 10\nunused_big = list(range(100_000))\ndef helper(v):\n    return v * 3\n")
    ran = run("%%distribute\nimport math\ntotal = helper(base) + 1\nroot = math.sqrt(total)\n")
    assert ran.result.success, ran.text
    assert shell.user_ns["total"] == 31
    assert shell.user_ns["root"] == pytest.approx(31**0.5)
    assert shell.user_ns["math"].__name__ == "math"  # the module the cell imported is bound too


def test_only_free_variables_are_shipped() -> None:
    from eugo_jupyter.hpc.cells import analyze

    plan = analyze("y = x + 1\nz = y * 2\nfor i in range(n):\n    w = i\nprint(w)\n")
    assert set(plan.free) == {"x", "n", "range", "w", "print"}  # y and i are bound before use
    assert set(plan.assigned) == {"y", "z", "i", "w"}


def test_the_worker_sees_only_what_the_cell_reads(shell: Any, run: Any) -> None:
    run("secret_unused = 'do not ship'\nneeded = 5\n")
    ran = run("%%distribute\nseen = sorted(k for k in globals() if not k.startswith('__'))\n")
    assert ran.result.success, ran.text
    assert "needed" not in shell.user_ns["seen"]  # not read, so not sent
    assert "secret_unused" not in shell.user_ns["seen"]
    ran = run(
        "%%distribute\nseen = sorted(k for k in globals() if not k.startswith('__')) + [needed]\n"
    )
    assert "needed" in shell.user_ns["seen"] and "secret_unused" not in shell.user_ns["seen"]


def test_last_expression_is_displayed_like_a_normal_cell(shell: Any, run: Any) -> None:
    ran = run("%%distribute\nanswer = 6 * 7\nanswer\n")
    assert ran.result.success, ran.text
    assert ran.result.result == 42
    assert "Out[" in ran.out and "42" in ran.out
    assert shell.user_ns["_"] == 42
    quiet = run("%%distribute\n6 * 7;\n")
    assert quiet.result.result is None or "Out[" not in quiet.out


def test_a_function_defined_in_the_cell_comes_back_usable(shell: Any, run: Any) -> None:
    run("offset = 100\n")
    ran = run("%%distribute\ndef shift(v):\n    return v + offset\n")
    assert ran.result.success, ran.text
    run("offset = 1000\n")
    assert shell.user_ns["shift"](1) == 1001  # it sees the notebook's globals, as if defined here


def test_prints_appear_while_the_cell_runs(
    shell: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    from eugo_jupyter.magics import distribute

    flag = tmp_path / "seen-first"
    shell.user_ns["flag_path"] = str(flag)
    original_emit = distribute._emit

    def emit(chunks: Any) -> None:
        # The cell blocks until its first print has been written under it. (A thread reading
        # capsys raced with the write: a line written between its read and reset was lost.)
        original_emit(chunks)
        if any("first line" in text for _stream, text in chunks):
            flag.write_text("yes")

    monkeypatch.setattr(distribute, "_emit", emit)
    capsys.readouterr()
    cell = (
        "%%distribute\nimport os, time\nprint('first line')\n"
        "deadline = time.time() + 60\n"
        "while not os.path.exists(flag_path) and time.time() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print('second line' if os.path.exists(flag_path) else 'never streamed')\n"
    )
    result = shell.run_cell(cell, store_history=True)
    out = capsys.readouterr().out
    assert result.success
    assert flag.exists(), "the first print did not reach the notebook before the cell ended"
    assert "first line" in out and "second line" in out and "never streamed" not in out
    assert "(pid=" not in out


def test_stdout_and_stderr_keep_their_streams(run: Any) -> None:
    ran = run("%%distribute\nimport sys\nprint('to out')\nprint('to err', file=sys.stderr)\n")
    assert "to out" in ran.out and "to err" in ran.err


def test_c_level_and_subprocess_output_shows_under_the_cell(run: Any) -> None:
    # A cell gets what a task gets: what C code and subprocesses write to the worker's
    # descriptors shows under the cell, on its own stream, without Ray's (pid=...) prefix.
    ran = run(
        "%%distribute\nimport os, subprocess\nos.write(1, b'from a C library\\n')\n"
        "os.system('echo from a subprocess')\nos.write(2, b'to the C stderr\\n')\n"
        "print('from Python')\n"
    )
    assert ran.result.success, ran.text
    for line in ("from a C library", "from a subprocess", "from Python"):
        assert f"{line}\n" in ran.out, ran.text
    assert "to the C stderr\n" in ran.err, ran.text
    assert "pid=" not in ran.text


def test_traceback_has_the_cells_own_line_numbers(shell: Any, run: Any) -> None:
    ran = run("%%distribute\nbefore = 1\n\nratio = 1 / 0\nafter = 2\n")
    assert isinstance(ran.result.error_in_exec, ZeroDivisionError)
    text = ran.text
    assert "ZeroDivisionError" in text
    assert "line 4" in text and "ratio = 1 / 0" in text  # line 1 is %%distribute
    assert "eugo_jupyter" not in text  # no frame of the magic or of hpc/cells
    assert shell.user_ns["before"] == 1 and "after" not in shell.user_ns


def test_traceback_through_a_function_defined_in_the_notebook(run: Any) -> None:
    run("def fragile(v):\n    return {'a': 1}[v]\n")
    ran = run("%%distribute\nfragile('b')\n")
    assert isinstance(ran.result.error_in_exec, KeyError)
    assert "in fragile" in ran.text and "return {'a': 1}[v]" in ran.text
    assert "line 2" in ran.text


def test_unpicklable_variable_is_named_before_submission(shell: Any, run: Any) -> None:
    run("import threading\nguard = threading.Lock()\n")
    ran = run("%%distribute\nwith guard:\n    pass\n")
    from eugo_jupyter.exceptions import SerializationError

    assert isinstance(ran.result.error_in_exec, SerializationError)
    assert "'guard'" in ran.text and "Nothing was submitted" in ran.text


def test_function_capturing_an_unpicklable_is_explained(run: Any) -> None:
    run(
        "import threading\nlatch = threading.Lock()\n"
        "def locked():\n    with latch:\n        return 1\n"
    )
    ran = run("%%distribute\nlocked()\n")
    assert "locked" in ran.text and "'latch'" in ran.text


def test_unpicklable_result_stays_on_the_worker_with_a_message(shell: Any, run: Any) -> None:
    ran = run("%%distribute\nimport threading\nmade_there = threading.Lock()\nkept = 3\n")
    assert ran.result.success
    assert shell.user_ns["kept"] == 3 and "made_there" not in shell.user_ns
    assert "made_there was not brought back" in ran.err


def test_syntax_error_reported_as_a_normal_cell_without_submission(shell: Any, run: Any) -> None:
    from eugo_jupyter.hpc import _submissions

    before = len(_submissions._by_ref)
    ran = run("%%distribute\nok = 1\nbad = (1,\n")
    assert isinstance(ran.result.error_before_exec, SyntaxError)
    assert "line 3" in ran.text and "SyntaxError" in ran.text
    assert "Traceback" not in ran.text
    assert len(_submissions._by_ref) == before


def test_flags_set_the_tasks_resources(run: Any, shell: Any) -> None:
    ran = run(
        "%%distribute --num-cpus 2 --memory 64MiB --name sized-cell\n"
        "import ray\nres = ray.get_runtime_context().get_assigned_resources()\n"
    )
    assert ran.result.success, ran.text
    assert shell.user_ns["res"]["CPU"] == 2
    assert shell.user_ns["res"]["memory"] == 64 * 2**20


def test_options_from_a_dict_and_from_a_widget(run: Any, shell: Any) -> None:
    run("opts = {'num_cpus': 2}\n")
    ran = run(
        "%%distribute --options opts\n"
        "import ray\nres = ray.get_runtime_context().get_assigned_resources()\n"
    )
    assert ran.result.success, ran.text
    assert shell.user_ns["res"]["CPU"] == 2
    run("w = eugo.widgets.ResourceOptions(num_cpus=0.5)\n")
    ran = run(
        "%%distribute --options w\n"
        "import ray\nres = ray.get_runtime_context().get_assigned_resources()\n"
    )
    assert ran.result.success, ran.text
    assert shell.user_ns["res"]["CPU"] == 0.5
    ran = run(
        "%%distribute --options w --num-cpus 1\n"
        "import ray\nres = ray.get_runtime_context().get_assigned_resources()\n"
    )
    assert shell.user_ns["res"]["CPU"] == 1  # a flag wins over the widget


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("--num-gpus 1.5", "num_gpus=1.5 is not allowed"),
        ("--num-cpus -1", "num_cpus=-1"),
        ("--memory lots", "memory='lots' is not allowed"),
        ("--num-gpu 1 --cpus 2", "did you mean --num-cpus"),
        ("--no-block", "--no-block needs --out VAR"),
        ("--out fut", "--out VAR goes with --no-block"),
        ("--options nowhere", "no variable 'nowhere'"),
        ("--options base", "must be a ResourceOptions widget"),
        ("--timeout 0", "positive, finite number of seconds"),
        ("--timeout -5", "positive, finite number of seconds"),
        ("--timeout nan", "--timeout nan: the timeout must be a positive, finite number"),
        ("--timeout inf", "--timeout inf: the timeout must be a positive, finite number"),
        ('--name "abc', "a quote was opened and not closed"),
        ("--name 'abc", "a quote was opened and not closed"),
    ],
)
def test_bad_flags_give_a_usage_error_with_the_fix(run: Any, line: str, says: str) -> None:
    from IPython.core.error import UsageError

    ran = run(f"%%distribute {line}\nx_bad = 1\n")
    assert isinstance(ran.result.error_in_exec, UsageError)
    assert says in ran.text
    assert "Traceback" not in ran.text


def test_infeasible_request_fails_at_once_with_the_diagnosis(run: Any) -> None:
    from eugo_jupyter.exceptions import InfeasibleRequestError

    ran = run("%%distribute --num-gpus 1\nnever = 1\n")
    assert isinstance(ran.result.error_in_exec, InfeasibleRequestError)
    assert "no node in this cluster has a GPU" in ran.text and "--no-block" in ran.text


def test_no_block_returns_a_future_and_binds_names_at_get(
    shell: Any, run: Any, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    shell.user_ns["gate_path"] = str(gate)
    ran = run(
        "%%distribute --no-block --out fut\nimport os, time\n"
        "while not os.path.exists(gate_path):\n    time.sleep(0.05)\nlate = 7\nlate * 6\n"
    )
    assert ran.result.success, ran.text
    assert "late" not in shell.user_ns  # returned before the cell finished
    gate.write_text("go")
    ran = run("value_of_fut = eugo.hpc.get(fut)\nlate_now = late\n")
    assert ran.result.success, ran.text
    assert shell.user_ns["value_of_fut"] == 42 and shell.user_ns["late_now"] == 7


def test_no_block_names_are_bound_before_the_next_cell(shell: Any, run: Any) -> None:
    run("%%distribute --no-block --out fut2\nnext_cell_value = 'ready'\n")
    from eugo_jupyter import hpc

    hpc.wait([shell.user_ns["fut2"]], timeout=60)
    ran = run("seen_next = next_cell_value\n")
    assert ran.result.success, ran.text
    assert shell.user_ns["seen_next"] == "ready"


def test_timeout_cancels_the_cell(run: Any, shell: Any) -> None:
    from eugo_jupyter.exceptions import GetTimeoutError

    ran = run("%%distribute --timeout 1\nimport time\ntime.sleep(60)\n")
    assert isinstance(ran.result.error_in_exec, GetTimeoutError)
    assert "cancelled" in ran.text


def test_interrupt_cancels_the_remote_task(shell: Any, monkeypatch: Any) -> None:
    import ray
    from ray.exceptions import TaskCancelledError

    from eugo_jupyter.magics import distribute

    magics = shell.magics_manager.registry["EugoMagics"]
    # The cell's streamed output, seen as the magic writes it. (Reading capsys from this other
    # thread raced with the write: a line written between its read and its reset was lost, and
    # the interrupt never came.)
    streamed: list[str] = []

    def emit(chunks: Any) -> None:
        streamed.extend(text for _stream, text in chunks)
        original_emit(chunks)

    original_emit = distribute._emit
    monkeypatch.setattr(distribute, "_emit", emit)

    def interrupt_once_running() -> None:
        until(lambda: "sleeping now" in "".join(streamed), "the cell to start", 60, 0.05)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_once_running, daemon=True).start()
    result = shell.run_cell(
        "%%distribute\nimport time\nprint('sleeping now', flush=True)\ntime.sleep(120)\n",
        store_history=True,
    )
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    with pytest.raises(TaskCancelledError):
        ray.get(magics.last_run.value_ref, timeout=60)


def test_loading_twice_is_harmless(shell: Any, run: Any) -> None:
    shell.run_line_magic("load_ext", "eugo_jupyter")
    import eugo_jupyter

    eugo_jupyter.load_ipython_extension(shell)
    assert shell.user_ns["eugo"] is eugo_jupyter
    ran = run("%%distribute\ntwice = 2\n")
    assert ran.result.success and shell.user_ns["twice"] == 2
    assert ran.out.count("Out[") == 0
