"""The live panes (task stream, progress, nodes, GPUs, failures) in a real JupyterLab, on a real
local cluster, driven through the system Chromium.

What a user does: make a cluster active, open panes from its card and from the command palette,
see two docked side by side, watch a run's tasks and progress while it runs, read a failure and
its traceback, reload and find the panes again, then shut the cluster down, make another active
and see the panes follow it. One JupyterLab and one cluster serve the whole module; the runs are
a handful of tasks. Screenshots of each pane go to ``tests/artifacts/``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.waiting import until
from tests.ui.conftest import Lab

pytestmark = pytest.mark.ui

# Launching starts `ray start` processes: allow for a loaded machine.
CLUSTER_TIMEOUT_MS = 300_000
SIDEBAR = "#eugo-hpc-manager"
PANES = {
    "tasks": "eugo:open-task-stream",
    "progress": "eugo:open-progress",
    "nodes": "eugo:open-nodes",
    "gpus": "eugo:open-gpus",
    "failures": "eugo:open-failures",
}

# A run that holds two tasks until the test lets them go (so "while it runs" is a state the test
# controls, not a race), runs a few quick ones beside them and one that fails.
DRIVER = textwrap.dedent(
    """
    import os, sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")
    flag = sys.argv[2]

    @ray.remote(num_cpus=1)
    def hold(flag):
        while not os.path.exists(flag):
            time.sleep(0.05)
        return 1

    @ray.remote(num_cpus=1)
    def quick(i):
        return i

    @ray.remote(num_cpus=1, max_retries=0)
    def explode():
        raise ValueError("bad input 7")

    held = [hold.remote(flag) for _ in range(2)]
    ray.get([quick.remote(i) for i in range(6)])
    try:
        ray.get(explode.remote())
    except ray.exceptions.RayTaskError:
        pass
    ray.get(held)
    """
)


def launch(lab: Lab, name: str) -> dict[str, Any]:
    """A local cluster through the REST API (the panel's own launch form is tested elsewhere)."""
    status, model = lab.api(
        "POST", "eugo/clusters", {"kind": "local", "name": name, "head": {"num_cpus": 4}}
    )
    assert status == 201, model
    return dict(model)


def make_active(lab: Lab, page: Any, name: str) -> str:
    """Wait, in the panel, for the cluster to run, make it active from its card (what the
    panes follow); its address."""
    card = page.locator(f'{SIDEBAR} .eugo-Card[aria-label="Cluster {name}"]')
    page.wait_for_selector(
        f'{SIDEBAR} .eugo-Card[aria-label="Cluster {name}"][data-status="running"]',
        timeout=CLUSTER_TIMEOUT_MS,
    )
    if "eugo-mod-active" not in (card.get_attribute("class") or ""):
        card.get_by_role("button", name="Make active").click()
    page.wait_for_selector(f'{SIDEBAR} .eugo-Card.eugo-mod-active[aria-label="Cluster {name}"]')
    _, clusters = lab.api("GET", "eugo/clusters")
    return str(next(c["address"] for c in clusters if c["name"] == name))


def start_run(cluster_address: str, flag: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, cluster_address, str(flag)],
        env={**os.environ, "RAY_AUTH_MODE": "token"},
    )


def open_sidebar(page: Any) -> Any:
    tab = page.locator('.jp-SideBar.jp-mod-left [data-id="eugo-hpc-manager"]')
    tab.wait_for(state="visible")
    if "lm-mod-current" not in (tab.get_attribute("class") or ""):
        tab.click()
    panel = page.locator(SIDEBAR)
    panel.wait_for(state="visible")
    return panel


def from_palette(page: Any, label: str) -> None:
    page.keyboard.press("Control+Shift+C")
    search = page.locator(".jp-CommandPalette input, #modal-command-palette input").first
    search.wait_for(state="visible")
    search.fill(label)
    page.locator(".lm-CommandPalette-item", has_text=label).first.click()


def pane(page: Any, kind: str) -> Any:
    widget = page.locator(f"#eugo-live-{kind}")
    widget.wait_for(state="visible")
    return widget


def status_line(widget: Any) -> Any:
    return widget.locator(".eugo-Live-status")


@pytest.fixture(scope="module")
def cluster(lab: Lab) -> Iterator[dict[str, Any]]:
    """One active cluster for the module (the last test stops it and makes another active)."""
    yield launch(lab, "live-a")


