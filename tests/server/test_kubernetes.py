"""The `kubernetes` (KubeRay) backend: manifests, refusals, pod reasons, and a launch end to end.

No Kubernetes API server can run on these machines (none is packaged for them), so every test
here that talks to one talks to the mock of ``tests/fixtures/kube_api.py``: real HTTP on
127.0.0.1, watch streams and the port-forward websocket, with a test double of the KubeRay
operator. What is real: the official ``kubernetes`` client the backend uses, KubeRay's published
``RayCluster`` CRD schema (v1.7.0, vendored in ``tests/fixtures/kuberay/``) every manifest is
checked against, the Jupyter server and its REST API, and the Ray head behind the mock head pod's
port-forward (a ``ray start --head`` on 127.0.0.1, started and stopped here), on which a task
really runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from eugo_jupyter.exceptions import ClusterError, OptionsError
from eugo_jupyter.server.backends.kuberay import KubernetesBackend
from eugo_jupyter.server.backends.kuberay_manifest import default_image, manifest, secret
from tests.fixtures.jupyter import error_of, fetch_json, poll_model
from tests.fixtures.kube_api import Running, kube_api, ray_head_behind
from tests.fixtures.waiting import until

SCHEMA = json.loads(
    (
        Path(__file__).parents[1] / "fixtures" / "kuberay" / "raycluster-v1.7.0.schema.json"
    ).read_text()
)
DEADLINE = 240.0

BODIES = {
    "defaults": {},
    "gpus and autoscaling": {
        "namespace": "ml",
        "head": {"cpus": 2, "memory": "8Gi"},
        "worker_groups": [
            {
                "name": "gpu",
                "replicas": 2,
                "min_replicas": 0,
                "max_replicas": 8,
                "cpus": 8,
                "memory": "64Gi",
                "gpus": 1,
            },
            {"name": "cpu", "replicas": 1, "cpus": 0.5, "memory": 2**31},
        ],
    },
    "queue, account, selector, tolerations": {
        "queue": "team-a",
        "service_account": "ray-runner",
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "image": "registry.example.org/ray:2.60.0-py311",
        "worker_groups": [],
    },
}


def _validate(body: dict[str, Any]) -> None:
    jsonschema.validate(body, SCHEMA, cls=jsonschema.Draft7Validator)


def _core_pod_template(template: dict[str, Any]) -> None:
    """The template through the official client's V1PodTemplateSpec model (generated from the
    Kubernetes API's own OpenAPI): every key must be a known field of the core pod spec and
    come back unchanged."""
    from kubernetes.client import ApiClient

    api = ApiClient()
    model = api.deserialize(json.dumps(template), "V1PodTemplateSpec", "application/json")
    assert api.sanitize_for_serialization(model) == template


@pytest.mark.parametrize("case", list(BODIES))
def test_every_manifest_matches_kuberays_crd_schema(case: str) -> None:
    """Checked offline: the CRD's openAPIV3Schema (as an API server with KubeRay would) and the
    core pod template; no API server runs here."""
    backend = KubernetesBackend()
    spec = backend.validate({"kind": "kubernetes", "name": "dev", "kubernetes": BODIES[case]})
    body = manifest(spec.fields, "eugo-dev", "c-1")
    _validate(body)
    for template in [body["spec"]["headGroupSpec"]["template"]] + [
        g["template"] for g in body["spec"]["workerGroupSpecs"]
    ]:
        _core_pod_template(template)
    # The preview is this manifest, and names the image.
    import yaml

    plan = backend.plan(spec)
    assert (
        yaml.safe_load(plan.scripts[0]["text"])["spec"] == manifest(spec.fields, "eugo-dev")["spec"]
    )
    assert spec.fields.image in plan.summary
    assert (
        secret(spec.fields, "eugo-dev", "t")["metadata"]["name"]
        == (body["spec"]["authOptions"]["secretName"])
    )


def test_the_schema_check_can_fail() -> None:
    """A manifest KubeRay's schema refuses is refused here too (no API server: the schema)."""
    spec = KubernetesBackend().validate({"kind": "kubernetes"}).fields
    body = manifest(spec, "eugo-dev")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _validate(body)
    del body["spec"]["workerGroupSpecs"][0]["replicas"]
    del body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(jsonschema.ValidationError, match="'name' is a required property"):
        _validate(body)


