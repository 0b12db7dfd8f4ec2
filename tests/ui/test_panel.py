"""The EugoHPC Manager sidebar in a real JupyterLab, driven through the system Chromium.

What a user does: open the sidebar, launch a two-node cluster from the form, watch its card
(nodes, CPUs), make it active, run a notebook cell that asks for a GPU no node has, read the
banner that says so, and shut the cluster down through the confirmation dialog. Screenshots in
light and dark themes go to ``tests/artifacts/``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.ui.pages import (
    CLUSTER_TIMEOUT_MS,
    SIDEBAR,
    launch_from_form,
    new_notebook,
    open_sidebar,
    run_new_cell,
    switch_theme,
)

pytestmark = pytest.mark.ui

GPU_CELL = """\
import eugo_jupyter as eugo

@eugo.hpc.distribute
def on_gpu():
    return "ran on a GPU"

fut = on_gpu.options(num_gpus=1)()
print("connected to", eugo.hpc.cluster().address)"""


def test_sidebar_opens_with_launch_and_connect_forms(page: Any, artifacts: Path) -> None:
    tab = page.locator('.jp-SideBar.jp-mod-left [data-id="eugo-hpc-manager"]')
    assert tab.get_attribute("title") == "EugoHPC Manager"
    assert tab.locator("svg").count() == 1  # the icon, not a text label
    panel = open_sidebar(page)
    assert panel.locator(".eugo-Sidebar-title").inner_text().lower() == "eugohpc manager"
    launch = panel.locator(".eugo-LaunchForm")
    assert launch.is_visible()
    assert launch.get_by_label("Cluster name").input_value() == "dev"
    assert launch.get_by_label("Head CPUs").is_visible()
    assert panel.get_by_text("Keep it running (a restarted server finds it)").count() == 1
    panel.locator(".eugo-Empty").filter(has_text="No cluster yet").wait_for()
    launch.get_by_role("button", name="Add worker node").click()
    assert launch.get_by_label("Worker 1 CPUs").input_value() == "1"
    panel.screenshot(path=str(artifacts / "panel-form-light.png"))


def test_polling_stops_while_the_sidebar_is_collapsed(page: Any) -> None:
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/eugo/clusters" in r.url else None)
    open_sidebar(page)
    with page.expect_request(lambda r: "/eugo/clusters" in r.url):
        pass  # polling while visible
    page.locator('.jp-SideBar.jp-mod-left [data-id="eugo-hpc-manager"]').click()  # collapse
    page.locator(SIDEBAR).wait_for(state="hidden")
    page.wait_for_timeout(1000)  # a request already in flight may still land
    seen = len(requests)
    # Visible, the panel polls every few seconds; collapsed, it must make no request at all.
    page.wait_for_timeout(12_000)
    assert len(requests) == seen, requests[seen:]
    with page.expect_request(lambda r: "/eugo/clusters" in r.url):
        open_sidebar(page)  # shown again: it refreshes at once


def test_server_error_shows_in_a_dialog(page: Any, artifacts: Path) -> None:
    panel = open_sidebar(page)
    panel.locator("summary", has_text="Connect to a cluster").click()
    form = panel.locator(".eugo-ConnectForm")
    form.get_by_label("Cluster address").fill("127.0.0.1:1")
    form.get_by_role("button", name="Connect").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(state="visible", timeout=CLUSTER_TIMEOUT_MS)
    assert "Could not connect to the cluster" in dialog.locator(".jp-Dialog-header").inner_text()
    body = dialog.locator(".jp-Dialog-body").inner_text()
    assert "127.0.0.1:1" in body, body  # the server's own sentence, naming the address
    page.screenshot(path=str(artifacts / "panel-error-dialog.png"))
    dialog.get_by_role("button", name="Close").click()
    dialog.wait_for(state="detached")
    # Nothing was created, and the panel still works.
    assert panel.locator(".eugo-Card").count() == 0


def test_launch_monitor_infeasible_banner_and_shutdown(
    page: Any, lab: Any, artifacts: Path
) -> None:
    panel = open_sidebar(page)
    card = launch_from_form(panel, "ui-test")

    # The card turns "running" with both nodes alive and their 2 CPUs in the bar.
    page.wait_for_selector(
        f'{SIDEBAR} .eugo-Card[aria-label="Cluster ui-test"]:is([data-status="running"],'
        '[data-status="error"])',
        timeout=CLUSTER_TIMEOUT_MS,
    )
    assert card.get_attribute("data-status") == "running", card.inner_text()
    rows = card.locator(".eugo-NodeTable tbody tr")
    page.wait_for_function(
        "(sel) => document.querySelectorAll(sel).length === 2",
        arg=f'{SIDEBAR} .eugo-Card[aria-label="Cluster ui-test"] .eugo-NodeTable tbody tr',
        timeout=CLUSTER_TIMEOUT_MS,
    )
    assert rows.locator('.eugo-Dot[aria-label="alive"]').count() == 2
    assert card.locator(".eugo-NodeTable .eugo-Tag", has_text="head").count() == 1
    cpu = card.locator('.eugo-Bar[data-resource="CPU"] .eugo-Bar-value').inner_text()
    assert re.fullmatch(r"[\d.]+ / 2", cpu), cpu
    assert card.locator('.eugo-Bar[data-resource="GPU"] .eugo-Bar-value').inner_text() == "none"
    address = card.locator(".eugo-Card-address code").inner_text()
    assert re.fullmatch(r"[\w.\-]+:\d+", address), address

    # Make it active: the card says so, and new kernels use it without code.
    card.get_by_role("button", name="Make active").click()
    card.locator(".eugo-Tag.eugo-mod-active").wait_for()
    _, clusters = lab.api("GET", "eugo/clusters")
    assert [c["active"] for c in clusters if c["name"] == "ui-test"] == [True]

    # A notebook cell asks for a GPU; none of the nodes has one.
    new_notebook(page)
    cell = run_new_cell(page, GPU_CELL)
    cell.locator(".jp-OutputArea-output", has_text="connected to").wait_for(
        timeout=CLUSTER_TIMEOUT_MS
    )
    assert address in cell.locator(".jp-OutputArea").inner_text()

    banner = card.locator(".eugo-Banner.eugo-mod-infeasible")
    banner.wait_for(timeout=CLUSTER_TIMEOUT_MS)
    text = banner.inner_text()
    assert "1 task waits" in text and "GPU" in text, text
    assert "no node" in text.lower(), text
    page.wait_for_function(
        "(sel) => Number(document.querySelector(sel)?.textContent) >= 1",
        arg=(
            f'{SIDEBAR} .eugo-Card[aria-label="Cluster ui-test"] '
            '.eugo-Tasks-item[data-state="pending"] dd'
        ),
        timeout=CLUSTER_TIMEOUT_MS,
    )

    # "Insert code" puts the connection code for this cluster into the notebook.
    card.get_by_role("button", name="Insert code").click()
    inserted = page.locator(".jp-NotebookPanel:visible .jp-CodeCell").last
    page.wait_for_function(
        "(addr) => [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .cm-content')]"
        ".some(e => e.textContent.includes(addr))",
        arg=f'eugo.hpc.init(address="{address}")',
    )
    assert "import eugo_jupyter as eugo" in inserted.locator(".cm-content").inner_text()

    # "Dashboard" opens Ray's dashboard through the Jupyter server, behind its login.
    cluster_id = card.get_attribute("data-cluster-id")
    href = card.get_by_role("link", name="Dashboard").get_attribute("href")
    assert href.endswith(f"/eugo/clusters/{cluster_id}/dashboard/"), href
    deadline = time.monotonic() + CLUSTER_TIMEOUT_MS / 1000
    while (response := page.request.get(href)).status != 200 and time.monotonic() < deadline:
        time.sleep(1)  # the dashboard process may still be starting
    assert response.status == 200 and "Ray" in response.text(), response.status

    panel.screenshot(path=str(artifacts / "panel-light.png"))
    page.screenshot(path=str(artifacts / "lab-light.png"))
    switch_theme(page, "JupyterLab Dark")
    panel.screenshot(path=str(artifacts / "panel-dark.png"))
    page.screenshot(path=str(artifacts / "lab-dark.png"))
    switch_theme(page, "JupyterLab Light")

    # Shut down asks first; cancelling keeps the cluster.
    card.get_by_role("button", name="Shut down").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(state="visible")
    assert "Shut down ui-test?" in dialog.inner_text()
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    assert card.is_visible()

    card.get_by_role("button", name="Shut down").click()
    dialog.wait_for(state="visible")
    dialog.locator(".jp-mod-accept").click()
    card.wait_for(state="detached", timeout=CLUSTER_TIMEOUT_MS)
    panel.locator(".eugo-Empty").filter(has_text="No cluster yet").wait_for()
    _, clusters = lab.api("GET", "eugo/clusters")
    assert [c for c in clusters if c["name"] == "ui-test" and c["status"] != "stopped"] == []
    assert not [e for e in page.console_errors if "eugo" in e.lower()], page.console_errors
