"""Findings of profiled runs on the cluster's card, in a real JupyterLab through Chromium.

What a user does: launch a cluster from the manager, profile two runs from a Python process
connected to it (the kernel), let that process exit, then open the sidebar: the card lists both
runs, newest first, each with its speedup, the timeline's numbers and its findings with fixes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waiting import until
from tests.ui.conftest import Lab
from tests.ui.pages import CLUSTER_TIMEOUT_MS, open_sidebar

pytestmark = pytest.mark.ui

# A "kernel": two profiled runs, the second one newer; it waits for the findings to be stored
# (save_later runs in a thread) and exits, so the card shows what outlived it.
KERNEL = """
import json, sys, time
import eugo_jupyter as eugo

@eugo.hpc.distribute
def tiny_step(x):
    return x + 1

@eugo.hpc.distribute
def one_at_a_time(x):
    time.sleep(0.02)
    return x

saved = []
with eugo.hpc.profile() as run:
    eugo.hpc.get([tiny_step(i) for i in range(60)])
saved.append(run._findings_thread)
with eugo.hpc.profile() as run:
    for i in range(6):
        eugo.hpc.get(one_at_a_time(i))   # blocking too early, on purpose
saved.append(run._findings_thread)
for thread in saved:
    thread.join()
print(json.dumps(run.report().findings))
"""


@pytest.fixture
def launched(lab: Lab) -> dict[str, Any]:
    """A cluster launched from the manager, asked for before the page loads (it starts while
    the page does)."""
    body = {"kind": "local", "name": "findings", "head": {"num_cpus": 2, "num_gpus": 0}}
    status, model = lab.api("POST", "eugo/clusters", body)
    assert status == 201, model
    return dict(model)


def _running(lab: Lab, launched: dict[str, Any]) -> dict[str, Any]:
    def running() -> dict[str, Any] | None:
        _, model = lab.api("GET", f"eugo/clusters/{launched['id']}")
        assert model["status"] in ("starting", "running"), model.get("error")
        return dict(model) if model["status"] == "running" else None

    # The deadline bounds a broken launch only.
    return until(running, "the cluster to run", deadline_s=CLUSTER_TIMEOUT_MS / 1000)


def test_profiled_runs_findings_show_on_the_card_after_the_kernel_exits(
    launched: dict[str, Any], page: Any, lab: Lab, artifacts: Path
) -> None:
    cluster = _running(lab, launched)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(
        JUPYTER_RUNTIME_DIR=str(lab.log.parent / "runtime"),  # the lab's own runtime folder
        EUGO_CLUSTER_ADDRESS=cluster["address"],
        RAY_USAGE_STATS_ENABLED="0",
    )
    done = subprocess.run(
        [sys.executable, "-c", KERNEL], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kernel_findings = json.loads(done.stdout.strip().splitlines()[-1])
    assert "blocking_too_early" in {f["kind"] for f in kernel_findings}

    _, model = lab.api("GET", f"eugo/clusters/{cluster['id']}")
    runs = model["findings"]
    assert [r["functions"] for r in runs] == [["one_at_a_time"], ["tiny_step"]]  # newest first
    assert runs[1]["summary"]["tasks"] == 60

    panel = open_sidebar(page)
    card = panel.locator(f'.eugo-Card[data-cluster-id="{cluster["id"]}"]')
    section = card.locator(".eugo-Card-findings")
    section.wait_for(state="visible", timeout=CLUSTER_TIMEOUT_MS)
    assert section.locator("summary").inner_text().startswith("Findings of profiled runs")
    shown = section.locator(".eugo-Run")
    assert shown.count() == 2
    newest, older = shown.nth(0), shown.nth(1)
    assert newest.locator(".eugo-Run-functions").inner_text() == "one_at_a_time"
    assert older.locator(".eugo-Run-functions").inner_text() == "tiny_step"
    speedup = runs[0]["summary"]["speedup"]
    assert newest.locator('[data-key="speedup"]').inner_text() == f"speedup {speedup:.2f}×"
    assert newest.locator('[data-key="tasks"]').inner_text().startswith("6 tasks in ")
    workers = runs[0]["timeline"]["workers"]
    timeline = newest.locator('[data-key="timeline"]').inner_text()
    assert timeline.startswith(f"{workers} worker{'' if workers == 1 else 's'}, tasks from")
    finding = newest.locator('.eugo-Finding[data-kind="blocking_too_early"]')
    expected = next(f for f in runs[0]["findings"] if f["kind"] == "blocking_too_early")
    assert finding.locator(".eugo-Finding-message").inner_text() == expected["message"]
    assert finding.locator(".eugo-Finding-fix").inner_text() == f"Fix: {expected['fix']}"
    section.screenshot(path=str(artifacts / "panel-findings-light.png"))
    assert not [e for e in page.console_errors if "eugo" in e.lower()], page.console_errors