def test_panes_open_dock_and_show_a_run_while_it_runs(
    page: Any, lab: Lab, cluster: dict[str, Any], artifacts: Path, tmp_path: Path
) -> None:
    panel = open_sidebar(page)
    run_at = make_active(lab, page, "live-a")
    card = panel.locator('.eugo-Card[aria-label="Cluster live-a"]')
    # From the card: the task stream; from the palette: the progress.
    card.get_by_role("button", name="Task stream").click()
    stream = pane(page, "tasks")
    from_palette(page, "Open Progress (EugoHPC)")
    progress = pane(page, "progress")
    # Docked side by side: both in sight at once, neither covering the other.
    a, b = stream.bounding_box(), progress.bounding_box()
    assert a and b and a["width"] > 100 and b["width"] > 100, (a, b)
    assert a["x"] + a["width"] <= b["x"] + 1 or b["x"] + b["width"] <= a["x"] + 1, (a, b)
    assert page.locator(".lm-TabBar-tab", has_text="Task Stream").count() == 1
    assert page.locator(".lm-TabBar-tab", has_text="Progress").count() == 1
    # Before any run: live, following the active cluster, nothing ran.
    status_line(stream).filter(has_text=re.compile(r"^live-a · ")).wait_for()

    flag = tmp_path / "release"
    run = start_run(run_at, flag)
    try:
        # While it runs: the held tasks are running in the progress and on the stream.
        hold = progress.locator(".eugo-Progress-group", has_text="hold")
        hold.locator('[data-state="running"] dd').filter(has_text="2").wait_for(
            timeout=CLUSTER_TIMEOUT_MS
        )
        status_line(stream).filter(has_text="2 running").wait_for(timeout=CLUSTER_TIMEOUT_MS)
        stream.locator('.eugo-Legend li[data-func="hold"]').wait_for()
        tip = hover_a_running_task(page, stream, "hold")
        assert "hold" in tip and "running for" in tip and "node " in tip, tip
        progress.screenshot(path=str(artifacts / "live-progress-running.png"))
        stream.screenshot(path=str(artifacts / "live-task-stream-running.png"))
    finally:
        flag.touch()
        assert run.wait(timeout=CLUSTER_TIMEOUT_MS / 1000) == 0
    # Done: every group finished; the failure counted and marked.
    hold.locator('[data-state="done"] dd').filter(has_text="2").wait_for()
    explode = progress.locator(".eugo-Progress-group", has_text="explode")
    explode.locator('[data-state="failed"] dd').filter(has_text="1").wait_for()
    status_line(stream).filter(has_text="1 failed").wait_for()
    for func in ("hold", "quick", "explode"):
        stream.locator(f'.eugo-Legend li[data-func="{func}"]').wait_for()
    page.locator("#jp-main-dock-panel").screenshot(path=str(artifacts / "live-docked.png"))


def hover_a_running_task(page: Any, stream: Any, function: str) -> str:
    """Hover along each worker's lane at the right edge ("now"), where a running task's bar
    reaches, until one of ``function``'s tasks shows its tooltip; the tooltip's text. (A task
    that just finished can still read as running for a moment: Ray reports task events in
    batches, so the lane of a held task is looked for, not the first lane with a tooltip.)"""
    canvas = stream.locator("canvas.eugo-TaskStream-canvas")
    tip = stream.locator(".eugo-Tooltip")
    seen: list[str] = []

    def found() -> str:
        box = canvas.bounding_box()
        for lane in range(int(canvas.get_attribute("data-lanes") or "0")):
            page.mouse.move(box["x"] + box["width"] - 3, box["y"] + 18 + lane * 16 + 8)
            if tip.is_visible():
                text = str(tip.inner_text())
                if text.startswith(function):
                    return text
                seen.append(text)
        return ""

    try:
        return until(found, f"a running {function} task's tooltip", 120)
    except AssertionError:
        pytest.fail(f"no running {function} task on any lane; tooltips seen: {seen[-3:]}")


