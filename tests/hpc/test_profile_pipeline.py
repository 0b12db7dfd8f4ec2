"""Ray's "pipeline data processing" tip as a profile finding (issue 22): results awaited all at
once and then processed one by one, while the workers sat idle, get ``all_at_once`` with the
``as_completed`` fix; the ``as_completed`` version stays silent.

Real 2-CPU Ray; the calls take 0.1 to 0.6 s and processing a result 0.15 s, wide ratios that a
busy machine does not change.
"""

from __future__ import annotations

import time

import pytest

import eugo_jupyter as eugo
from tests.hpc.conftest import kinds_of, nap

pytestmark = pytest.mark.usefixtures("warm_ray")

DURATIONS = [0.1, 0.6, 0.2, 0.5, 0.3, 0.4]


def handle(value: float) -> None:
    time.sleep(0.15)  # the notebook's own work on one result


def test_one_get_then_processing_one_by_one_suggests_as_completed() -> None:
    with eugo.hpc.profile() as run:
        for value in eugo.hpc.get([nap(d) for d in DURATIONS]):
            handle(value)
    found = [f for f in run.report().findings if f["kind"] == "all_at_once"]
    assert found and found[0]["function"] == "nap"
    assert "as_completed" in found[0]["fix"]


def test_as_completed_stays_silent() -> None:
    with eugo.hpc.profile() as run:
        for fut in eugo.hpc.as_completed([nap(d) for d in DURATIONS]):
            handle(eugo.hpc.get(fut))
    assert "all_at_once" not in kinds_of(run)


def test_one_get_at_the_end_stays_silent() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.get([nap(d) for d in DURATIONS])
    assert "all_at_once" not in kinds_of(run)
