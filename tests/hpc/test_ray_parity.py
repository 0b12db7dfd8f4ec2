"""Ray's own documentation examples, run twice on one real Ray: with ``@ray.remote`` and
``.remote(...)``, then with ``@eugo.hpc.distribute`` and a call. Each program's result, the
lines it printed and the type of what it raised must be the same.

A program takes an :class:`Api`: ``api.remote`` is the decorator, ``api.call(target, ...)``
submits (``target.remote(...)`` under Ray, ``target(...)`` under eugo), and ``api.get``,
``api.wait``, ``api.kill``, ``api.get_actor`` are each side's own functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import tempfile
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.exceptions import (
    ActorDiedError,
    GetTimeoutError,
    RayActorError,
    RayTaskError,
    TaskCancelledError,
    WorkerCrashedError,
)
from ray.util import ActorPool
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import GetTimeoutError as EugoGetTimeoutError
from eugo_jupyter.exceptions import InfeasibleRequestWarning, OptionsError, SerializationError
from tests.fixtures.programs import Program
from tests.fixtures.waiting import until


@dataclass(frozen=True)
class Api:
    name: str
    remote: Callable[..., Any]
    get: Callable[..., Any]
    wait: Callable[..., Any]
    kill: Callable[..., Any]
    get_actor: Callable[..., Any]
    cancel: Callable[..., Any]

    def call(self, target: Any, *args: Any, **kwargs: Any) -> Any:
        if self.name == "ray":
            return target.remote(*args, **kwargs)
        return target(*args, **kwargs)


RAY = Api("ray", ray.remote, ray.get, ray.wait, ray.kill, ray.get_actor, ray.cancel)
EUGO = Api(
    "eugo",
    eugo.hpc.distribute,
    eugo.hpc.get,
    eugo.hpc.wait,
    lambda actor, **kw: eugo.hpc.kill(actor, **kw),
    lambda name, **kw: eugo.hpc.get_actor(name, **kw),
    eugo.hpc.cancel,
)


@dataclass
class Outcome:
    value: Any = None
    printed: list[str] = field(default_factory=list)
    error: BaseException | None = None


class _ProgramOutput(io.StringIO):
    """What the program itself prints (its thread's lines; Ray's log thread forwards workers'
    and raylet lines to the same stdout, at moments of its own, and those are left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def write(self, text: str) -> int:
        return super().write(text) if threading.get_ident() == self.thread else len(text)


def _run(program: Callable[[Api], Any], api: Api) -> Outcome:
    out = _ProgramOutput()
    outcome = Outcome()
    try:
        with contextlib.redirect_stdout(out):
            outcome.value = program(api)
    except Exception as exc:  # noqa: BLE001 - what each side raised is what is compared
        outcome.error = exc
    outcome.printed = out.getvalue().splitlines()
    return outcome


def _kinds(exc: BaseException) -> set[str]:
    """What an ``except`` clause can catch it as: every class in its type's MRO, by name."""
    return {f"{k.__module__}.{k.__qualname__}" for k in type(exc).__mro__} - {"builtins.object"}


def same(program: Callable[[Api], Any]) -> Outcome:
    """Run ``program`` under Ray, then under eugo; the two must agree. Returns eugo's."""
    under_ray, under_eugo = _run(program, RAY), _run(program, EUGO)
    if under_ray.error is None:
        assert under_eugo.error is None, f"only eugo raised: {under_eugo.error!r}"
    else:
        assert under_eugo.error is not None, f"only Ray raised: {under_ray.error!r}"
        # eugo may add a class (its own tree) and a sentence, never take one of Ray's away.
        missing = {k for k in _kinds(under_ray.error) if "(" not in k} - _kinds(under_eugo.error)
        assert not missing, (under_ray.error, under_eugo.error)
        assert type(under_ray.error).__name__ == type(under_eugo.error).__name__ or (
            isinstance(under_eugo.error, type(under_ray.error))
        )
    assert under_eugo.value == under_ray.value
    assert under_eugo.printed == under_ray.printed
    return under_eugo


@pytest.fixture(scope="module")
def parity_ray() -> Iterator[object]:
    """One embedded Ray for the module, with a custom resource for the resource examples."""
    eugo.hpc.shutdown()
    connection = eugo.hpc.init(num_cpus=3, resources={"disk": 2})
    yield connection
    eugo.hpc.shutdown()


pytestmark = pytest.mark.usefixtures("parity_ray")


# -- tasks ---------------------------------------------------------------------------------


def test_futures_pass_into_tasks_and_nested_ones_stay_futures() -> None:
    def program(api: Api) -> Any:
        @api.remote
        def add(a: int, b: int) -> int:
            return a + b

        @api.remote
        def total(refs: list[Any]) -> tuple[bool, int]:
            # Ray resolves top-level futures only; those in a list arrive as futures.
            return all(isinstance(r, ray.ObjectRef) for r in refs), sum(ray.get(refs))

        one = api.call(add, 1, 2)
        two = api.call(add, one, 10)  # a future as an argument: its value arrives
        print(api.get(two))
        return api.get(api.call(total, [one, two])), api.get([one, two])

    assert same(program).value == ((True, 16), [3, 13])


def test_multiple_returns() -> None:
    def program(api: Api) -> Any:
        @api.remote(num_returns=2)
        def pair() -> tuple[int, int]:
            return 1, 2

        @api.remote
        def three() -> tuple[int, int, int]:
            return 1, 2, 3

        a, b = api.call(pair)
        refs = api.call(three.options(num_returns=3))
        return api.get([a, b]), api.get(refs), len(refs)

    assert same(program).value == ([1, 2], [1, 2, 3], 3)


def test_dynamic_returns_report_their_blocks() -> None:
    def program(api: Api) -> Any:
        @api.remote(num_returns="dynamic")
        def split(n: int) -> Iterator[list[int]]:
            for i in range(n):
                yield [i] * (i + 1)

        ref = api.call(split, 3)
        blocks = api.get(ref)  # a DynamicObjectRefGenerator: one future per block
        print(type(blocks).__name__)
        return [api.get(block) for block in blocks]

    outcome = same(program)
    assert outcome.value == [[0], [1, 1], [2, 2, 2]]
    assert outcome.printed == ["DynamicObjectRefGenerator"]


def test_streaming_generators_from_tasks() -> None:
    def program(api: Api) -> Any:
        @api.remote
        def count(n: int) -> Iterator[int]:
            for i in range(n):
                yield i * 10

        @api.remote(num_returns="streaming")
        def letters() -> Iterator[str]:
            yield "a"
            yield "b"

        for ref in api.call(count, 3):
            print(api.get(ref))
        gen = api.call(letters)
        return type(gen).__name__, [api.get(ref) for ref in gen]

    outcome = same(program)
    assert outcome.value == ("ObjectRefGenerator", ["a", "b"])
    assert outcome.printed == ["0", "10", "20"]


def test_streaming_generator_failure_raises_at_the_item() -> None:
    def program(api: Api) -> Any:
        @api.remote
        def two_then_fail() -> Iterator[int]:
            yield 1
            yield 2
            raise ValueError("third block unreadable")

        seen = []
        for ref in api.call(two_then_fail):
            seen.append(api.get(ref))
            print(seen[-1])
        return seen

    outcome = same(program)
    assert isinstance(outcome.error, ValueError) and isinstance(outcome.error, RayTaskError)
    assert outcome.printed == ["1", "2"]


def test_task_retries_with_retry_exceptions(tmp_path: Path) -> None:
    def program(api: Api) -> Any:
        marks = tmp_path / api.name
        marks.mkdir()

        @api.remote(max_retries=2, retry_exceptions=[ConnectionError])
        def flaky(folder: str) -> int:
            tries = len(os.listdir(folder))
            Path(folder, str(tries)).touch()
            if tries < 2:
                raise ConnectionError(f"attempt {tries} lost its connection")
            return tries

        @api.remote(max_retries=3, retry_exceptions=[ConnectionError])
        def wrong(x: int) -> int:
            raise KeyError(x)  # not in retry_exceptions: fails at once

        print(api.get(api.call(flaky, str(marks))))
        return api.get(api.call(wrong, 7))

    outcome = same(program)
    assert outcome.printed == ["2"]
    assert isinstance(outcome.error, KeyError) and isinstance(outcome.error, RayTaskError)
    assert isinstance(outcome.error.cause, KeyError)


class ParityError(Exception):
    """A user's own exception with its own constructor."""

    def __init__(self, code: int) -> None:
        super().__init__(f"code {code}")
        self.code = code


def test_the_users_exception_is_catchable_as_its_type_and_as_ray_task_error() -> None:
    def program(api: Api) -> Any:
        @api.remote
        def fail(code: int) -> None:
            raise ParityError(code)

        try:
            api.get(api.call(fail, 3))
        except ParityError as exc:
            print("caught", type(exc).__name__, exc.code, type(exc.cause).__name__)
        try:
            api.get(api.call(fail, 4))
        except RayTaskError as exc:
            print("caught as RayTaskError", exc.cause.code)
        return api.get(api.call(fail, 5))

    outcome = same(program)
    assert outcome.printed == [
        "caught RayTaskError(ParityError) 3 ParityError",
        "caught as RayTaskError 4",
    ]
    assert isinstance(outcome.error, ParityError) and outcome.error.code == 5


def test_get_timeout_error_is_rays_own(tmp_path: Path) -> None:
    def program(api: Api) -> Any:
        @api.remote
        def wait_for(path: str) -> str:
            while not Path(path).exists():
                time.sleep(0.05)
            return "released"

        release = tmp_path / f"release-{api.name}"
        ref = api.call(wait_for, str(release))
        try:
            api.get(ref, timeout=0.2)
        except GetTimeoutError:
            print("timed out")
        release.touch()
        print(api.get(ref))
        return api.get(api.call(wait_for, str(tmp_path / "never")), timeout=0.2)

    try:
        outcome = same(program)
    finally:
        (tmp_path / "never").touch()  # the last waits of both runs end
    assert outcome.printed == ["timed out", "released"]
    assert isinstance(outcome.error, GetTimeoutError) and isinstance(outcome.error, TimeoutError)
    assert isinstance(outcome.error, EugoGetTimeoutError)
    assert "not ready after 0.2 s" in str(outcome.error)  # eugo's diagnosis comes with it


def test_worker_crashed_error() -> None:
    def program(api: Api) -> Any:
        @api.remote(max_retries=0)
        def crash() -> None:
            os._exit(1)

        return api.get(api.call(crash))

    assert isinstance(same(program).error, WorkerCrashedError)


def test_cancelling_a_task(tmp_path: Path) -> None:
    def program(api: Api) -> Any:
        @api.remote
        def spin(path: str) -> str:
            Path(path).touch()
            while True:
                time.sleep(0.05)

        begun = tmp_path / f"begun-{api.name}"
        ref = api.call(spin, str(begun))
        deadline = time.monotonic() + 120
        while not begun.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        api.cancel(ref)
        try:
            api.get(ref, timeout=60)
        except TaskCancelledError:
            print("cancelled")
        return begun.exists()

    outcome = same(program)
    assert outcome.value is True and outcome.printed == ["cancelled"]


def test_cancelling_a_streaming_generator() -> None:
    def program(api: Api) -> Any:
        @api.remote
        def slowly() -> Iterator[int]:
            for i in range(600):
                time.sleep(0.1)
                yield i

        gen = api.call(slowly)
        print(api.get(next(gen)))
        api.cancel(gen)  # Ray's cancel, and eugo's, take the generator itself
        try:
            for ref in gen:
                api.get(ref)
        except TaskCancelledError:
            print("cancelled")
        return None

    assert same(program).printed == ["0", "cancelled"]


def test_custom_resources_and_scheduling_strategies() -> None:
    def program(api: Api) -> Any:
        @api.remote(resources={"disk": 1})
        def held() -> dict[str, float]:
            return ray.get_runtime_context().get_assigned_resources()

        @api.remote
        def node() -> str:
            return ray.get_runtime_context().get_node_id()

        here = ray.get_runtime_context().get_node_id()
        pinned = node.options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False))
        spread = node.options(scheduling_strategy="SPREAD")
        return (
            api.get(api.call(held)),
            api.get(api.call(pinned)) == here,
            api.get(api.call(spread)) == here,
        )

    assert same(program).value == ({"CPU": 1.0, "disk": 1.0}, True, True)


