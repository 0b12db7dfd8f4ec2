"""The REST contract without a cluster: bad input gets 400 with a sentence, unknown ids 404,
requests without credentials 403."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.fixtures.jupyter import error_of


async def test_no_clusters_at_first(jp_fetch: Any) -> None:
    response = await jp_fetch("eugo", "clusters")
    assert response.code == 200
    assert json.loads(response.body) == []


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"kind": "local", "head": {"num_cpus": -1}}, "head.num_cpus=-1 is out of range"),
        ({"kind": "local", "head": {"num_cpus": "two"}}, "give a whole number from 0 to 1024"),
        ({"kind": "local", "head": {"num_gpus": 1.5}}, "head.num_gpus=1.5 is not allowed"),
        ({"kind": "local", "head": {"num_cpus": 1, "cores": 2}}, "Unknown key 'cores' in head"),
        ({"kind": "local", "bogus": 1}, "Unknown key 'bogus'"),
        ({"kind": "local", "name": "../etc/passwd"}, "name='../etc/passwd' is not allowed"),
        ({"kind": "local", "workers": {"num_cpus": 1}}, "workers must be a list"),
        ({"kind": "local", "workers": [{"num_cpus": 0}]}, "workers[0] offers nothing"),
        ({"kind": "local", "workers": [{"num_cpus": 1}] * 33}, "at most 32"),
        ({"kind": "local", "lifetime": "forever"}, "lifetime='forever' is not allowed"),
        ({"kind": "local", "head": {"memory": "lots"}}, "head.memory='lots' is not allowed"),
        ({"kind": "connect", "address": "not an address"}, "give host:port of the head's GCS"),
        ({"kind": "connect", "address": "10.0.0.5:99999"}, "is not allowed"),
        ({"kind": "connect"}, "address=None is not allowed"),
        ({"kind": "teleport"}, "kind='teleport' is not allowed"),
        (["local"], "must be a JSON object"),
    ],
)
async def test_bad_input_is_400_with_a_message(jp_fetch: Any, body: object, says: str) -> None:
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body)
    )
    assert code == 400
    assert says in message


async def test_body_that_is_not_json_is_400(jp_fetch: Any) -> None:
    code, message = await error_of(jp_fetch, "eugo", "clusters", method="POST", body="{kind: local")
    assert code == 400
    assert "not JSON" in message


async def test_unreachable_address_is_a_clear_400(jp_fetch: Any) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    body = json.dumps({"kind": "connect", "address": f"127.0.0.1:{port}"})
    code, message = await error_of(jp_fetch, "eugo", "clusters", method="POST", body=body)
    assert code == 400
    assert f"No Ray cluster answers at 127.0.0.1:{port}" in message
    assert json.loads((await jp_fetch("eugo", "clusters")).body) == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", ("eugo", "clusters", "c-nothere"), None),
        ("DELETE", ("eugo", "clusters", "c-nothere"), None),
        ("POST", ("eugo", "clusters", "c-nothere", "activate"), "{}"),
    ],
)
async def test_unknown_id_is_404(
    jp_fetch: Any, method: str, path: tuple[str, ...], body: str | None
) -> None:
    code, message = await error_of(
        jp_fetch, *path, method=method, **({"body": body} if body else {})
    )
    assert code == 404
    assert "No cluster with id 'c-nothere'" in message


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", ("eugo", "clusters"), None),
        ("POST", ("eugo", "clusters"), json.dumps({"kind": "local"})),
        ("GET", ("eugo", "clusters", "c-1"), None),
        ("DELETE", ("eugo", "clusters", "c-1"), None),
        ("POST", ("eugo", "clusters", "c-1", "activate"), "{}"),
        ("POST", ("eugo", "clusters", "preview"), json.dumps({"kind": "local"})),
        ("GET", ("eugo", "profiles"), None),
        ("POST", ("eugo", "clusters", "c-1", "nodes"), "{}"),
        ("DELETE", ("eugo", "clusters", "c-1", "nodes", "12"), None),
    ],
)
async def test_no_credentials_is_403(
    jp_fetch: Any, method: str, path: tuple[str, ...], body: str | None
) -> None:
    code, _ = await error_of(
        jp_fetch,
        *path,
        method=method,
        headers={"Authorization": ""},
        **({"body": body} if body else {}),
    )
    assert code == 403
    # and nothing was launched by the refused POST
    assert json.loads((await jp_fetch("eugo", "clusters")).body) == []


async def test_preview_is_routed_before_cluster_ids_and_starts_nothing(jp_fetch: Any) -> None:
    body = {"kind": "local", "head": {"num_cpus": 2}, "workers": [{"num_cpus": 1}]}
    response = await jp_fetch("eugo", "clusters", "preview", method="POST", body=json.dumps(body))
    plan = json.loads(response.body)
    assert plan["summary"] == "A head with 2 CPUs and a worker with 1 CPU on this machine."
    assert json.loads((await jp_fetch("eugo", "clusters")).body) == []
    code, _ = await error_of(jp_fetch, "eugo", "clusters", "preview")
    assert code == 405  # "preview" is never read as a cluster id
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", "preview", method="POST", body=json.dumps({"kind": "x"})
    )
    assert code == 400 and "kind='x' is not allowed" in message


async def test_no_profiles_unless_configured(jp_fetch: Any) -> None:
    assert json.loads((await jp_fetch("eugo", "profiles")).body) == []


async def test_adding_a_node_to_an_unknown_id_is_404(jp_fetch: Any) -> None:
    code, message = await error_of(
        jp_fetch, "eugo", "clusters", "c-nothere", "nodes", method="POST", body="{}"
    )
    assert code == 404 and "No cluster with id 'c-nothere'" in message


async def test_kinds_serve_each_launch_form_the_panel_renders(jp_fetch: Any) -> None:
    """The panel has no table of its own: the forms, their order and limits come from here."""
    kinds = json.loads((await jp_fetch("eugo", "kinds")).body)
    forms = {kind: k["form"] for kind, k in kinds.items() if k["form"]}
    order = sorted(forms, key=lambda kind: forms[kind]["rank"])
    assert order[:3] == ["local", "slurm", "gridengine"] and "pbs" not in kinds
    assert forms["local"]["widget"] == "nodes" and kinds["ssh"]["form"] is None
    slurm = {f["key"]: f for f in forms["slurm"]["fields"]}
    assert slurm["nodes"] == {"key": "nodes", "label": "Nodes", "type": "count", "default": 2,
                              "min": 1, "max": 256}  # fmt: skip
    assert slurm["extra"]["label"] == "Extra #SBATCH lines"
    assert forms["slurm"]["hint"].startswith("The Ray head runs in a SLURM job of its own")
    kube = [f["key"] for f in forms["kubernetes"]["fields"]]
    assert "worker_groups.0.replicas" in kube  # nested in the body by the panel
