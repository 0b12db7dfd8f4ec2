"""A call sees the notebook's current globals, as a local call would (issue 22).

A real kernel (jupyter_client, the plain Python 3 kernel) joins this module's Ray; each test
runs cells in it the way a user does: set a global, call, change the global in a later cell,
call again. Functions defined in a kernel are pickled by value, which is where Ray keeps the
value from the first call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._kernel import Kernel, kernel_for


@pytest.fixture(scope="module")
def kernel(ray_local: Any) -> Iterator[Kernel]:
    with kernel_for(ray_local.address) as ran:  # join this module's Ray
        yield ran


def test_a_function_sees_a_global_changed_in_a_later_cell(kernel: Kernel) -> None:
    kernel.run(
        """
        THRESH = 3
        @eugo.hpc.distribute
        def over(x):
            return x > THRESH
        """
    )
    assert kernel.value("eugo.hpc.get(over(10))") == "True"
    assert kernel.value("eugo.hpc.get(over.options(num_cpus=1)(10))") == "True"
    kernel.run("THRESH = 100")
    assert kernel.value("eugo.hpc.get(over(10))") == "False"
    assert kernel.value("eugo.hpc.get(over.options(num_cpus=1)(10))") == "False"
    # Back again, with a bound call kept in a variable across the change.
    kernel.run("bound = over.options(num_cpus=1)")
    assert kernel.value("eugo.hpc.get(bound(10))") == "False"
    kernel.run("THRESH = 5")
    assert kernel.value("eugo.hpc.get([over(10), bound(10)])") == "[True, True]"


def test_a_helper_from_another_cell_and_its_own_globals_are_current(kernel: Kernel) -> None:
    kernel.run(
        """
        FACTOR = 2
        def scale(x):
            return x * FACTOR
        """
    )
    kernel.run(
        """
        @eugo.hpc.distribute
        def job(x):
            return scale(x) + 1
        """
    )
    assert kernel.value("eugo.hpc.get(job(10))") == "21"
    kernel.run("FACTOR = 3")  # a global of the helper, not of job itself
    assert kernel.value("eugo.hpc.get(job(10))") == "31"
    kernel.run("def scale(x):\n    return -x\n")  # the helper redefined in another cell
    assert kernel.value("eugo.hpc.get(job(10))") == "-9"


def test_a_list_grown_in_place_and_a_small_dict_changed_in_place_are_seen(
    kernel: Kernel,
) -> None:
    kernel.run(
        """
        NAMES = ["a", "b"]
        LIMITS = {"low": 1, "high": 9}
        @eugo.hpc.distribute
        def describe():
            return f"{len(NAMES)} {LIMITS['high']}"
        """
    )
    assert kernel.value("eugo.hpc.get(describe())") == "'2 9'"
    kernel.run("NAMES.append('c')")
    assert kernel.value("eugo.hpc.get(describe())") == "'3 9'"
    kernel.run("LIMITS['high'] = 50")  # same length: seen because the dict is small and plain
    assert kernel.value("eugo.hpc.get(describe())") == "'3 50'"


def test_an_actor_keeps_its_global_and_says_so_and_a_new_one_takes_the_new(
    kernel: Kernel,
) -> None:
    kernel.run(
        """
        RATE = 3
        @eugo.hpc.distribute
        class Meter:
            def __init__(self):
                self.calls = 0
            def read(self, x):
                self.calls += 1
                return x * RATE
        meter = Meter()
        """
    )
    out, err = kernel.outputs("print(eugo.hpc.get(meter.read(2)))")
    assert out.strip() == "6" and "RATE" not in err  # unchanged: silent
    kernel.run("RATE = 100")
    out, err = kernel.outputs("print(eugo.hpc.get(meter.read(2)))")
    assert out.strip() == "6"  # the actor keeps its state, and so its old RATE
    assert "StaleGlobalWarning" in err and "RATE was 3" in err and "now 100" in err
    assert "pass RATE as an argument" in err and "create the actor again" in err
    out, err = kernel.outputs("print(eugo.hpc.get(meter.read(2)))")
    assert "StaleGlobalWarning" not in err  # said once per change, not on every call
    out, err = kernel.outputs("print(eugo.hpc.get(Meter().read(2)))")
    assert out.strip() == "200" and "StaleGlobalWarning" not in err


def test_map_sees_the_current_global(kernel: Kernel) -> None:
    kernel.run(
        """
        OFFSET = 1
        def shift(x):
            return x + OFFSET
        """
    )
    assert kernel.value("eugo.hpc.map(shift, range(3))") == "[1, 2, 3]"
    kernel.run("OFFSET = 10")
    assert kernel.value("eugo.hpc.map(shift, range(3))") == "[10, 11, 12]"
    kernel.run("dshift = eugo.hpc.distribute(shift)")
    assert kernel.value("eugo.hpc.get(dshift(0))") == "10"
    kernel.run("OFFSET = 20")
    assert kernel.value("eugo.hpc.map(dshift, range(2))") == "[20, 21]"
    assert kernel.value("eugo.hpc.get(dshift(0))") == "20"


def test_a_distribute_cell_sees_a_helper_reading_a_changed_global(kernel: Kernel) -> None:
    kernel.run(
        """
        BONUS = 1
        def award(x):
            return x + BONUS
        """
    )
    assert kernel.value("%%distribute\naward(10)\n") == "11"
    kernel.run("BONUS = 5")
    assert kernel.value("%%distribute\naward(10)\n") == "15"


def test_profile_reports_an_actor_reading_a_stale_global_with_the_fix(kernel: Kernel) -> None:
    kernel.run(
        """
        import warnings
        PRICE = 1
        @eugo.hpc.distribute
        class Shop:
            def cost(self, n):
                return n * PRICE
        shop = Shop()
        eugo.hpc.get(shop.cost(1))
        PRICE = 2
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with eugo.hpc.profile() as stale_run:
                eugo.hpc.get(shop.cost(1))
        with eugo.hpc.profile() as fresh_run:
            eugo.hpc.get(Shop().cost(1))   # created after the change: nothing to say
        """
    )
    out = kernel.value(
        "[(f['message'], f['fix']) for f in stale_run.report().findings "
        "if f['kind'] == 'stale_global']"
    )
    assert "Shop still uses PRICE = 1" in out and "now 2" in out
    assert "Pass PRICE as an argument" in out and "create the actor again" in out
    kinds = kernel.value("[f['kind'] for f in fresh_run.report().findings]")
    assert "stale_global" not in kinds


def test_a_call_made_while_a_profile_records_sees_the_current_globals(kernel: Kernel) -> None:
    kernel.run(
        """
        LEVEL = 1
        @eugo.hpc.distribute
        def level():
            return LEVEL
        @eugo.hpc.distribute
        def levels(n):
            for _ in range(n):
                yield LEVEL
        """
    )
    seen = kernel.value(
        """
        with eugo.hpc.profile():
            seen = [eugo.hpc.get(level()), [eugo.hpc.get(r) for r in levels(1)]]
            LEVEL = 2
            seen += [eugo.hpc.get(level()), eugo.hpc.get(level.options(num_cpus=1)())]
            seen += [[eugo.hpc.get(r) for r in levels(2)]]
        seen
        """
    )
    assert seen == "[1, [1], 2, 2, [2, 2]]"
