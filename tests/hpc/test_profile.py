"""eugo.hpc.profile on a real 2-CPU Ray: each pitfall's workload raises its finding, clean ones
none.

Workloads use sleeps with wide ratios (a straggler 15x its peers, blocking gets that wait for the
whole task) so that a busy shared machine does not change the verdicts.
"""

from __future__ import annotations

import sys

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter import _hooks
from eugo_jupyter.hpc._insights import analyze
from tests.hpc.conftest import kinds_of, nap, noop

pytestmark = pytest.mark.usefixtures("warm_ray")
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@eugo.hpc.distribute
def total(table, i: int) -> float:  # type: ignore[no-untyped-def]
    return float(table[i])


def test_blocking_on_each_future_in_a_submitting_loop_is_found() -> None:
    with eugo.hpc.profile() as run:
        results = [eugo.hpc.get(nap(0.2)) for _ in range(5)]
    assert results == [0.2] * 5
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "blocking_too_early"]
    assert finding["function"] == "nap"
    assert "one nap future at a time" in finding["message"]
    assert "eugo.hpc.get(futures)" in finding["fix"]


def test_submitting_first_then_getting_is_not_blocking_too_early() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.2) for _ in range(6)])
        futures = [nap(0.2) for _ in range(6)]
        one_by_one = [
            eugo.hpc.get(f) for f in futures
        ]  # one at a time, but nothing submitted after
    assert one_by_one == [0.2] * 6
    assert "blocking_too_early" not in kinds_of(run)


def test_tiny_tasks_are_found_and_map_is_suggested() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([noop(i) for i in range(200)])
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "tiny_tasks"]
    assert finding["function"] == "noop"
    assert "eugo.hpc.map(noop, items)" in finding["fix"]


def test_a_clean_fan_out_has_no_findings() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.1) for _ in range(16)])
    report = run.report()
    assert report.findings == []
    (row,) = report.functions
    assert row["tasks"] == 16 and row["finished"] == 16
    assert row["speedup"] > 1.0  # two workers overlapped: a ratio, not a clock bound
    assert row["workers"] == 2


def test_a_straggler_at_the_end_is_found() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.1) for _ in range(10)] + [nap(1.5)])
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "straggler"]
    assert finding["function"] == "nap"
    assert finding["message"].startswith("nap(1.5) took")
    assert "waited" in finding["message"]  # it held up the end of the run


def test_blocking_is_found_on_tasks_too_fast_to_measure() -> None:
    # Each get waits well under a millisecond on an idle machine: the structure (a get on the
    # call just submitted, then the next call) decides, not how long the get took.
    with eugo.hpc.profile() as run:
        results = [eugo.hpc.get(noop(i)) for i in range(10)]
    assert results == list(range(10))
    (finding,) = [f for f in run.report().findings if f["kind"] == "blocking_too_early"]
    assert finding["function"] == "noop"
    assert "9 times" in finding["message"]  # the tenth get had no call after it


def test_a_fan_out_ending_on_its_longest_calls_is_a_long_tail() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.15) for _ in range(6)] + [nap(0.45)])  # the long call runs alone
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "long_tail"]
    assert finding["function"] == "nap"
    assert "longest calls" in finding["message"] and "idle" in finding["message"]
    assert "longest calls first" in finding["fix"]
    assert "straggler" not in report.kinds()  # 3x its peers: uneven, not a straggler


def test_submitting_the_longest_call_first_has_no_long_tail() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.45)] + [nap(0.15) for _ in range(6)])
    assert "long_tail" not in kinds_of(run)


def test_equal_tasks_that_do_not_divide_among_workers_are_not_a_long_tail() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.8) for _ in range(3)])  # 2 CPUs: the third runs alone, unavoidably
    assert "long_tail" not in kinds_of(run)


def test_many_equal_tiny_tasks_are_not_a_long_tail() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([noop(i) for i in range(1000)])
    kinds = kinds_of(run)
    assert "tiny_tasks" in kinds and "long_tail" not in kinds


def test_the_same_large_argument_in_many_calls_is_found() -> None:
    np = pytest.importorskip("numpy")
    table = np.ones(1_000_000)  # 8 MB
    with eugo.hpc.profile() as run:
        eugo.hpc.get([total(table, i) for i in range(4)])
    report = run.report()
    (finding,) = [f for f in report.findings if f["kind"] == "large_argument"]
    assert finding["function"] == "total"
    assert "'table'" in finding["message"] and "4 calls" in finding["message"]
    assert "eugo.hpc.put(table)" in finding["fix"]


def test_a_put_large_argument_is_not_flagged() -> None:
    np = pytest.importorskip("numpy")
    table = eugo.hpc.put(np.ones(1_000_000))
    small = [np.ones(10) for _ in range(4)]
    with eugo.hpc.profile() as run:
        eugo.hpc.get([total(table, i) for i in range(4)] + [total(s, 0) for s in small])
    assert "large_argument" not in kinds_of(run)
    assert max(r["arg_bytes_max"] for r in run.report().functions) < 10_000


def test_report_renders_tables_and_a_timeline() -> None:
    pytest.importorskip("matplotlib")
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(0.1) for _ in range(4)] + [noop(i) for i in range(30)])
    report = run.report()
    page = report._repr_html_()
    assert "<table class='eugo-profile'>" in page
    assert "tiny_tasks" in page  # the findings table
    assert "data:image/png;base64," in page
    figure = report.timeline()
    (axes,) = figure.axes
    assert len(axes.get_yticklabels()) == 2  # one row per worker process
    assert {t["function"] for t in report.model["tasks"]} == {"nap", "noop"}
    assert all(t["worker"] and t["end"] >= t["start"] for t in report.model["tasks"])
    assert set(report.to_dict()) == {"summary", "functions", "findings", "optimizations", "resumed"}


def test_nothing_is_recorded_outside_the_block() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get(noop(1))
    assert _hooks.recorder is None
    eugo.hpc.get([noop(i) for i in range(5)])
    assert len(run.model()["tasks"]) == 1
    assert len(run.model()["gets"]) == 1


def test_profiles_do_not_nest() -> None:
    with eugo.hpc.profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with eugo.hpc.profile():
                pass


def test_failed_tasks_are_counted() -> None:
    @eugo.hpc.distribute
    def boom(x: int) -> int:
        raise ValueError(x)

    with eugo.hpc.profile() as run:
        futures = [boom(i) for i in range(3)]
        with pytest.raises(ValueError):  # Ray re-raises the task's own error type
            eugo.hpc.get(futures)
    (row,) = run.report().functions
    assert row["tasks"] == 3 and row["failed"] == 3


def test_analysis_of_an_empty_model() -> None:
    result = analyze({"duration": 0.0, "cluster": {"CPU": 2.0}, "tasks": [], "gets": []})
    assert result["findings"] == [] and result["functions"] == []
