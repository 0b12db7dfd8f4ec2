"""GPU tests: those marked ``gpu`` need a real NVIDIA GPU and are skipped, with the reason,
without one.

Run them on a GPU machine with ``scripts/gpu_checks.sh``.
"""

from __future__ import annotations

import pytest


def _no_gpu_reason() -> str | None:
    from eugo_jupyter.gpu.probe import nvml_devices

    view = nvml_devices()
    if view["error"]:
        return (
            f"needs a real NVIDIA GPU; none here ({view['error']}); "
            "run scripts/gpu_checks.sh on a GPU machine"
        )
    if not view["devices"]:
        return (
            "needs a real NVIDIA GPU; NVML lists none here; "
            "run scripts/gpu_checks.sh on a GPU machine"
        )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    reason = _no_gpu_reason()
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))
