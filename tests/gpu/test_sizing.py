"""gpu_memory= sizing, from recorded NVML memory totals (no GPU here to read them from)."""

from __future__ import annotations

import math
import warnings

import pytest

from eugo_jupyter.exceptions import EugoWarning, OptionsError
from eugo_jupyter.gpu.sizing import fraction_for, resolve_gpu_memory

# nvmlDeviceGetMemoryInfo(handle).total as recorded on each card.
RECORDED_H200 = 150754820096  # NVIDIA H200, 143771 MiB
RECORDED_A100_40GB = 42949672960  # NVIDIA A100-SXM4-40GB, 40960 MiB
RECORDED_L4 = 24152899584  # NVIDIA L4, 23034 MiB


def test_six_gb_on_an_h200_is_a_twenty_fifth() -> None:
    assert fraction_for(6 * 10**9, [RECORDED_H200]) == 0.04


@pytest.mark.parametrize("total", [RECORDED_H200, RECORDED_A100_40GB, RECORDED_L4])
@pytest.mark.parametrize("gigabytes", [0.5, 1, 3, 5, 6, 7, 10, 11, 12, 20, 23])
def test_tasks_the_scheduler_packs_always_fit_in_memory(total: int, gigabytes: float) -> None:
    memory = int(gigabytes * 10**9)
    if memory > total:
        return
    fraction = fraction_for(memory, [total])
    packed = math.floor(1 / fraction + 1e-9)  # how many such tasks Ray puts on one GPU
    assert packed * memory <= total
    # and no smaller fraction Ray can express (steps of 0.0001) would pack more that still fit
    smaller = round(fraction - 1e-4, 4)
    if fraction < 1 and smaller > 0:
        more = math.floor(1 / smaller + 1e-9)
        assert more == packed or more * memory > total


def test_more_than_any_gpu_has_is_refused() -> None:
    with pytest.raises(
        OptionsError, match=r"more than any GPU in this cluster has \(the largest has 140.4 GiB\)"
    ):
        fraction_for(200 * 10**9, [RECORDED_H200, RECORDED_L4])


def test_mixed_cluster_sizes_on_the_smallest_gpu_that_fits_and_warns_about_smaller_ones() -> None:
    with pytest.warns(EugoWarning, match="1 of 2 GPUs in this cluster have less than that"):
        fraction = fraction_for(30 * 10**9, [RECORDED_A100_40GB, RECORDED_L4])
    assert fraction == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fraction_for(10 * 10**9, [RECORDED_A100_40GB, RECORDED_L4]) == 0.5


def test_explicit_fraction_that_oversubscribes_memory_warns() -> None:
    with pytest.warns(
        EugoWarning,
        match=(
            r"num_gpus=0.25 lets 4 tasks share one GPU, but 4 x 8GB is more than .* "
            r"\(22.5 GiB\).*Use num_gpus=0.3333"
        ),
    ):
        result = resolve_gpu_memory({"num_gpus": 0.25, "gpu_memory": "8GB"}, [RECORDED_L4])
    assert result == {"num_gpus": 0.25}
    assert resolve_gpu_memory({"gpu_memory": "8GB"}, [RECORDED_L4]) == {"num_gpus": 0.3333}


def test_bad_values_say_what_is_allowed() -> None:
    with pytest.raises(OptionsError, match="gpu_memory must be more than 0 bytes"):
        fraction_for(0, [RECORDED_L4])
    with pytest.raises(OptionsError, match="gpu_memory='lots' is not allowed"):
        resolve_gpu_memory({"gpu_memory": "lots"}, [RECORDED_L4])
