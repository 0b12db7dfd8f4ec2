"""The `kubernetes` backend: a Ray cluster as a KubeRay `RayCluster` object.

``start`` creates a Secret holding this account's Ray token and the `RayCluster`
(:mod:`.kuberay_manifest` makes both); the KubeRay operator turns it into a head pod and worker
pods. ``state`` reads the object and its pods (:mod:`.kuberay_state`: a pending pod's reason as a
sentence); ``add_node``/``remove_node`` patch a worker group's ``replicas``; ``stop`` deletes the
object and the Secret and waits, on a watch, until the pods are gone.

The API server is reached with the official ``kubernetes`` client (an optional extra,
``pip install "eugo_jupyter[kubernetes]"``, imported by :mod:`.kuberay_client` only), from the
user's kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``) or, inside a pod, the service account.
The head is reached through its Service's DNS name from inside Kubernetes, otherwise through a
port-forward this server holds (:mod:`.kuberay_forward`).

>>> backend = KubernetesBackend()
>>> spec = backend.validate({"kind": "kubernetes", "name": "dev"})
>>> backend.plan(spec).scripts[0]["name"]
'eugo-dev.yaml'
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from traitlets import Float, Unicode

from ..._raytoken import account_token
from ...exceptions import ClusterError, OptionsError
from .. import requests
from .base import Backend, Form, FormField, Observed, Plan, Spec
from .kuberay_client import Client
from .kuberay_forward import Forward
from .kuberay_manifest import (
    FIELDS,
    PORTS,
    KubeSpec,
    head_service,
    manifest,
    parse,
    secret,
    secret_name,
)
from .kuberay_state import cluster_sentence, pod_rows

__all__ = ["KubernetesBackend", "object_name"]


def object_name(name: str) -> str:
    """The `RayCluster`'s name for a display name: ``eugo-`` and a DNS label of it.

    >>> object_name("My run 2")
    'eugo-my-run-2'
    """
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].strip("-")
    return f"eugo-{slug or 'cluster'}"


class KubernetesBackend(Backend):
    """``kind: "kubernetes"``; the record keeps ``kubernetes: {"name", "namespace", "image"}``."""

    kind = "kubernetes"
    label = "Kubernetes"
    node_label = "pod"
    scalable = True
    starts_quickly = True  # two API calls: a refusal (403, no KubeRay) is the request's 400
    stop_effect = (
        "Its RayCluster is deleted: every pod of it stops; running tasks and objects in its "
        "store are lost."
    )
    form_fields = FIELDS
    form = Form(
        (
            FormField("namespace", "Namespace", default="default"),
            FormField("image", "Image", placeholder="rayproject/ray of this server's Ray"),
            FormField("head.cpus", "Head CPUs", "count", 1, low=1),
            FormField("head.memory", "Head memory", default="4Gi"),
            FormField("worker_groups.0.replicas", "Workers", "count", 1, low=0, high=1000),
            FormField("worker_groups.0.cpus", "CPUs per worker", "count", 1, low=1),
            FormField("worker_groups.0.memory", "Memory per worker", default="4Gi"),
            FormField("worker_groups.0.gpus", "GPUs per worker (nvidia.com/gpu)", "count", 0,
                      high=64),
            FormField("queue", "Kueue queue", placeholder="optional (a LocalQueue)"),
            FormField("service_account", "Service account",
                      placeholder="optional (the namespace's default)"),
        ),
        "A KubeRay RayCluster in this namespace (the KubeRay operator must be installed); the "
        "server uses your kubeconfig, or its pod's service account.",
        rank=40,
    )  # fmt: skip

    reach = Unicode(
        "auto",
        help="How the server reaches the head: 'service' (its Service's DNS name, from inside "
        "Kubernetes), 'port-forward' (through the API server), or 'auto' (the service inside a "
        "pod, a port-forward elsewhere).",
    ).tag(config=True)
    stop_timeout = Float(120.0, help="Seconds stop() waits for the pods to go.").tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._forwards: dict[str, Forward] = {}  # cluster id -> the port-forward to its head
        self._forwarding = threading.RLock()
        self._kube = Client()

    # -- the five steps

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "lifetime", "kubernetes"), "a kubernetes launch")
        fields = parse(body.get("kubernetes", {}))
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), "kubernetes"),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=fields,
        )

    def plan(self, spec: Spec) -> Plan:
        import yaml

        fields: KubeSpec = spec.fields
        name = object_name(spec.name)
        text = yaml.safe_dump(manifest(fields, name), sort_keys=False)
        token = yaml.safe_dump(secret(fields, name, "<this account's Ray token>"), sort_keys=False)
        head = fields.head
        gpus = f", {head.gpus} {'GPU' if head.gpus == 1 else 'GPUs'}" if head.gpus else ""
        groups = (
            "; ".join(
                f"{g.name}: {g.replicas} (min {g.min_replicas}, max {g.max_replicas}) of "
                f"{g.cpus:g} CPUs, {g.memory}" + (f", {g.gpus} nvidia.com/gpu" if g.gpus else "")
                for g in fields.worker_groups
            )
            or "no workers"
        )
        return Plan(
            summary=(
                f"A RayCluster {name} in namespace {fields.namespace} (image {fields.image}): "
                f"a head of {head.cpus:g} CPUs, {head.memory}{gpus}; workers {groups}. Ray's "
                f"token authentication is on, its token in the Secret {secret_name(name)}. "
                f"The server reaches the head {self._reach_words(fields)}."
            ),
            scripts=[
                {"name": f"{name}.yaml", "count": 1, "text": text},
                {"name": f"{secret_name(name)}.yaml", "count": 1, "text": token},
            ],
        )

    def _reach_mode(self) -> str:
        if self.reach != "auto":
            return str(self.reach)
        return "service" if os.environ.get("KUBERNETES_SERVICE_HOST") else "port-forward"

    def _reach_words(self, fields: KubeSpec) -> str:
        if self._reach_mode() == "service":
            return f"at its Service {head_service('<name>')}.{fields.namespace}.svc"
        return "through a port-forward it holds (over the API server's websocket)"

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        fields: KubeSpec = spec.fields
        name, ns = object_name(spec.name), fields.namespace
        self._kube.api()
        token = account_token()  # for the cluster's Secret
        body = manifest(fields, name, str(record.get("id") or ""))
        self._kube.call(
            "create the token's Secret",
            ns,
            "core",
            "create_namespaced_secret",
            ns,
            secret(fields, name, token),
        )
        try:
            self._kube.raycluster("create the RayCluster", ns, "create", body)
        except ClusterError:
            self._delete_secret(ns, name)
            raise
        return {"kubernetes": {"name": name, "namespace": ns, "image": fields.image}}

    def state(self, record: dict[str, Any]) -> Observed:
        own = record.get("kubernetes") or {}
        if not own:
            return Observed(ended="The cluster's record names no RayCluster.")
        obj = self._kube.cluster(record["kubernetes"])
        if obj is None:
            self._unforward(record)
            return Observed(
                ended=(
                    f"The RayCluster {own['name']} in namespace {own['namespace']} is gone "
                    "(deleted outside the Manager)."
                )
            )
        pods = self._kube.pods(own).get("items") or []
        events: list[dict[str, Any]] = []
        if any((p.get("status") or {}).get("phase") != "Running" for p in pods):
            events = (
                self._kube.call(
                    "read the pods' events",
                    own["namespace"],
                    "core",
                    "list_namespaced_event",
                    own["namespace"],
                    field_selector="involvedObject.kind=Pod",
                ).get("items")
                or []
            )
        rows, sentences, stuck = pod_rows(pods, events, str(own.get("image")))
        said, queued = cluster_sentence(obj)
        groups = (obj.get("spec") or {}).get("workerGroupSpecs") or []
        observed = Observed(
            nodes_expected=1 + sum(int(g.get("replicas") or 0) for g in groups),
            waiting=queued or (bool(sentences) and not stuck),
        )
        head = next((p for p in pods if _is_ready_head(p)), None)
        if head is not None:
            observed.address, observed.dashboard_url, client = self._reach(record, head)
        else:
            self._unforward(record)
            client = None
        if stuck:
            observed.blocked = " ".join(sentences) + " Shut this cluster down and launch again."
        observed.detail = {
            "name": own["name"],
            "namespace": own["namespace"],
            "state": (obj.get("status") or {}).get("state") or "pending",
            "message": said or (" ".join(sentences) or None),
            "client_address": client,
            "jobs": rows,
        }
        return observed

    def _reach(self, record: dict[str, Any], head: dict[str, Any]) -> tuple[str, str, str]:
        own = record["kubernetes"]
        if self._reach_mode() == "service":
            host = f"{head_service(own['name'])}.{own['namespace']}.svc"
            return (
                f"{host}:{PORTS['gcs-server']}",
                f"http://{host}:{PORTS['dashboard']}",
                f"ray://{host}:{PORTS['client']}",
            )
        key, pod = str(record["id"]), head["metadata"]["name"]
        with self._forwarding:  # state() may run in two threads at once
            fwd = self._forwards.get(key)
            if fwd is None or fwd.closed or fwd.name != pod:  # a new head pod: a new forward
                self._unforward(record)
                fwd = self._forwards[key] = self._kube.forward(own["namespace"], pod)
        return (
            f"127.0.0.1:{fwd.local(PORTS['gcs-server'])}",
            f"http://127.0.0.1:{fwd.local(PORTS['dashboard'])}",
            f"ray://127.0.0.1:{fwd.local(PORTS['client'])}",
        )

    def _unforward(self, record: dict[str, Any]) -> None:
        with self._forwarding:
            fwd = self._forwards.pop(str(record.get("id")), None)
        if fwd is not None:
            fwd.close()

    def add_node(self, record: dict[str, Any]) -> dict[str, Any]:
        return self._scale(record, None)

    def remove_node(self, record: dict[str, Any], node: str) -> dict[str, Any]:
        return self._scale(record, node)

    def _scale(self, record: dict[str, Any], remove: str | None) -> dict[str, Any]:
        own = record["kubernetes"]
        obj = self._kube.cluster(record["kubernetes"])
        if obj is None:
            raise ClusterError(f"The RayCluster {own['name']} is gone; nothing to scale.")
        groups = [dict(g) for g in obj["spec"].get("workerGroupSpecs") or []]
        if not groups:
            raise OptionsError("This cluster has no worker group to scale; launch one with one.")
        if remove is None:
            group = groups[0]
            group["replicas"] = int(group.get("replicas") or 0) + 1
            group["maxReplicas"] = max(int(group.get("maxReplicas") or 0), group["replicas"])
        else:
            pods = self._kube.pods(own).get("items") or []
            labels = {p["metadata"]["name"]: p["metadata"].get("labels") or {} for p in pods}
            mine = labels.get(remove, {})
            found: dict[str, Any] | None = next(
                (
                    g
                    for g in groups
                    if mine.get("ray.io/node-type") == "worker"
                    and g.get("groupName") == mine.get("ray.io/group")
                ),
                None,
            )
            if found is None:
                raise OptionsError(f"node={remove!r} is not a worker pod of this cluster.")
            group = found
            group["replicas"] = max(int(group.get("replicas") or 0) - 1, 0)
            group["minReplicas"] = min(int(group.get("minReplicas") or 0), group["replicas"])
            group["scaleStrategy"] = {"workersToDelete": [remove]}
        self._kube.raycluster(
            "scale the RayCluster",
            own["namespace"],
            "patch",
            own["name"],
            {"spec": {"workerGroupSpecs": groups}},
        )
        return {}

    def stop(self, record: dict[str, Any]) -> list[str]:
        own = record.get("kubernetes") or {}
        self._unforward(record)
        if not own:
            return []
        ns, name = own["namespace"], own["name"]
        try:
            kube = self._kube
            kube.unless_gone(kube.raycluster, "delete the RayCluster", ns, "delete", name)
            self._delete_secret(ns, name)
            return self._kube.wait_gone(own, self.stop_timeout)
        except ClusterError as exc:
            return [f"RayCluster {name} in namespace {ns}: {exc}"]

    def _delete_secret(self, ns: str, name: str) -> None:
        """Delete the cluster's token Secret; one already gone is fine."""
        self._kube.unless_gone(
            self._kube.call, "delete the token's Secret", ns, "core", "delete_namespaced_secret",
            secret_name(name), ns,
        )  # fmt: skip

    def adopt(self, record: dict[str, Any]) -> str | None:
        if not record.get("kubernetes"):
            return None
        try:
            return "starting" if self._kube.cluster(record["kubernetes"]) is not None else None
        except ClusterError:
            return "starting"  # the API server is away for now: keep the record


def _is_ready_head(pod: dict[str, Any]) -> bool:
    labels = pod["metadata"].get("labels") or {}
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return labels.get("ray.io/node-type") == "head" and status.get("phase") == "Running" and ready