def test_placement_groups() -> None:
    def program(api: Api) -> Any:
        pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK")
        ray.get(pg.ready(), timeout=120)

        @api.remote
        def group() -> Any:
            current = ray.util.get_current_placement_group()
            return current.id.hex() if current else None

        @api.remote(num_cpus=1)
        class InGroup:
            def group(self) -> Any:
                return ray.util.get_current_placement_group().id.hex()

        strategy = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=1)
        in_task = api.get(api.call(group.options(scheduling_strategy=strategy)))
        actor = api.call(InGroup.options(scheduling_strategy=strategy))
        in_actor = api.get(api.call(actor.group))
        api.kill(actor)
        remove_placement_group(pg)
        return in_task == pg.id.hex(), in_actor == pg.id.hex()

    assert same(program).value == (True, True)


# -- actors --------------------------------------------------------------------------------


class CounterClass:
    def __init__(self, start: int = 0) -> None:
        self.n = start

    def incr(self, k: int = 1) -> int:
        self.n += k
        return self.n

    def double(self, x: int) -> int:
        return 2 * x

    def pair(self) -> tuple[int, int]:
        return self.n, -self.n


def test_actor_options_on_the_decorator_are_an_actors() -> None:
    def program(api: Api) -> Any:
        Counter = api.remote(max_restarts=4, max_task_retries=-1, max_concurrency=2)(CounterClass)
        Named = api.remote(namespace="parity", lifetime="detached", name=f"deco-{api.name}")(
            CounterClass
        )
        c, n = api.call(Counter, 5), api.call(Named)
        first = api.get(api.call(c.incr))
        again = api.get(api.call(api.get_actor(f"deco-{api.name}", namespace="parity").incr, 2))
        api.kill(n)
        return first, again

    assert same(program).value == (6, 2)


