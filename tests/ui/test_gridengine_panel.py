"""The Grid Engine launch in a real JupyterLab and Chromium, against a real Grid Engine cell.

What a user does: open the sidebar, pick Grid Engine (next to Local and SLURM, from the kinds
table), fill the form, preview the job script, launch, watch the card show the job and its node
join, and shut it down through the dialog, which says the jobs are deleted.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.gridengine import GridEngine, gridengine_cell, require_gridengine
from tests.ui import pages
from tests.ui.conftest import Lab, running_lab

pytestmark = pytest.mark.ui


@pytest.fixture(scope="module")
def cell() -> Iterator[GridEngine]:
    require_gridengine()
    with gridengine_cell() as running:
        yield running


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, cell: GridEngine) -> Iterator[Lab]:
    """JupyterLab on a "submit host" of that cell: its variables set, a shared folder."""
    shared = tmp_path_factory.mktemp("shared")
    config = {"GridEngineBackend": {"shared_dir": str(shared), "memory_resource": "mem_job"}}
    root = tmp_path_factory.mktemp("lab")
    with running_lab(root, config, cell.variables) as server:
        yield server


def _queued(cell: GridEngine) -> str:
    return subprocess.run(
        ["qstat", "-u", "*"], env=cell.env, capture_output=True, text=True, check=True
    ).stdout


def test_pick_grid_engine_preview_launch_and_shut_down(
    page: Any, lab: Lab, cell: GridEngine, artifacts: Path
) -> None:
    panel = pages.open_sidebar(page)
    options = panel.locator(".eugo-KindSwitch-option")
    assert options.all_inner_texts() == ["Local", "SLURM", "Grid Engine", "Kubernetes"]
    form = pages.kind_form(panel, "Grid Engine", "gridengine", {
        "Cluster name": "ui-sge", "Queue": "all.q", "Wall time": "00:15:00", "Nodes": "1",
        "Memory per node": "512MiB",
    })  # fmt: skip
    text, summary = pages.preview(form, "head")
    lines = text.splitlines()
    assert "#$ -l h_rt=00:15:00" in lines and "#$ -q all.q" in lines
    assert "#$ -l mem_job=512M" in lines  # the configured consumable, never h_vmem
    assert summary.startswith("1 Grid Engine job of 1 node")
    assert _queued(cell) == ""  # the preview submitted nothing
    panel.screenshot(path=str(artifacts / "panel-gridengine-preview.png"))

    card = pages.launch_until_running(page, panel, form, "ui-sge", "gridengine")
    assert card.locator(".eugo-Card-jobs summary").inner_text().startswith("Grid Engine jobs")
    job = card.locator(".eugo-Jobs tbody tr").first
    assert job.locator("td").nth(1).inner_text() == "head"
    assert job.get_attribute("data-state") == "r"
    assert job.locator("td").nth(3).inner_text() == cell.host
    panel.screenshot(path=str(artifacts / "panel-gridengine-running.png"))

    pages.shut_down_leaving_nothing(page, lab, card, "Its Grid Engine jobs are cancelled (qdel)")
    assert _queued(cell) == ""
