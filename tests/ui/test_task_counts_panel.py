"""The card's task counts when Ray let task records go: the user reads them as "at least".

The GCS keeps a limited number of task records (``RAY_task_events_max_num_task_in_gcs``,
100,000 by default) and drops the oldest finished ones past it; the counts are then floors.
This module's JupyterLab launches clusters whose GCS keeps 20, and a driver runs 40 tasks on
one: real records really dropped, shown in the real panel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.conftest import Lab, running_lab
from tests.ui.pages import CLUSTER_TIMEOUT_MS, SIDEBAR, open_sidebar

pytestmark = pytest.mark.ui

KEPT = 20  # task records the launched clusters' GCS keeps
RUN = 40  # tasks the driver runs: at least 20 records must go

DRIVER = textwrap.dedent(
    """
    import sys, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")
    noop = ray.remote(num_cpus=1)(lambda: None)
    ray.get([noop.remote() for _ in range(int(sys.argv[2]))])
    """
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab whose launched clusters keep only ``KEPT`` task records (`ray start`
    takes the server's environment)."""
    env = {"RAY_task_events_max_num_task_in_gcs": str(KEPT)}
    with running_lab(tmp_path_factory.mktemp("lab"), env_extra=env) as server:
        yield server


@pytest.fixture
def launched(lab: Lab) -> dict[str, Any]:
    """The cluster, asked for before the page loads (it starts while the page does)."""
    status, model = lab.api(
        "POST", "eugo/clusters", {"kind": "local", "name": "history", "head": {"num_cpus": 1}}
    )
    assert status == 201, model
    return dict(model)


def test_counts_read_as_at_least_once_ray_let_records_go(
    launched: dict[str, Any], page: Any, lab: Lab, artifacts: Path
) -> None:
    model = launched
    panel = open_sidebar(page)
    card = panel.locator('.eugo-Card[aria-label="Cluster history"]')
    page.wait_for_selector(
        f'{SIDEBAR} .eugo-Card[aria-label="Cluster history"][data-status="running"]',
        timeout=CLUSTER_TIMEOUT_MS,
    )
    # Nothing dropped yet: plain counts, no note.
    assert card.locator(".eugo-Tasks-dropped").count() == 0
    assert "≥" not in card.locator(".eugo-Tasks").inner_text()

    _, model = lab.api("GET", f"eugo/clusters/{model['id']}")
    subprocess.run(
        [sys.executable, "-c", DRIVER, model["address"], str(RUN)],
        env={**os.environ, "RAY_AUTH_MODE": "token"},
        check=True,
        timeout=CLUSTER_TIMEOUT_MS / 1000,
    )

    note = card.locator(".eugo-Tasks-dropped")
    note.wait_for(timeout=CLUSTER_TIMEOUT_MS)
    text = note.inner_text()
    assert text.startswith("Ray let go of the records of "), text
    assert "older tasks (it keeps only a limited number)" in text, text
    assert "each count is at least the number shown: more tasks may have run." in text, text
    finished = card.locator('.eugo-Tasks-item[data-state="finished"] dd')
    assert finished.inner_text().startswith("≥ "), finished.inner_text()
    assert finished.get_attribute("aria-label", timeout=1000).startswith("at least ")
    # What the card says adds up to what ran: kept plus let go.
    _, model = lab.api("GET", f"eugo/clusters/{model['id']}")
    tasks = model["tasks"]
    assert tasks["dropped"] >= RUN - KEPT, tasks
    dropped = int(text.removeprefix("Ray let go of the records of ").split()[0].replace(",", ""))
    assert dropped == tasks["dropped"], (text, tasks)
    card.screenshot(path=str(artifacts / "panel-counts-at-least.png"))