def test_task_options_on_an_actor_are_refused_as_ray_refuses_them() -> None:
    def program(api: Api) -> Any:
        return api.remote(num_returns=2)(CounterClass)

    outcome = same(program)
    assert isinstance(outcome.error, ValueError)
    if isinstance(outcome.error, OptionsError):
        assert "num_returns= is not an option for an actor" in str(outcome.error)


def test_actor_method_options_multiple_returns() -> None:
    def program(api: Api) -> Any:
        Counter = api.remote(CounterClass)
        c = api.call(Counter, 3)
        a, b = api.call(c.pair.options(num_returns=2))
        return api.get([a, b])

    assert same(program).value == [3, -3]


def test_named_detached_actors_with_get_if_exists() -> None:
    def program(api: Api) -> Any:
        Counter = api.remote(CounterClass)
        name = f"shared-{api.name}"
        opts = {"name": name, "namespace": "parity", "get_if_exists": True}
        first = api.call(Counter.options(lifetime="detached", **opts), 10)
        second = api.call(Counter.options(**opts), 100)  # the same actor: its 100 is ignored
        api.get(api.call(first.incr))
        print(api.get(api.call(second.incr)))
        found = api.get_actor(name, namespace="parity")
        print(api.get(api.call(found.incr)))
        api.kill(found)
        try:
            api.get_actor(name, namespace="parity")
        except ValueError as exc:
            print(type(exc).__name__)
        return None

    assert same(program).printed == ["12", "13", "ValueError"]


