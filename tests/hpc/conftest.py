"""What the profile tests share: the two workloads they time, and a 2-CPU Ray warmed up for them.

The workloads are pickled by value (as the test modules are), so Ray workers need not import
this file. A module that times them asks for ``warm_ray``; the pitfall verdicts rest on sleeps
with wide ratios, so a busy shared machine does not change them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@eugo.hpc.distribute
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@eugo.hpc.distribute
def noop(x: int) -> int:
    return x


@pytest.fixture(scope="module")
def warm_ray(ray_local: object) -> Iterator[None]:
    """The embedded 2-CPU Ray, with both workers up before anything is timed."""
    eugo.hpc.get([nap(0.2), nap(0.2)])
    yield


def kinds_of(run) -> set[str]:  # type: ignore[no-untyped-def]
    """The kinds of finding a profiled run's report names."""
    return run.report().kinds()