def test_the_default_image_is_the_installed_rays() -> None:
    import ray

    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    assert default_image() == f"rayproject/ray:{ray.__version__}-{py}"
    spec = KubernetesBackend().validate(
        {"kind": "kubernetes", "kubernetes": {"worker_groups": [{"gpus": 1}]}}
    )
    assert spec.fields.image == f"rayproject/ray:{ray.__version__}-{py}-gpu"


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"namespace": "My_NS"}, "kubernetes.namespace='My_NS' is not allowed"),
        ({"head": {"cpus": 0}}, "kubernetes.head.cpus=0 is not allowed"),
        ({"head": {"memory": "lots"}}, 'give a Kubernetes quantity such as "4Gi"'),
        ({"worker_groups": [{"gpus": 1.5}]}, "worker_groups[0].gpus=1.5 is not allowed"),
        ({"worker_groups": [{"replicas": 3, "max_replicas": 2}]}, "min_replicas <= replicas"),
        ({"worker_groups": [{"name": "a"}, {"name": "a"}]}, "give each group its own name"),
        ({"node_selector": ["gpu"]}, "kubernetes.node_selector must be an object"),
        ({"node_selector": {"gpu": 1}}, "kubernetes.node_selector['gpu']=1"),
        ({"tolerations": {"key": "x"}}, "kubernetes.tolerations must be a list"),
        ({"tolerations": [{"operator": "Maybe"}]}, "tolerations[0].operator='Maybe'"),
        ({"tolerations": [{"effect": "Never"}]}, "tolerations[0].effect='Never'"),
        ({"queue": "Team A"}, "Kueue LocalQueue"),
        ({"service_account": "x" * 300}, "kubernetes.service_account="),
        ({"image": "ray image"}, "give an image reference such as rayproject/ray:"),
        ({"replicas": 2}, "Unknown key 'replicas' in kubernetes"),
    ],
)
def test_bad_fields_are_refused_with_the_field_and_the_fix(part: dict[str, Any], says: str) -> None:
    with pytest.raises(OptionsError) as caught:
        KubernetesBackend().validate({"kind": "kubernetes", "kubernetes": part})
    assert says in str(caught.value)


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """The mock API server (no real one can run here) and a kubeconfig pointing at it."""
    with kube_api(tmp_path_factory.mktemp("kube")) as running:
        saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        os.environ["KUBECONFIG"] = str(running.kubeconfig)
        os.environ.pop("KUBERNETES_SERVICE_HOST", None)
        try:
            yield running
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _left(kube: Running) -> dict[str, list[str]]:
    return {p: kube.call(kube.api.names, p) for p in ("rayclusters", "secrets", "pods")}


def _launched(backend: KubernetesBackend, name: str, part: dict[str, Any]) -> dict[str, Any]:
    spec = backend.validate({"kind": "kubernetes", "name": name, "kubernetes": part})
    record: dict[str, Any] = {"id": f"c-{name}", "kind": "kubernetes"}
    record.update(backend.start(spec, record, 60.0))
    return record


def _until(backend: KubernetesBackend, record: dict[str, Any], ready: Any) -> Any:
    """The first observed state that is ``ready``."""

    def observed() -> Any:
        state = backend.state(record)
        return state if ready(state) else None

    return until(observed, "the observed state", deadline_s=30, every_s=0.05)


def test_a_missing_kubeconfig_is_named_and_nothing_is_sent(
    kube: Running, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server is the mock (none can run here): it must see no request at all."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere"))
    before = len(kube.api.requests)
    with pytest.raises(
        ClusterError,
        match=r"No kubeconfig: .*nowhere does not exist\. Set "
        "KUBECONFIG",
    ):
        _launched(KubernetesBackend(), "nocfg", {})
    assert len(kube.api.requests) == before


def test_a_missing_client_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ClusterError, match=r'pip install "eugo_jupyter\[kubernetes\]"'):
        _launched(KubernetesBackend(), "nolib", {})


def test_a_forbidden_namespace_is_a_sentence_and_leaves_nothing(kube: Running) -> None:
    """The mock API server answers 403 as a real one does for a namespace without a Role."""
    kube.api.forbidden.add("locked")
    with pytest.raises(ClusterError) as caught:
        _launched(KubernetesBackend(), "locked", {"namespace": "locked"})
    said = str(caught.value)
    assert "Kubernetes refused to create the token's Secret in namespace 'locked' (403" in said
    assert "Choose a namespace you may use (kubernetes.namespace)" in said
    assert _left(kube) == {"rayclusters": [], "secrets": [], "pods": []}


def test_no_kuberay_is_named_and_the_secret_is_taken_back(kube: Running) -> None:
    """The mock API server answers 404 for rayclusters, as one without KubeRay does (no real
    API server can run here): the Secret made first is deleted again."""
    kube.api.no_kuberay = True
    try:
        with pytest.raises(ClusterError, match=r"the KubeRay operator .* is not installed there"):
            _launched(KubernetesBackend(), "nokuberay", {})
    finally:
        kube.api.no_kuberay = False
    assert _left(kube) == {"rayclusters": [], "secrets": [], "pods": []}