def test_async_actor_with_max_concurrency() -> None:
    def program(api: Api) -> Any:
        @api.remote(max_concurrency=2)
        class Rendezvous:
            def __init__(self) -> None:
                self.met = asyncio.Event()

            async def wait(self) -> str:
                await asyncio.wait_for(self.met.wait(), timeout=60)
                return "met"

            async def arrive(self) -> str:
                self.met.set()
                return "arrived"

            async def ticks(self, n: int) -> Any:
                for i in range(n):
                    yield i

        r = api.call(Rendezvous)
        waiting = api.call(r.wait)  # holds one of the two slots until arrive runs
        print(api.get(api.call(r.arrive)))
        print(api.get(waiting))
        return [api.get(ref) for ref in api.call(r.ticks, 3)]

    outcome = same(program)
    assert outcome.printed == ["arrived", "met"] and outcome.value == [0, 1, 2]


def test_threaded_actor_with_max_concurrency_and_a_streaming_method() -> None:
    def program(api: Api) -> Any:
        @api.remote(max_concurrency=2, max_restarts=1)
        class Rendezvous:
            def __init__(self) -> None:
                self.met = threading.Event()

            def wait(self) -> bool:
                return self.met.wait(timeout=60)

            def arrive(self) -> str:
                self.met.set()
                return "arrived"

            def ticks(self, n: int) -> Iterator[int]:
                # Not "yield from range(n)": Ray's streaming generator sends into what it
                # delegates to, and a range iterator has no send() (so under both).
                for i in range(n):  # noqa: UP028
                    yield i

        r = api.call(Rendezvous)
        waiting = api.call(r.wait)
        print(api.get(api.call(r.arrive)))
        print(api.get(waiting))
        gen = api.call(r.ticks.options(num_returns="streaming"), 2)
        return type(gen).__name__, [api.get(ref) for ref in gen]

    outcome = same(program)
    assert outcome.printed == ["arrived", "True"]
    assert outcome.value == ("ObjectRefGenerator", [0, 1])


