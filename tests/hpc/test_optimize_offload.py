"""GPU offload: the rewriting (numpy bound to the array namespace), the transfers, the
verification against the CPU and the keep-or-not decision.

No GPU and no CuPy can run on this machine, so these tests use a stand-in array namespace: a
module object over NumPy whose arrays are a separate "device" type, counting what crosses. It
stands in for CuPy only; nothing here claims a GPU was used. The real-CuPy test is marked
``gpu`` and runs where a GPU is visible.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from eugo_jupyter.hpc.optimize import Optimized, _offload

from .optimize_corpus import Notebook


class OnDevice(np.ndarray):
    """An array that lives on the stand-in device."""


def stand_in(wrong: bool = False) -> tuple[_offload.ArrayNamespace, dict[str, int]]:
    seen = {"to_device": 0, "to_host": 0, "calls": 0}
    module = types.ModuleType("standin")

    def wrap(name: str):  # type: ignore[no-untyped-def]
        real = getattr(np, name)

        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            for a in args:
                assert not isinstance(a, np.ndarray) or isinstance(a, OnDevice), (
                    f"{name} got a host array: it was not moved to the device"
                )
            seen["calls"] += 1
            out = real(*args, **kwargs)
            if wrong and name == "sqrt":
                out = out * (1 + 1e-6)  # a device library that rounds differently
            return np.asarray(out).view(OnDevice)

        return call

    for name in ("sqrt", "sum", "zeros_like", "exp"):
        setattr(module, name, wrap(name))

    def to_device(a):  # type: ignore[no-untyped-def]
        seen["to_device"] += 1
        return np.array(a).view(OnDevice)

    def to_host(a):  # type: ignore[no-untyped-def]
        seen["to_host"] += 1
        return np.asarray(a).view(np.ndarray)

    return _offload.ArrayNamespace(module, to_device, to_host, name="stand-in"), seen


@pytest.fixture
def nb() -> Notebook:
    notebook = Notebook()
    notebook.cell("def norms(a):\n    return np.sqrt(np.sum(a * a, axis=1))\n")
    return notebook


def test_numpy_is_rebound_and_arrays_cross_both_ways(nb: Notebook) -> None:
    xp, seen = stand_in()
    a = np.random.default_rng(0).random((500, 3))
    found = _offload.trial(nb["norms"], (a,), xp)
    assert seen["to_device"] == 1 and seen["to_host"] == 1 and seen["calls"] == 2
    assert found.difference == ""
    assert found.text.startswith(("offloaded with stand-in", "moving the data takes"))
    assert nb["norms"].__globals__["np"] is np  # the notebook's own function is untouched


def test_a_device_result_that_differs_keeps_the_cpu(nb: Notebook) -> None:
    xp, _ = stand_in(wrong=True)
    found = _offload.trial(nb["norms"], (np.random.default_rng(1).random((50, 3)),), xp)
    assert not found.kept
    assert "beyond the tolerance" in found.difference and found.text.endswith("kept CPU")


def test_slower_with_the_transfers_keeps_the_cpu_and_says_why(nb: Notebook) -> None:
    xp, _ = stand_in()
    slow = _offload.ArrayNamespace(
        xp.module, xp.to_device, xp.to_host, synchronize=lambda: sum(range(200_000)) and None,
        name="stand-in",
    )  # fmt: skip
    found = _offload.trial(nb["norms"], (np.ones((4, 3)),), slow)
    assert not found.kept
    assert (
        found.text.startswith("moving the data takes") and "this CPU computes it in" in found.text
    )


def test_without_a_visible_gpu_offload_is_not_tried_and_says_why(nb: Notebook) -> None:
    fn = Optimized(nb["norms"], mode=True, num_gpus=1, force=True)
    a = np.random.default_rng(2).random((200, 3))
    np.testing.assert_array_equal(fn(a), nb["norms"](a))
    offload = fn.entry().stats()["offload"]
    assert offload.startswith("GPU offload not tried: ")
    assert "CuPy is not installed" in offload or "no GPU visible" in offload


@pytest.mark.gpu
def test_real_cupy_offload_is_verified_against_the_cpu(nb: Notebook) -> None:
    xp, why = _offload.namespace()
    assert xp is not None, why
    a = np.random.default_rng(3).random((2_000_000, 3))
    found = _offload.trial(nb["norms"], (a,), xp)
    assert found.difference == ""
