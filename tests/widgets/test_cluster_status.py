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


def test_a_refresh_begun_before_a_shutdown_never_starts_a_ray(
    ray_local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh thread's race, made certain: Ray was up when a refresh began and was shut down
    before it read the cluster. The read must not connect again: that started an embedded Ray
    from the widget's thread, behind the user's back. (Last in the module: it shuts Ray down.)"""
    import ray

    import eugo_jupyter as eugo

    status = eugo.widgets.ClusterStatus()
    real = ray.is_initialized
    try:
        eugo.hpc.shutdown()
        seen = iter([True])  # what the refresh's first look saw, just before the shutdown
        monkeypatch.setattr(ray, "is_initialized", lambda: next(seen, False) or real())
        status.refresh()
        monkeypatch.undo()
        assert not real(), "a refresh after the shutdown started a Ray"
        assert status.text.startswith("No cluster to show (not connected)")
    finally:
        monkeypatch.undo()
        status.close()
        if real():
            eugo.hpc.shutdown()
