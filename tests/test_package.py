"""The public surface and the import discipline of the package."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import eugo_jupyter as eugo

HEAVY = ("tornado", "IPython", "ipywidgets", "jupyter_server", "ray")


def test_hpc_public_names_are_locked() -> None:
    assert eugo.hpc.__all__ == sorted(eugo.hpc.__all__)
    for name in (
        "distribute",
        "get",
        "wait",
        "as_completed",
        "put",
        "cancel",
        "init",
        "shutdown",
        "cluster",
        "waiting",
    ):
        assert name in eugo.hpc.__all__ and callable(getattr(eugo.hpc, name))


def test_importing_the_package_loads_no_web_server_or_ipython() -> None:
    code = f"import sys, eugo_jupyter; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_ray_worker_never_imports_jupyter(ray_local: Any) -> None:
    @eugo.hpc.distribute
    def loaded() -> list[str]:
        import eugo_jupyter  # noqa: F401

        return [
            m for m in ("tornado", "IPython", "ipywidgets", "jupyter_server") if m in sys.modules
        ]

    assert eugo.hpc.get(loaded()) == []
