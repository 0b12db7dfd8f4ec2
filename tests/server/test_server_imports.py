"""The Jupyter server never loads the kernel's library: the extension and the panel's requests
run on the leaf modules (``_raystate``, ``_feasibility``, ``records``), not ``eugo_jupyter.hpc``.

Checked in a real server process: a ``sitecustomize`` on its path writes, as the process exits,
which ``eugo_jupyter`` modules it loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.fixtures.jupyter import jupyter_server

REPORT = """
import atexit, json, os, sys

def _report():
    with open(os.environ["EUGO_TEST_MODULES_REPORT"], "w") as out:
        json.dump(sorted(m for m in sys.modules if m.startswith("eugo_jupyter")), out)

atexit.register(_report)
"""


def test_the_server_serves_without_importing_the_kernel_library(tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(REPORT)
    report = tmp_path / "modules.json"
    path = os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "") or os.getcwd()])
    env = {"PYTHONPATH": path, "EUGO_TEST_MODULES_REPORT": str(report)}
    with jupyter_server(tmp_path / "runtime", env=env) as (client, _process):
        # Any Ray this machine runs is listed (found), its model read through the monitor.
        assert isinstance(client.clusters(), list)
        preview = client.preview({"kind": "local", "name": "p", "head": {"num_cpus": 1}})
        assert preview
    loaded = json.loads(report.read_text())
    assert "eugo_jupyter.server.monitor" in loaded  # the report saw the extension load
    assert [m for m in loaded if m.startswith("eugo_jupyter.hpc")] == []
