"""The pitfalls of Ray's "patterns and anti-patterns" pages, written as a new user of eugo.hpc
would: each workload raises its finding, and the recommended version of it stays silent.

Real 2-CPU Ray. Sleeps with wide ratios make the timing-based verdicts safe on a busy machine.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import warnings

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import GlobalStateWarning
from tests.hpc.conftest import kinds_of, nap, noop

pytestmark = pytest.mark.usefixtures("warm_ray")
np = pytest.importorskip("numpy")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

COUNTER = 0
_cache = None


@eugo.hpc.distribute
def make_block(n: int):  # type: ignore[no-untyped-def]
    return np.ones(n)


@eugo.hpc.distribute
def checksum(block) -> float:  # type: ignore[no-untyped-def]
    return float(block.sum())


@eugo.hpc.distribute
def add_all(*values: int) -> int:
    return sum(values)


@eugo.hpc.distribute
def add_listed(futures: list) -> int:  # type: ignore[type-arg]
    return sum(eugo.hpc.get(futures))


@eugo.hpc.distribute
def fan_out(n: int) -> int:  # nested parallelism: gets the futures it made itself
    return sum(eugo.hpc.get([noop(i) for i in range(n)]))


@eugo.hpc.distribute
def doubled_put(x: int):  # type: ignore[no-untyped-def]
    return eugo.hpc.put(2 * x)


@eugo.hpc.distribute
def doubled(x: int) -> int:
    return 2 * x


@eugo.hpc.distribute
def delegate(x: int):  # type: ignore[no-untyped-def]
    return noop(x)  # a child task's future: not a put


@eugo.hpc.distribute
def lookup(table, i: int) -> float:  # type: ignore[no-untyped-def]
    return float(table[i])


@eugo.hpc.distribute
class Tally:
    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        time.sleep(0.05)
        self.n += k
        return self.n

    def add_listed(self, futures: list) -> int:  # type: ignore[type-arg]
        self.n += sum(eugo.hpc.get(futures))
        return self.n


def only(run, kind: str):  # type: ignore[no-untyped-def]
    (finding,) = [f for f in run.report().findings if f["kind"] == kind]
    return finding


# -- actors are recorded like tasks -------------------------------------------------------------
def test_actor_method_calls_are_recorded_with_timings_and_worker() -> None:
    tally = Tally()
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get([tally.add(1) for _ in range(4)]) == [1, 2, 3, 4]
    report = run.report()
    (row,) = report.functions
    assert row["function"] == "Tally.add" and row["finished"] == 4
    calls = report.model["tasks"]
    assert {t["kind"] for t in calls} == {"actor method"}
    assert len({t["worker"] for t in calls}) == 1  # one actor, one process
    assert all(t["end"] - t["start"] >= 0.05 for t in calls)  # measured inside the actor
    assert report.findings == []


def test_getting_one_actor_call_at_a_time_is_not_blocking_too_early() -> None:
    tally = Tally()  # one actor runs its calls one at a time anyway: nothing is lost
    with eugo.hpc.profile() as run:
        for _ in range(4):
            eugo.hpc.get(tally.add(1))
    assert "blocking_too_early" not in kinds_of(run)


def test_blocking_on_each_call_across_actors_is_found() -> None:
    tallies = [Tally(), Tally()]
    with eugo.hpc.profile() as run:
        for i in range(6):
            eugo.hpc.get(tallies[i % 2].add(1))
    assert only(run, "blocking_too_early")["function"] == "Tally.add"


def test_an_actor_redefined_in_a_loop_is_found() -> None:
    with eugo.hpc.profile() as run:
        for _ in range(3):

            @eugo.hpc.distribute
            class Box:
                def put_in(self, x: int) -> int:
                    return x

            eugo.hpc.get(Box().put_in(1))
    assert "defined 3 times" in only(run, "redefined_in_loop")["message"]


# -- module globals -----------------------------------------------------------------------------
def test_a_task_assigning_a_module_global_is_said_at_the_decorator_and_in_the_report() -> None:
    with pytest.warns(GlobalStateWarning, match="module global `COUNTER`"):

        @eugo.hpc.distribute
        def bump(x: int) -> int:
            global COUNTER
            COUNTER += x
            return COUNTER

    with eugo.hpc.profile() as run:
        eugo.hpc.get([bump(1) for _ in range(4)])
    assert COUNTER == 0  # what the finding warns about: the notebook's copy never changed
    finding = only(run, "global_state")
    assert finding["function"].endswith("bump") and "silently wrong" in finding["message"]
    assert "actor" in finding["fix"]


def test_state_in_an_actor_and_a_per_worker_cache_raise_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", GlobalStateWarning)

        @eugo.hpc.distribute
        def cached(x: int) -> int:
            global _cache
            if _cache is None:  # a per-worker cache is a fine use of a global
                _cache = {}
            return x

        counter = eugo.hpc.distribute(Tally)()
    with eugo.hpc.profile() as run:
        eugo.hpc.get([counter.add(1) for _ in range(3)] + [cached(1)])
    assert "global_state" not in kinds_of(run)


# -- what travels with calls and gets -----------------------------------------------------------
def test_a_large_closure_is_found_and_ray_names_the_users_function(capfd) -> None:  # type: ignore[no-untyped-def]
    table = np.ones(2_000_000)  # 16 MB captured by the function below

    @eugo.hpc.distribute
    def cell_lookup(i: int) -> float:
        return float(table[i])

    with eugo.hpc.profile() as run:
        eugo.hpc.get([cell_lookup(i) for i in range(3)])
    finding = only(run, "large_closure")
    assert finding["function"].endswith("cell_lookup")
    assert "'table' (15.3 MiB)" in finding["message"] and "eugo.hpc.put(table)" in finding["fix"]
    # Ray's own warning arrives from its log thread: wait for it (bounded), then read it.
    seen = ""
    for _ in range(100):
        captured = capfd.readouterr()
        seen += captured.out + captured.err
        if "is very large" in seen:
            break
        time.sleep(0.1)
    assert re.search(r"remote function \S*cell_lookup is very large", seen), seen[-2000:]
    assert "eugo_jupyter" not in seen  # not our wrapper's name


def test_an_object_passed_through_put_is_not_a_large_closure() -> None:
    table = eugo.hpc.put(np.ones(2_000_000))
    with eugo.hpc.profile() as run:
        eugo.hpc.get([lookup(table, i) for i in range(3)])
    assert "large_closure" not in kinds_of(run)


def test_a_large_result_fetched_only_to_be_passed_on_is_an_unnecessary_get() -> None:
    with eugo.hpc.profile() as run:
        block = eugo.hpc.get(make_block(1_000_000))  # 8 MB into the notebook...
        assert eugo.hpc.get(checksum(block)) == 1_000_000.0  # ...and straight back out
    finding = only(run, "unnecessary_get")
    assert finding["function"] == "checksum"
    assert "make_block" in finding["message"] and "'block'" in finding["message"]
    assert "checksum(make_block(...))" in finding["fix"]


def test_passing_the_future_on_is_not_an_unnecessary_get() -> None:
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get(checksum(make_block(1_000_000))) == 1_000_000.0
        small = eugo.hpc.get(noop(3))
        assert eugo.hpc.get(noop(small)) == 3  # small results are fine to pass by value
    assert "unnecessary_get" not in kinds_of(run)


def test_a_task_returning_put_of_its_result_is_found() -> None:
    with eugo.hpc.profile() as run:
        inner = eugo.hpc.get(doubled_put(21))
        assert eugo.hpc.get(inner) == 42
    finding = only(run, "returned_put")
    assert finding["function"] == "doubled_put" and "Return the value" in finding["fix"]


def test_returning_the_value_or_a_child_tasks_future_is_not_returned_put() -> None:
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get(doubled(21)) == 42
        assert eugo.hpc.get(eugo.hpc.get(delegate(5))) == 5
    assert "returned_put" not in kinds_of(run)


def test_a_get_inside_a_task_on_futures_passed_in_a_list_is_a_nested_get() -> None:
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get(add_listed([noop(i) for i in range(4)])) == 6
    finding = only(run, "nested_get")
    assert finding["function"] == "add_listed" and "add_listed(*futures)" in finding["fix"]


def test_nested_get_in_an_actor_method_is_found() -> None:
    tally = Tally()
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get(tally.add_listed([noop(i) for i in range(3)])) == 3
    assert only(run, "nested_get")["function"] == "Tally.add_listed"


def test_futures_as_arguments_and_nested_parallelism_are_not_nested_gets() -> None:
    with eugo.hpc.profile() as run:
        assert eugo.hpc.get(add_all(*[noop(i) for i in range(4)])) == 6
        assert eugo.hpc.get(fan_out(4)) == 6  # gets the futures it made itself
    assert "nested_get" not in kinds_of(run)


# -- waiting in the wrong place -----------------------------------------------------------------
def test_processing_results_in_submission_order_is_found() -> None:
    durations = [0.8, 0.1, 0.1, 0.1, 0.8, 0.1, 0.1, 0.1]
    with eugo.hpc.profile() as run:
        futures = [nap(d) for d in durations]
        results = [eugo.hpc.get(f) for f in futures]
    assert results == durations
    finding = only(run, "in_order_processing")
    assert finding["function"] == "nap" and "as_completed" in finding["fix"]
    assert "blocking_too_early" not in kinds_of(run)  # everything was submitted first


def test_processing_results_as_they_complete_is_silent() -> None:
    durations = [0.8, 0.1, 0.1, 0.1, 0.8, 0.1, 0.1, 0.1]
    with eugo.hpc.profile() as run:
        futures = [nap(d) for d in durations]
        results = [eugo.hpc.get(f) for f in eugo.hpc.as_completed(futures)]
    assert sorted(results) == sorted(durations)
    assert "in_order_processing" not in kinds_of(run)


def test_a_blocking_get_inside_async_code_is_found() -> None:
    async def main() -> float:
        return eugo.hpc.get(nap(0.1))

    with eugo.hpc.profile() as run:
        assert asyncio.run(main()) == 0.1
    finding = only(run, "get_in_async")
    assert finding["function"] == "nap" and "await fut" in finding["fix"]


def test_awaiting_the_future_in_async_code_is_silent() -> None:
    async def main() -> float:
        return await nap(0.1)

    with eugo.hpc.profile() as run:
        assert asyncio.run(main()) == 0.1
        assert eugo.hpc.get(nap(0.1)) == 0.1  # a get outside async code
    assert "get_in_async" not in kinds_of(run)


def test_a_task_redefined_in_a_loop_is_found() -> None:
    with eugo.hpc.profile() as run:
        for i in range(4):

            @eugo.hpc.distribute
            def step(x: int) -> int:
                return x + 1

            eugo.hpc.get(step(i))
    finding = only(run, "redefined_in_loop")
    assert finding["function"].endswith("step") and "defined 4 times" in finding["message"]


def test_a_task_defined_once_and_called_in_a_loop_is_silent() -> None:
    @eugo.hpc.distribute
    def step(x: int) -> int:
        return x + 1

    with eugo.hpc.profile() as run:
        eugo.hpc.get([step(i) for i in range(4)])
        eugo.hpc.get(step.options(num_cpus=1)(0))  # options do not redefine it
    assert "redefined_in_loop" not in kinds_of(run)