def test_actor_restarts_and_task_retries(tmp_path: Path) -> None:
    def program(api: Api) -> Any:
        @api.remote(max_restarts=1, max_task_retries=1)
        class Fragile:
            def pid(self) -> int:
                return os.getpid()

            def exit_once(self, path: str) -> str:
                if not Path(path).exists():
                    Path(path).touch()
                    os._exit(1)
                return "survived"

            def exit(self) -> None:
                os._exit(1)

        f = api.call(Fragile)
        before = api.get(api.call(f.pid))
        print(api.get(api.call(f.exit_once, str(tmp_path / api.name))))  # retried once
        restarted = api.get(api.call(f.pid)) != before
        return restarted, api.get(api.call(f.exit))  # no restart left

    outcome = same(program)
    assert isinstance(outcome.error, ActorDiedError) and isinstance(outcome.error, RayActorError)
    assert outcome.printed == ["survived"]


def test_actor_pool() -> None:
    def program(api: Api) -> Any:
        Counter = api.remote(CounterClass)
        pool = ActorPool([api.call(Counter), api.call(Counter)])
        doubled = list(pool.map(lambda a, v: api.call(a.double, v), range(4)))
        pool.submit(lambda a, v: api.call(a.double, v), 10)
        return doubled, pool.get_next()

    assert same(program).value == ([0, 2, 4, 6], 20)


# -- the porting path and each side's objects in the other's functions --------------------


def test_ray_style_code_runs_with_only_its_decorator_changed() -> None:
    def program(api: Api) -> Any:
        remote = api.remote

        @remote
        def square(x: int) -> int:
            return x * x

        @remote(num_returns=2)
        def pair() -> tuple[int, int]:
            return 1, 2

        Counter = remote(CounterClass)
        c = Counter.remote(1)
        d = Counter.options(num_cpus=0).remote(5)
        a, b = pair.remote()
        refs = [square.remote(i) for i in range(3)] + [square.options(num_cpus=1).remote(4)]
        refs += [c.incr.remote(2), d.incr.remote(), a, b]
        refs += c.pair.options(num_returns=2).remote()
        print(ray.get(refs))
        return ray.get(square.options(num_cpus=1).remote(3))

    outcome = same(program)
    assert outcome.printed == ["[0, 1, 4, 16, 3, 6, 1, 2, 3, -3]"] and outcome.value == 9


def test_eugo_objects_in_rays_functions_and_rays_in_eugos(tmp_path: Path) -> None:
    @eugo.hpc.distribute
    def square(x: int) -> int:
        return x * x

    Counter = eugo.hpc.distribute(CounterClass)
    RayCounter = ray.remote(CounterClass)

    futs = [square(i) for i in range(3)]
    done, _ = ray.wait(futs, num_returns=3, timeout=120)
    assert len(done) == 3 and ray.get(futs) == [0, 1, 4]

    eugo_actor, ray_actor = Counter(), RayCounter.remote()
    assert ray.get(eugo_actor.incr(2)) == 2
    assert eugo.hpc.get(ray_actor.incr.remote(3)) == 3
    done, _ = eugo.hpc.wait([ray_actor.incr.remote()], num_returns=1, timeout=120)
    assert eugo.hpc.get(done) == [4]

    @ray.remote
    def through_ray(counter: Any) -> int:
        return ray.get(counter.incr.remote(10))

    @eugo.hpc.distribute
    def through_eugo(counter: Any) -> int:
        return eugo.hpc.get(counter.incr.remote(100))  # a Ray handle, used as in Ray

    assert ray.get(through_ray.remote(eugo_actor)) == 12  # an eugo actor in a Ray task
    assert eugo.hpc.get(through_eugo(ray_actor)) == 104  # a Ray actor in an eugo task

    ray.kill(eugo_actor)  # Ray's kill takes eugo's actor, eugo's takes Ray's
    eugo.hpc.kill(ray_actor)

    def refused(call: Callable[[], Any]) -> bool:
        try:
            eugo.hpc.get(call(), timeout=120)
        except RayActorError:
            return True
        return False  # ray.kill is asynchronous: a call sent at once may still be served

    until(lambda: refused(eugo_actor.incr), "eugo's actor, killed by ray.kill, to refuse calls")
    until(lambda: refused(ray_actor.incr.remote), "Ray's actor, killed by eugo, to refuse calls")

    @eugo.hpc.distribute
    def spin(path: str) -> None:
        Path(path).touch()
        while True:
            time.sleep(0.05)

    begun = tmp_path / "begun"
    running = spin(str(begun))
    deadline = time.monotonic() + 120
    while not begun.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    ray.cancel(running)  # Ray's cancel takes eugo's future
    with pytest.raises(TaskCancelledError):
        eugo.hpc.get(running, timeout=60)


