"""The Kubernetes launch in a real JupyterLab and Chromium, against a mock Kubernetes API server.

No Kubernetes API server can run on these machines (none is packaged for them), so the server
JupyterLab talks to is the mock of ``tests/fixtures/kube_api.py`` (real HTTP, watches, the
port-forward websocket, a double of the KubeRay operator), and the head pod's port-forward
reaches a real local Ray head. What a user does: pick Kubernetes in the kinds switch, fill the
form, preview the RayCluster manifest, launch, watch the card list the head pod and turn running,
and shut it down through the dialog, which says the RayCluster is deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.kube_api import Running, kube_api, ray_head_behind
from tests.ui import pages
from tests.ui.conftest import Lab, meanwhile, running_lab

pytestmark = pytest.mark.ui


@pytest.fixture(scope="module")
def kube_and_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, Lab]]:
    """The mock API server (none can run here) with a real Ray head behind its head pod, and a
    JupyterLab that talks to it. The head starts while JupyterLab does (the lab needs only the
    API's kubeconfig); the lab stops first, then the head, then the API."""
    with kube_api(tmp_path_factory.mktemp("kube")) as running:
        env = {"KUBECONFIG": str(running.kubeconfig), "KUBERNETES_SERVICE_HOST": ""}
        root = tmp_path_factory.mktemp("lab")
        with meanwhile(ray_head_behind(running)) as head, running_lab(root, None, env) as server:
            head()
            yield running, server


@pytest.fixture(scope="module")
def kube(kube_and_lab: tuple[Running, Lab]) -> Running:
    return kube_and_lab[0]


@pytest.fixture(scope="module")
def lab(kube_and_lab: tuple[Running, Lab]) -> Lab:
    return kube_and_lab[1]


def test_pick_kubernetes_preview_launch_and_shut_down(
    page: Any, lab: Lab, kube: Running, artifacts: Path
) -> None:
    panel = pages.open_sidebar(page)
    form = pages.kind_form(panel, "Kubernetes", "kubernetes", {
        "Cluster name": "ui k8s", "Namespace": "team-a", "Workers": "0",
    })  # fmt: skip
    text, summary = pages.preview(form, "eugo-ui-k8s.yaml")
    assert "kind: RayCluster" in text and "namespace: team-a" in text
    assert "replicas: 0" in text and "secretName: eugo-ui-k8s-ray-token" in text
    assert summary.startswith("A RayCluster eugo-ui-k8s in namespace team-a (image rayproject/ray:")
    assert kube.call(kube.api.names, "rayclusters") == []  # the preview created nothing
    panel.screenshot(path=str(artifacts / "panel-kubernetes-preview.png"))

    card = pages.launch_until_running(page, panel, form, "ui k8s", "kubernetes")
    assert card.locator(".eugo-Card-jobs summary").inner_text().startswith("Kubernetes pods")
    pods = card.locator(".eugo-Jobs tbody tr")
    assert pods.count() == 1  # Workers 0: the head pod only
    assert pods.first.locator("td").nth(1).inner_text() == "head"
    assert pods.first.get_attribute("data-state") == "Running"
    panel.screenshot(path=str(artifacts / "panel-kubernetes-running.png"))

    pages.shut_down_leaving_nothing(page, lab, card, "Its RayCluster is deleted")
    assert kube.call(kube.api.names, "rayclusters") == []
    assert kube.call(kube.api.names, "pods") == []
