"""The probe for real, in this process and in fresh interpreters: torch's CPU build, no NVIDIA
driver, and (in a subprocess whose import system refuses torch) no torch at all."""

from __future__ import annotations

import json
import subprocess
import sys

import eugo_jupyter as eugo
from eugo_jupyter._nvml import devices
from eugo_jupyter.gpu.probe import probe


def test_nvml_absent_is_reported_with_its_reason() -> None:
    view = devices()
    assert view["devices"] == [] and view["driver"] is None
    assert "NVML could not start" in view["error"]


def test_local_check_inspects_this_process_with_real_torch_cpu_build() -> None:
    import torch

    report = eugo.check(local=True)
    assert not report.ok
    assert report.verdict == (
        "this kernel sees no GPU: torch.cuda.is_available() is False and NVML found no driver"
    )
    assert report["scope"] == "kernel" and report["torch_version"] == torch.__version__
    assert report["cuda"] is False and report["device"] is None
    assert report["pid"] == __import__("os").getpid()
    assert "FAIL" in report._repr_html_()


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTorch())
"""


def test_without_torch_the_report_says_what_it_could_not_check() -> None:
    facts = _run(
        BLOCK_TORCH
        + "import json, eugo_jupyter as eugo\n"
        + "r = eugo.check(local=True)\n"
        + (
            "print(json.dumps({'verdict': r.verdict, 'torch_error': r['torch_error'],"
            " 'cuda': r['cuda']}))"
        )
    )
    assert facts["verdict"] == (
        "torch is not installed on this kernel and NVML found no driver, "
        "so nothing could look for a GPU"
    )
    assert facts["torch_error"].startswith("torch is not installed") and facts["cuda"] is False


def test_importing_the_package_and_gpu_module_loads_no_torch_nvml_or_widgets() -> None:
    loaded = _run(
        "import json, sys, eugo_jupyter as eugo\n"
        "eugo.gpu; eugo.check\n"
        "print(json.dumps([m for m in "
        "('torch', 'pynvml', 'ipywidgets', 'IPython', 'tornado', 'ray') "
        "if m in sys.modules]))"
    )
    assert loaded == []


def test_probe_facts_are_plain_data_with_every_key() -> None:
    facts = probe(requested_gpus=1, scope="task")
    json.dumps(facts)
    assert facts["kernel_ok"] is None and facts["process_seen"] is None
    assert facts["requested_gpus"] == 1 and facts["gpu_ids"] is None  # not inside a Ray task
