"""Functions and actors through eugo.hpc on a real local Ray with 2 CPUs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import OptionsError, SerializationError


@eugo.hpc.distribute
def square(x: int) -> int:
    return x * x


@eugo.hpc.distribute(num_cpus=2)
def cpus_seen() -> float:
    return ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0)


@eugo.hpc.distribute
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.n = start

    def incr(self, k: int = 1) -> int:
        self.n += k
        return self.n


def test_a_call_returns_a_future_at_once(ray_local: Any) -> None:
    fut = square(7)
    assert isinstance(fut, ray.ObjectRef)
    assert eugo.hpc.get(fut) == 49
    assert ray.get(square(3)) == 9  # Ray's own get understands eugo futures


def test_fan_out_then_gather(ray_local: Any) -> None:
    futs = [square(i) for i in range(20)]
    assert eugo.hpc.get(futs) == [i * i for i in range(20)]
    assert eugo.hpc.get(tuple(futs[:2])) == [0, 1]


def test_futures_pass_into_other_calls(ray_local: Any) -> None:
    assert eugo.hpc.get(square(square(2))) == 16


def test_decorator_defaults_and_call_site_wins(ray_local: Any) -> None:
    assert eugo.hpc.get(cpus_seen()) == 2.0
    assert eugo.hpc.get(cpus_seen.options(num_cpus=1)()) == 1.0
    assert cpus_seen.options(num_gpus=0).options_dict == {"num_cpus": 2, "num_gpus": 0}


def test_default_allocation_is_one_cpu_no_gpu(ray_local: Any) -> None:
    @eugo.hpc.distribute
    def assigned() -> dict[str, float]:
        return ray.get_runtime_context().get_assigned_resources()

    assert eugo.hpc.get(assigned()) == {"CPU": 1.0}


def test_the_wrapper_keeps_the_functions_identity() -> None:
    assert square.__name__ == "square"
    assert square.local(5) == 25
    assert "distributed function" in repr(square)


def test_actor_keeps_state_across_calls(ray_local: Any) -> None:
    c = Counter.options(num_cpus=1)(10)
    first, second = c.incr(2), c.incr(3)
    assert isinstance(first, ray.ObjectRef)
    assert eugo.hpc.get([first, second]) == [12, 15]
    with pytest.raises(AttributeError, match="has no method 'decr'"):
        c.decr(1)


def test_actor_handle_travels_into_tasks(ray_local: Any) -> None:
    c = Counter()

    @eugo.hpc.distribute
    def bump(counter: Any) -> int:
        return eugo.hpc.get(counter.incr(5))

    assert eugo.hpc.get(bump(c)) == 5


def test_bad_options_raise_before_anything_is_submitted(ray_local: Any) -> None:
    with pytest.raises(OptionsError, match="num_gpus=1.5 is not allowed"):
        square.options(num_gpus=1.5)
    with pytest.raises(OptionsError, match="Did you mean num_cpus"):
        eugo.hpc.distribute(num_cpu=2)
    with pytest.raises(OptionsError, match="max_concurrency"):
        square.options(max_concurrency=2)


def test_unpicklable_argument_is_named_and_nothing_is_submitted(ray_local: Any) -> None:
    lock = threading.Lock()
    with pytest.raises(SerializationError) as caught:
        square(lock)
    message = str(caught.value)
    assert "Argument 'x' of square" in message
    assert "cannot pickle '_thread.lock'" in message
    assert "Nothing was submitted" in message


def test_unpicklable_captured_variable_is_named(ray_local: Any) -> None:
    connection = threading.Lock()

    @eugo.hpc.distribute
    def uses_a_lock(x: int) -> int:
        with connection:
            return x

    with pytest.raises(SerializationError, match="uses the variable 'connection'"):
        uses_a_lock(1)


def test_task_exception_reaches_the_caller_as_its_own_type(ray_local: Any) -> None:
    @eugo.hpc.distribute
    def boom() -> None:
        raise KeyError("missing column")

    with pytest.raises(KeyError, match="missing column"):
        eugo.hpc.get(boom())


@eugo.hpc.distribute(num_cpus=0)
class Latch:
    """Held closed by the test, so 'slow' means 'not finished until the test says so'."""

    def __init__(self) -> None:
        self.open = False
        self.waiting = 0  # calls that started and wait on this latch

    def begin(self) -> None:
        self.waiting += 1

    def begun(self) -> int:
        return self.waiting

    def release(self) -> None:
        self.open = True

    def is_open(self) -> bool:
        return self.open


@eugo.hpc.distribute
def after(latch: Any, value: float) -> float:
    eugo.hpc.get(latch.begin())
    while not eugo.hpc.get(latch.is_open()):
        time.sleep(0.05)
    return value


def test_wait_and_as_completed(ray_local: Any) -> None:
    latch = Latch()
    slow, fast = after(latch, 3.0), square(0)
    done, pending = eugo.hpc.wait([slow, fast], num_returns=1)
    assert done == [fast] and pending == [slow]

    second_latch = Latch()
    order = []
    for fut in eugo.hpc.as_completed([after(second_latch, 2.0), square(0)]):
        order.append(eugo.hpc.get(fut))
        eugo.hpc.get(second_latch.release())  # the held call may finish only after the first
    assert order == [0, 2.0]
    eugo.hpc.get(latch.release())
    assert eugo.hpc.get(slow) == 3.0
    assert eugo.hpc.wait([]) == ([], [])


def test_put_once_share_many(ray_local: Any) -> None:
    table = eugo.hpc.put(list(range(1000)))

    @eugo.hpc.distribute
    def total(values: list[int], k: int) -> int:
        return sum(values) * k

    assert eugo.hpc.get([total(table, k) for k in range(3)]) == [0, 499500, 999000]


@eugo.hpc.distribute
def hold(folder: str, value: float) -> float:
    """Hold this call's CPUs until the file ``release`` appears in ``folder``.

    It never calls into Ray while it holds them: a task blocked in ``get`` lends its CPUs back,
    and a queued call could run in that gap.
    """
    (Path(folder) / "begun").touch()
    while not (Path(folder) / "release").exists():
        time.sleep(0.05)
    return value


def test_cancel_a_queued_task(ray_local: Any, tmp_path: Path) -> None:
    blocker = hold.options(num_cpus=2)(str(tmp_path), 1.0)
    deadline = time.monotonic() + 120
    # Until the blocker runs, so holds both CPUs. (The cluster's free-CPU figure lags: right
    # after the previous test's tasks it can read 0 before the blocker started, and the
    # "queued" call then ran and finished before it was cancelled.)
    while not (tmp_path / "begun").exists():
        assert time.monotonic() < deadline, "the blocking task never started"
        time.sleep(0.05)
    queued = square(3)
    eugo.hpc.cancel(queued)
    with pytest.raises(ray.exceptions.TaskCancelledError):
        eugo.hpc.get(queued, timeout=60)
    (tmp_path / "release").touch()
    assert eugo.hpc.get(blocker) == 1.0


def test_progress_bar_in_a_script_only_when_asked(
    ray_local: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    @eugo.hpc.distribute
    def nap(seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    assert eugo.hpc.get([nap(3), nap(3)]) == [3, 3]
    assert "eugo.hpc.get" not in capfd.readouterr().err
    assert eugo.hpc.get([nap(3), nap(3)], progress=True) == [3, 3]
    assert "eugo.hpc.get" in capfd.readouterr().err


def test_cluster_describes_nodes_in_text_and_html(ray_local: Any) -> None:
    info = eugo.hpc.cluster()
    assert info.embedded and info.total("CPU") == 2
    assert "embedded local Ray: 1 node" in str(info)
    bundle = info._repr_mimebundle_()
    assert "<table>" in bundle["text/html"] and bundle["text/plain"] == str(info)
    assert info.dashboard_url and info.dashboard_url.startswith("http://127.0.0.1:")


def test_the_embedded_dashboard_waits_for_its_modules_as_long_as_a_busy_machine_needs(
    ray_local: Any,
) -> None:
    # Ray's dashboard exits when its module processes are not up within 30 s (seen in CI: an
    # embedded Ray without a dashboard); the embedded Ray's dashboard starts with 180 s.
    import os

    from eugo_jupyter import _processes as processes

    mine = processes.descendants({os.getpid()})
    dashboards = [pid for pid in mine if "dashboard/dashboard.py" in processes.cmdline(pid)]
    assert len(dashboards) == 1, [processes.cmdline(pid) for pid in mine]
    environment = processes.environment(dashboards[0]) or {}
    assert environment.get("RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT") == "180"


def test_cluster_reads_the_nodes_even_after_a_call_check_could_not(
    ray_local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's check that could not read the cluster (a timeout on a busy machine, injected
    here) makes the checks wait 30 s; asking for the cluster still shows its node."""
    from eugo_jupyter.hpc import _checks

    def timed_out(address: str) -> Any:
        raise TimeoutError("the GCS did not answer in time")

    with monkeypatch.context() as patched:
        patched.setattr(_checks, "snapshot", timed_out)
        assert _checks.current_snapshot(max_age=0) is None
    info = eugo.hpc.cluster()
    assert info.total("CPU") == 2 and "embedded local Ray: 1 node" in str(info)
