"""eugo.check() on an embedded local Ray without any GPU: the answer comes at once, no probe
waits."""

from __future__ import annotations

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import OptionsError


def test_no_gpu_node_is_said_at_once(ray_local: object) -> None:
    report = eugo.check()
    assert not report.ok and report.verdict == "no node in this cluster has a GPU"
    assert report["fix"] == "launch or connect a cluster with a GPU node, or drop num_gpus"
    assert report["cuda"] is False and report["device"] is None
    assert eugo.hpc.waiting() == []  # nothing was left queued


def test_all_gpu_nodes_with_none_gives_the_one_report_that_says_so(ray_local: object) -> None:
    reports = eugo.gpu.check_nodes(0.25)
    assert [r.verdict for r in reports] == ["no node in this cluster has a GPU"]


def test_gpu_memory_needs_a_gpu_node(ray_local: object) -> None:
    with pytest.raises(
        OptionsError, match="needs a GPU node, and no node in this cluster has a GPU"
    ):
        eugo.gpu.gpu_fraction_for("6GB")