def test_the_mock_refuses_what_the_crd_schema_refuses(kube: Running) -> None:
    """So that every RayCluster the lifecycle tests send (created or patched) is checked
    against KubeRay's schema too, as a real API server with the CRD would (none runs here)."""
    backend = KubernetesBackend()
    spec = backend.validate({"kind": "kubernetes"}).fields
    body = manifest(spec, "eugo-bad")
    body["spec"]["workerGroupSpecs"][0]["replicas"] = "two"
    with pytest.raises(ClusterError, match=r"\(422: RayCluster is invalid: spec\.workerGroupSpecs"):
        backend._kube.raycluster("create the RayCluster", "default", "create", body)
    assert _left(kube)["rayclusters"] == []


def test_a_pod_no_node_can_take_says_why_and_waits(kube: Running) -> None:
    """The operator double leaves the GPU worker Pending/Unschedulable with the scheduler's
    event, as a cluster without free GPUs does (the API server is a mock: none runs here)."""
    kube.api.scenario = "no-gpu"
    backend = KubernetesBackend()
    record = _launched(backend, "gpu", {"worker_groups": [{"replicas": 1, "gpus": 1}]})
    try:
        observed = _until(backend, record, lambda o: o.detail["message"])
        assert observed.waiting and observed.blocked is None
        worker = observed.detail["jobs"][1]
        assert worker["state"] == "Pending"
        assert worker["reason"] == (
            "no node has room for the pod: 2 nodes have too little free nvidia.com/gpu"
        )
    finally:
        kube.api.scenario = "healthy"
        assert backend.stop(record) == []
    assert _left(kube) == {"rayclusters": [], "secrets": [], "pods": []}


def test_an_image_that_cannot_be_pulled_blocks_the_launch(kube: Running) -> None:
    """ErrImagePull from the kubelet (here the operator double's; no API server runs here)."""
    kube.api.scenario = "bad-image"
    backend = KubernetesBackend()
    record = _launched(backend, "pull", {"image": "rayproject/ray:0.0.0-nope", "worker_groups": []})
    try:
        observed = _until(backend, record, lambda o: o.blocked)
        assert observed.blocked.startswith("Pod eugo-pull-head-")
        assert "image pull failed: failed to pull and unpack image" in observed.blocked
        assert "Check kubernetes.image (rayproject/ray:0.0.0-nope)" in observed.blocked
    finally:
        kube.api.scenario = "healthy"
        assert backend.stop(record) == []


@pytest.fixture(scope="module")
def ray_head(kube: Running) -> Iterator[dict[str, int]]:
    """A real Ray head on 127.0.0.1 that the mock head pod's port-forward reaches."""
    with ray_head_behind(kube) as ports:
        yield ports


TASK = """
import sys, ray
ray.init(sys.argv[1], logging_level="ERROR")
print("answer", ray.get(ray.remote(lambda: sum(range(10))).remote()))
"""


async def test_launch_through_rest_runs_a_task_and_shuts_down_clean(
    kube: Running, ray_head: dict[str, int], jp_fetch: Any
) -> None:
    """Through the real Jupyter server: preview, launch, running (the head pod's port-forward
    reaches a real Ray head), a task through the forwarded Ray client port, scale, shut down
    with nothing left. The API server and the operator are the mock's (none can run here)."""
    body = {"kind": "kubernetes", "name": "k8s demo", "kubernetes": {"worker_groups": []}}
    preview = await fetch_json(
        jp_fetch, "eugo", "clusters", "preview", method="POST", body=json.dumps(body)
    )
    assert preview["scripts"][0]["name"] == "eugo-k8s-demo.yaml"
    assert "kind: RayCluster" in preview["scripts"][0]["text"]
    assert _left(kube)["rayclusters"] == []
    model = await fetch_json(jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body))
    assert model["kind"] == "kubernetes" and model["facts"]["label"] == "Kubernetes"
    model = await poll_model(jp_fetch, model["id"], lambda m: m["status"] == "running")
    assert model["address"].startswith("127.0.0.1:")
    assert [n["alive"] for n in model["nodes"]] == [True]
    state = model["kubernetes"]
    assert state["state"] == "ready" and [j["role"] for j in state["jobs"]] == ["head"]
    env = {**os.environ, "RAY_AUTH_MODE": "token"}
    for _attempt in (1, 2):
        ran = subprocess.run(  # noqa: ASYNC221 - the task's answer is the point
            [sys.executable, "-c", TASK, state["client_address"]],
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        # Ray's client proxy starts a server per connection on a port of its fixed 23000-24000
        # range; on a machine shared with other Ray clients the port it checked can be taken
        # before its server binds it ("Starting Ray client server failed"): once more.
        if ran.returncode == 0 or "Starting Ray client server failed" not in ran.stderr:
            break
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "answer 45" in ran.stdout
    assert kube.api.forwarded >= 2  # the GCS reads and the client went through the websocket
    code, said = await error_of(
        jp_fetch, "eugo", "clusters", model["id"], "nodes", method="POST", body="{}"
    )
    assert code == 400 and "no worker group to scale" in said
    response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert _left(kube) == {"rayclusters": [], "secrets": [], "pods": []}