def test_kill_and_get_actor_are_public_with_rays_keywords() -> None:
    Counter = eugo.hpc.distribute(CounterClass)
    c = Counter.options(name="public-kill", namespace="parity")(1)
    found = eugo.hpc.get_actor("public-kill", namespace="parity")
    assert isinstance(found, eugo.hpc.ActorProxy)
    assert eugo.hpc.get(found.incr(1)) == 2  # the call form works on what get_actor found
    eugo.hpc.kill(found, no_restart=True)

    def released() -> bool:
        try:
            eugo.hpc.get_actor("public-kill", namespace="parity")
        except ValueError as error:
            return "public-kill" in str(error)
        return False

    # ray.kill is asynchronous: a call sent at once may still reach the actor on a busy machine
    # (Ray's own tests wait for DEAD the same way); once its name is gone, calls fail.
    until(released, "the killed actor's name to be released", deadline_s=120)
    with pytest.raises(RayActorError):
        eugo.hpc.get(c.incr(), timeout=120)
    with pytest.raises(ValueError, match="kill"):
        eugo.hpc.kill(square_future := eugo.hpc.put(1))  # a future is not an actor
    del square_future


def test_eugos_call_site_checks_still_run_on_the_remote_aliases() -> None:
    lock = threading.Lock()

    @eugo.hpc.distribute
    def takes(x: Any) -> Any:
        return x

    with pytest.raises(SerializationError, match="Argument 'x' of .*takes"):
        takes.remote(lock)
    with pytest.raises(OptionsError, match="num_gpus=1.5 is not allowed"):
        takes.options(num_gpus=1.5).remote(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        never = takes.options(resources={"no_such_thing": 1}).remote(1)
    assert any(issubclass(w.category, InfeasibleRequestWarning) for w in caught)
    eugo.hpc.cancel(never)
    with pytest.raises(OptionsError, match="max_concurrency=0"):
        eugo.hpc.distribute(max_concurrency=0)(CounterClass)


# -- ray.shutdown() and ray.init() again in the same process -------------------------------

REINIT = """
import os, ray
import eugo_jupyter as eugo

@eugo.hpc.distribute
def env():
    return os.environ.get("PARITY_VAR")

@eugo.hpc.distribute
class Env:
    def get(self):
        return os.environ.get("PARITY_VAR")

{first}
print("first", eugo.hpc.get(env()))
ray.shutdown()
ray.init(address="local", num_cpus=1, include_dashboard=False, _temp_dir={temp!r},
         runtime_env={{"env_vars": {{"PARITY_VAR": "new"}}}})
print("second", eugo.hpc.get(env()), eugo.hpc.get(Env().get()))
print("address", eugo.hpc.cluster().address == ray.get_runtime_context().gcs_address)
ray.shutdown()
"""


@pytest.fixture(scope="module")
def reinit_runs() -> Iterator[dict[str, Program]]:
    """Both programs of the test below, started together: each is a process of its own that
    waits on its own Rays' starts, so the two overlap on this machine's two cores."""
    runs: dict[str, tuple[Program, str]] = {}
    for first in ("eugo", "ray"):
        temp = tempfile.mkdtemp(prefix="eugo-parity-")
        start = (
            f"ray.init(address='local', num_cpus=1, include_dashboard=False, _temp_dir={temp!r})"
        )
        script = textwrap.dedent(REINIT.format(first=start if first == "ray" else "", temp=temp))
        runs[first] = Program(script), temp
    yield {first: program for first, (program, _) in runs.items()}
    for program, temp in runs.values():
        program.stop()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.parametrize("first", ["eugo", "ray"])
def test_ray_shutdown_then_init_again_goes_on_on_the_new_ray(
    first: str, reinit_runs: dict[str, Program]
) -> None:
    """The documented way to change a job's environment; eugo follows Ray to its new start
    (a process of its own, so the module's Ray is not disturbed). The program's first Ray is
    eugo's embedded one, or one the program started itself with ``ray.init``. Its own Rays
    start with ``address="local"`` in a folder of the test's: never someone else's cluster."""
    code, stdout, stderr = reinit_runs[first].ended()
    assert code == 0, stderr[-3000:]
    lines = [line for line in stdout.splitlines() if line.split(" ")[0] in (
        "first", "second", "address")]  # fmt: skip
    assert lines == ["first None", "second new new", "address True"]
