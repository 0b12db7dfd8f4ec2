"""Launching on SSH hosts from the panel, in a real JupyterLab and Chromium, on the test bed.

What a user does: open the sidebar, open "Launch on SSH hosts", give two hosts, the user, the
key and where ray lives, launch, watch both hosts join and three nodes (the head here plus one
per host) appear on the card, then shut it down through the dialog. The hosts are network
namespaces with their own address and sshd (tests/testbed), reached over real ssh.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eugo_jupyter.server.backends import ray_start
from tests.testbed import TestBed, available, left_on_hosts
from tests.ui.conftest import Lab, meanwhile, running_lab
from tests.ui.pages import (
    CLUSTER_TIMEOUT_MS,
    SIDEBAR,
    open_sidebar,
    shut_down_through_dialog,
)

pytestmark = [pytest.mark.ui, pytest.mark.skipif(available() is not None, reason=str(available()))]

RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def bed_and_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestBed, Lab]]:
    """The test bed, built while JupyterLab starts (neither needs the other); the lab stops
    first, its clusters with it, then the bed."""
    with meanwhile(TestBed(2)) as bed, running_lab(tmp_path_factory.mktemp("lab")) as server:
        yield bed(), server


@pytest.fixture(scope="module")
def bed(bed_and_lab: tuple[TestBed, Lab]) -> TestBed:
    return bed_and_lab[0]


@pytest.fixture(scope="module")
def lab(bed_and_lab: tuple[TestBed, Lab]) -> Lab:
    return bed_and_lab[1]


def test_launch_on_ssh_hosts_shows_each_host_and_its_node_then_shuts_down(
    page: Any, lab: Lab, bed: TestBed, artifacts: Path
) -> None:
    h1, h2 = bed.hosts
    panel = open_sidebar(page)
    panel.locator(".eugo-Section-title", has_text="Launch on SSH hosts").click()
    form = panel.locator(".eugo-SshForm")
    form.wait_for(state="visible")
    form.get_by_label("SSH hosts", exact=True).fill(f"{h1.address}, {h2.address}")
    form.get_by_label("User", exact=True).fill("root")
    form.get_by_label("Key file", exact=True).fill(str(bed.key))
    form.get_by_label("Ray path", exact=True).fill(RAY)
    form.get_by_label("CPUs per host", exact=True).fill("1")
    panel.screenshot(path=str(artifacts / "panel-ssh-form.png"))
    form.get_by_role("button", name="Launch on SSH hosts").click()

    card = panel.locator('.eugo-Card[aria-label="Cluster ssh"]')
    card.wait_for()
    assert card.locator(".eugo-Tag").first.inner_text() == "ssh"
    page.wait_for_selector(
        f'{SIDEBAR} .eugo-Card[aria-label="Cluster ssh"][data-status="running"]',
        timeout=CLUSTER_TIMEOUT_MS,
    )
    hosts = card.get_by_role("list", name="SSH hosts").locator("li")
    assert hosts.count() == 2
    for host in (h1, h2):
        item = card.locator(f'.eugo-SshHosts li[data-host="{host.address}"]')
        assert item.inner_text().strip() == f"{host.address} joined"
    # One alive node per host plus the head on this machine, each at its own address.
    rows = card.locator(".eugo-NodeTable tbody tr.eugo-mod-alive")
    card.locator(".eugo-NodeTable tbody tr.eugo-mod-alive").nth(2).wait_for()
    assert rows.count() == 3
    titles = [rows.nth(i).get_attribute("title") or "" for i in range(3)]
    assert sorted(t.rsplit(" at ", 1)[-1] for t in titles) == sorted(
        [ray_start.node_ip(), h1.address, h2.address]
    )
    panel.screenshot(path=str(artifacts / "panel-ssh-running.png"))
    _, (model,) = lab.api("GET", "eugo/clusters")

    shut_down_through_dialog(page, card, "Every Ray process of this cluster stops")
    _, clusters = lab.api("GET", "eugo/clusters")
    assert clusters == []
    assert left_on_hosts(model) == []
    assert not [e for e in page.console_errors if "eugo" in e.lower()], page.console_errors