def test_failures_nodes_and_gpus(
    page: Any, lab: Lab, cluster: dict[str, Any], artifacts: Path
) -> None:
    open_sidebar(page)
    make_active(lab, page, "live-a")
    from_palette(page, "Open Failures (EugoHPC)")
    failures = pane(page, "failures")
    row = failures.locator("tr", has_text="explode")
    row.wait_for(timeout=CLUSTER_TIMEOUT_MS)
    assert "bad input 7" in row.inner_text()
    row.locator("summary").click()
    traceback = row.locator(".eugo-Failures-traceback")
    traceback.wait_for(state="visible")
    assert "ValueError" in traceback.inner_text()
    failures.screenshot(path=str(artifacts / "live-failures.png"))

    from_palette(page, "Open Nodes (EugoHPC)")  # opens in front of the failures
    nodes = pane(page, "nodes")
    node = nodes.locator(".eugo-LiveNode").first
    node.wait_for()
    assert node.locator('.eugo-Bar[data-resource="CPU"]').count() == 1
    assert node.locator('.eugo-Bar[data-resource="Store"]').count() == 1
    assert node.locator("canvas.eugo-History").count() == 3
    nodes.screenshot(path=str(artifacts / "live-nodes.png"))

    from_palette(page, "Open GPUs (EugoHPC)")
    gpus = pane(page, "gpus")
    # A cluster without GPUs says so (no empty chart, no error).
    gpus.locator(".eugo-LiveGpu-none").wait_for()
    assert "no GPU" in gpus.locator(".eugo-LiveGpu-none").inner_text()
    gpus.screenshot(path=str(artifacts / "live-gpus.png"))


def test_panes_come_back_with_the_layout(page: Any, lab: Lab, cluster: dict[str, Any]) -> None:
    open_sidebar(page)
    make_active(lab, page, "live-a")
    from_palette(page, "Open Task Stream (EugoHPC)")
    pane(page, "tasks")
    # The layout restorer saves the workspace as the layout changes: wait for the save that
    # holds both panes, then reload (without ?reset) and find them again.
    with page.expect_request(
        lambda r: r.method == "PUT" and "api/workspaces" in r.url
        and "eugo-live-nodes" in (r.post_data or "") and "eugo-live-tasks" in (r.post_data or "")
    ):  # fmt: skip
        from_palette(page, "Open Nodes (EugoHPC)")
        pane(page, "nodes")
    url = page.url.split("?")[0]
    page.goto(f"{url}?token={lab.token}")
    page.wait_for_selector("#jp-main-dock-panel", state="visible")
    status_line(pane(page, "tasks")).filter(has_text=re.compile(r"^live-a · ")).wait_for()
    status_line(pane(page, "nodes")).filter(has_text=re.compile(r"^live-a · ")).wait_for()


def test_panes_follow_when_the_cluster_stops_and_another_is_active(
    page: Any, lab: Lab, cluster: dict[str, Any], artifacts: Path, tmp_path: Path
) -> None:
    open_sidebar(page)
    make_active(lab, page, "live-a")
    from_palette(page, "Open Task Stream (EugoHPC)")
    from_palette(page, "Open Progress (EugoHPC)")
    stream, progress = pane(page, "tasks"), pane(page, "progress")
    status_line(stream).filter(has_text=re.compile(r"^live-a · ")).wait_for()

    with ThreadPoolExecutor(max_workers=1) as pool:
        # The stop takes seconds (its processes end): the panes are read and the next cluster
        # launched meanwhile, as a user goes on while the card says "stopping".
        stopped = pool.submit(lab.api, "DELETE", f"eugo/clusters/{cluster['id']}")
        # Stopped: one line says so, no chart of the old cluster, no pile of errors.
        for widget in (stream, progress):
            line = status_line(widget).filter(
                has_text=re.compile(r"^live-a is (no longer active|stopping|stopped)")
            )
            line.wait_for(timeout=CLUSTER_TIMEOUT_MS)
            assert widget.locator(".eugo-Live-body").count() == 0
            assert widget.locator(".eugo-Live-status").count() == 1
        stream.screenshot(path=str(artifacts / "live-task-stream-no-cluster.png"))

        launch(lab, "live-b")
        status, _ = stopped.result()
    assert status in (200, 204)
    open_sidebar(page)
    run_at = make_active(lab, page, "live-b")
    for widget in (stream, progress):
        status_line(widget).filter(
            has_text="live-b (the active cluster changed from live-a)"
        ).wait_for(timeout=CLUSTER_TIMEOUT_MS)
    flag = tmp_path / "release"
    flag.touch()  # nothing held this time
    run = start_run(run_at, flag)
    assert run.wait(timeout=CLUSTER_TIMEOUT_MS / 1000) == 0
    stream.locator('.eugo-Legend li[data-func="quick"]').wait_for()
    progress.locator(".eugo-Progress-group", has_text="quick").wait_for()
