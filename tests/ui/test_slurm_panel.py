"""The SLURM launch in a real JupyterLab and Chromium, against a real SLURM on this machine.

What a user does: open the sidebar, pick SLURM, fill the form, preview the job script, launch,
watch the card show the SLURM job and the node join, and shut it down through the dialog.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.slurm import Slurm, require_slurm, slurm_cluster
from tests.ui import pages
from tests.ui.conftest import Lab, running_lab

pytestmark = pytest.mark.ui


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slurm]:
    require_slurm()
    with slurm_cluster(tmp_path_factory.mktemp("slurm") / "daemons") as running:
        yield running


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, slurm: Slurm) -> Iterator[Lab]:
    """JupyterLab on a "login node" of that SLURM: SLURM_CONF set, a shared folder, a profile."""
    profile = {
        "name": "debug, 1 node",
        "description": "One node of the debug partition.",
        "body": {"kind": "slurm", "slurm": {"partition": "debug", "nodes": 1}},
        "editable": ["slurm.walltime"],
    }
    config = {
        "EugoManagerExtension": {
            "slurm_shared_dir": str(slurm.folder / "shared"),
            "profiles": [profile],
        }
    }
    root = tmp_path_factory.mktemp("lab")
    with running_lab(root, config, {"SLURM_CONF": str(slurm.conf)}) as server:
        yield server


def _queued(slurm: Slurm) -> str:
    return subprocess.run(
        ["squeue", "--noheader", "--states=PENDING,RUNNING,COMPLETING"],
        env=slurm.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_pick_slurm_preview_launch_and_shut_down(
    page: Any, lab: Lab, slurm: Slurm, artifacts: Path
) -> None:
    panel = pages.open_sidebar(page)
    form = pages.kind_form(panel, "SLURM", "slurm", {})
    # The administrator's profile is offered; picking it fixes the partition.
    form.get_by_label("Profile", exact=True).select_option("debug, 1 node")
    assert form.get_by_label("Partition", exact=True).input_value() == "debug"
    assert form.get_by_label("Partition", exact=True).is_disabled()
    form.get_by_label("Profile", exact=True).select_option("")
    pages.fill(form, {"Cluster name": "ui-slurm", "Partition": "debug", "Wall time": "00:15:00",
                "Nodes": "1"})  # fmt: skip
    text, summary = pages.preview(form, "head")
    assert "#SBATCH --time=00:15:00" in text and "#SBATCH --partition=debug" in text
    assert "start --head --block" in text
    assert summary.startswith("1 SLURM job of 1 node")
    assert _queued(slurm) == ""  # the preview submitted nothing
    panel.screenshot(path=str(artifacts / "panel-slurm-preview.png"))

    card = pages.launch_until_running(page, panel, form, "ui-slurm", "slurm")
    job = card.locator(".eugo-Jobs tbody tr").first
    assert job.locator("td").nth(1).inner_text() == "head"
    assert job.get_attribute("data-state") == "RUNNING"
    assert job.locator("td").nth(3).inner_text() in slurm.nodes
    panel.screenshot(path=str(artifacts / "panel-slurm-running.png"))

    pages.shut_down_leaving_nothing(page, lab, card, "SLURM jobs are cancelled")
    assert _queued(slurm) == ""
