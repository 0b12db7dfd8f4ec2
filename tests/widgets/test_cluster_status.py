"""ClusterStatus: a live summary of a real local Ray that refreshes while shown, stops when
closed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.fixtures.waiting import until


def test_shows_the_cluster_and_follows_it_while_displayed(ray_local: Any) -> None:
    import eugo_jupyter as eugo

    status = eugo.widgets.ClusterStatus(interval=0.5)
    try:
        assert "1 node" in status.text and "<table" in status._html.value
        assert not status.running
        status._repr_mimebundle_()  # what displaying it in a notebook does
        assert status.running

        @eugo.hpc.distribute
        def hold(seconds: float) -> int:
            time.sleep(seconds)
            return 1

        fut = hold.options(num_cpus=2)(30)
        until(lambda: "0/2 CPUs free" in status.text, "the summary to show both CPUs in use")
        eugo.hpc.cancel(fut, force=True)
        until(lambda: "2/2 CPUs free" in status.text, "the summary to show the CPUs free again")
    finally:
        status.close()
    assert not status.running
    reads = status.refreshes
    time.sleep(1.5)
    assert status.refreshes == reads  # closed: no more reads


def test_interval_is_checked(ray_local: Any) -> None:
    import traitlets

    import eugo_jupyter as eugo

    with pytest.raises(traitlets.TraitError, match="0.5 seconds or more"):
        eugo.widgets.ClusterStatus(interval=0.01)
