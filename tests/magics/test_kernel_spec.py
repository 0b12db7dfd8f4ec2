"""The "Python 3 (Eugo)" kernel spec: a real kernel started by jupyter_client runs %%distribute
without anything being loaded by hand."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

REPO_KERNEL = Path(__file__).resolve().parents[2] / "kernel"


def test_spec_names_the_kernel_and_loads_the_extension() -> None:
    spec = json.loads((REPO_KERNEL / "kernel.json").read_text())
    assert spec["display_name"] == "Python 3 (Eugo)"
    assert spec["language"] == "python"
    assert any("extensions" in arg and "eugo_jupyter" in arg for arg in spec["argv"])
    assert (REPO_KERNEL / "logo-64x64.png").is_file() and (REPO_KERNEL / "logo-32x32.png").is_file()


def test_the_wheel_installs_the_spec() -> None:
    import tomllib

    pyproject = tomllib.loads((REPO_KERNEL.parent / "pyproject.toml").read_text())
    shared = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["kernel"] == "share/jupyter/kernels/eugo"


def _run(client: Any, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    outputs: list[dict[str, Any]] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] in ("stream", "execute_result", "error", "display_data"):
            outputs.append({"type": msg["msg_type"], **msg["content"]})

    reply = client.execute_interactive(code, output_hook=hook, timeout=300)
    return reply["content"], outputs


def test_kernel_runs_distribute_without_loading_anything(ray_local: Any, tmp_path: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = tmp_path / "kernels"
    shutil.copytree(REPO_KERNEL, kernels / "eugo")
    specs = KernelSpecManager(kernel_dirs=[str(kernels)])
    assert specs.get_kernel_spec("eugo").display_name == "Python 3 (Eugo)"

    manager = KernelManager(kernel_name="eugo", kernel_spec_manager=specs)
    env = {**os.environ, "EUGO_CLUSTER_ADDRESS": ray_local.address}  # join this test's Ray
    manager.start_kernel(env=env)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        reply, outputs = _run(
            client,
            "%%distribute --num-cpus 1\nsquares = [i * i for i in range(5)]\n"
            "print('from the worker')\nsum(squares)\n",
        )
        assert reply["status"] == "ok", outputs
        streams = "".join(o.get("text", "") for o in outputs if o["type"] == "stream")
        assert "from the worker" in streams and "(pid=" not in streams
        results = [o for o in outputs if o["type"] == "execute_result"]
        assert results and results[0]["data"]["text/plain"] == "30"

        reply, outputs = _run(client, "print(squares, eugo.__name__)\n")
        assert reply["status"] == "ok", outputs
        assert "[0, 1, 4, 9, 16] eugo_jupyter" in "".join(o.get("text", "") for o in outputs)

        reply, outputs = _run(client, "%%distribute\nfail = 1\n1 / 0\n")
        assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
        assert any(
            "line 3" in "".join(o.get("traceback", [])) for o in outputs if o["type"] == "error"
        )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)
