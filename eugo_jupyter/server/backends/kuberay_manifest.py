"""The `kubernetes` backend's spec and the `RayCluster` manifest made from it (KubeRay).

:func:`parse` checks the ``"kubernetes"`` part of a launch body; :func:`manifest` turns the
checked spec into the exact ``RayCluster`` object the backend creates (``ray.io/v1``, as KubeRay
1.5.1 and later read it: ``authOptions`` turns Ray's token authentication on with the token of a
Secret the manifest names). Nothing here talks to Kubernetes or imports a client library.

>>> spec = parse({"namespace": "ml", "worker_groups": [{"replicas": 2, "gpus": 1}]})
>>> body = manifest(spec, "eugo-c-1")
>>> body["spec"]["workerGroupSpecs"][0]["replicas"], body["spec"]["authOptions"]["mode"]
(2, 'token')
>>> body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"][
...     "limits"]["nvidia.com/gpu"]
'1'
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from ...exceptions import OptionsError
from .. import requests

__all__ = [
    "FIELDS",
    "GroupSpec",
    "KubeSpec",
    "default_image",
    "head_service",
    "manifest",
    "parse",
    "secret_name",
]

#: The keys of the body's ``"kubernetes"`` part.
FIELDS = (
    "namespace",
    "image",
    "head",
    "worker_groups",
    "queue",
    "service_account",
    "node_selector",
    "tolerations",
)
_GROUP_KEYS = ("name", "replicas", "min_replicas", "max_replicas", "cpus", "memory", "gpus")
_HEAD_KEYS = ("cpus", "memory", "gpus")
#: A DNS-1123 label: namespaces, group names, service accounts (RFC 1123, at most 63).
_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
#: A Kubernetes quantity as pods' resources take it ("4Gi", "512Mi", "8G", "1.5Gi").
_QUANTITY_RE = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
_IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
#: A label key ("kubernetes.io/arch", "gpu") and value, as node selectors take them.
_LABEL_KEY_RE = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: The ports of the head pod: Ray's defaults, which the head service exposes.
PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}
GPU = "nvidia.com/gpu"
MANAGED_BY = "eugo-jupyter"


@dataclass(frozen=True)
class GroupSpec:
    """The head's or one worker group's pods: each has ``cpus``, ``memory``, ``gpus``."""

    name: str = "head"
    cpus: float = 1
    memory: str = "4Gi"
    gpus: int = 0
    replicas: int = 1
    min_replicas: int = 1
    max_replicas: int = 1


@dataclass(frozen=True)
class KubeSpec:
    namespace: str
    image: str
    head: GroupSpec
    worker_groups: tuple[GroupSpec, ...] = ()
    queue: str | None = None
    service_account: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()

    def to_model(self) -> dict[str, Any]:
        model = asdict(self)
        model["worker_groups"] = [asdict(g) for g in self.worker_groups]
        model["tolerations"] = list(self.tolerations)
        return model


def default_image(gpu: bool = False) -> str:
    """The ``rayproject/ray`` image of the installed Ray and Python (``-gpu``: with CUDA).

    >>> default_image().startswith("rayproject/ray:")
    True
    """
    version = metadata.version("ray")
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    return f"rayproject/ray:{version}-{py}{'-gpu' if gpu else ''}"


def secret_name(cluster: str) -> str:
    """The Secret holding the cluster's Ray token (key ``auth_token``, as KubeRay reads it)."""
    return f"{cluster}-ray-token"


def head_service(cluster: str) -> str:
    """The head's Service, as KubeRay names it (``<cluster>-head-svc``)."""
    return f"{cluster}-head-svc"


def _cpus(value: Any, where: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not 0.001 <= value <= 4096 or round(value * 1000) != value * 1000:
        raise OptionsError(
            f"{where}.cpus={value!r} is not allowed: give a number of CPUs from 0.001 to 4096 "
            "(at most three decimals, as Kubernetes counts millicores), for example 2 or 0.5."
        )
    return float(value)


def _memory(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    if (
        not isinstance(value, str)
        or not _QUANTITY_RE.fullmatch(value)
        or float(re.sub(r"[A-Za-z]+$", "", value)) <= 0
    ):
        raise OptionsError(
            f"{where}.memory={value!r} is not allowed: give a Kubernetes quantity such as "
            '"4Gi", "512Mi" or "8G" (or a number of bytes).'
        )
    return value


def _group(value: Any, where: str, head: bool, index: int = 0) -> GroupSpec:
    example = '{"cpus": 2, "memory": "8Gi", "gpus": 0}'
    given = requests.mapping(value, where, example if head else '{"replicas": 2, "cpus": 2}')
    requests.keys(given, _HEAD_KEYS if head else _GROUP_KEYS, where)
    cpus = _cpus(given.get("cpus", 1), where)
    memory = _memory(given.get("memory", "4Gi"), where)
    gpus = requests.count(given.get("gpus", 0), "gpus", where, 0, 64)
    if head:
        return GroupSpec("head", cpus, memory, gpus)
    name = given.get("name", f"workers-{index}" if index else "workers")
    requests.text(
        name,
        "name",
        where,
        _LABEL_RE,
        "give a lowercase name of letters, digits and "
        "'-' (a DNS label, at most 63 characters), such as gpu-workers",
    )
    replicas = requests.count(given.get("replicas", 1), "replicas", where, 0, 1000)
    low = requests.count(given.get("min_replicas", replicas), "min_replicas", where, 0, 1000)
    high = requests.count(
        given.get("max_replicas", max(replicas, low)), "max_replicas", where, 0, 1000
    )
    if not low <= replicas <= high:
        raise OptionsError(
            f"{where}: min_replicas={low}, replicas={replicas}, max_replicas={high} do not hold "
            "min_replicas <= replicas <= max_replicas; change them so they do (leave min and max "
            "out for a fixed size)."
        )
    return GroupSpec(name, cpus, memory, gpus, replicas, low, high)


def _node_selector(value: Any) -> dict[str, str]:
    where = "kubernetes.node_selector"
    given = requests.mapping(value, where, '{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}')
    for key, label in given.items():
        if (
            not _LABEL_KEY_RE.fullmatch(key)
            or not isinstance(label, str)
            or not (_LABEL_VALUE_RE.fullmatch(label))
        ):
            raise OptionsError(
                f"{where}[{key!r}]={label!r} is not allowed: give node label keys (an optional "
                "DNS prefix and '/', then a name) and string values of at most 63 letters, "
                "digits, '-', '_' or '.'."
            )
    return dict(given)


def _tolerations(value: Any) -> tuple[dict[str, Any], ...]:
    where = "kubernetes.tolerations"
    if not isinstance(value, list):
        raise OptionsError(
            f"{where} must be a list such as "
            '[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], '
            f"not {value!r}."
        )
    out = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        item = requests.mapping(item, at, '{"key": "gpu", "operator": "Exists"}')
        requests.keys(item, _TOLERATION_KEYS, at)
        operator = item.get("operator", "Equal")
        if operator not in ("Equal", "Exists"):
            raise OptionsError(f'{at}.operator={operator!r} is not allowed: "Equal" or "Exists".')
        if "effect" in item and item["effect"] not in _EFFECTS:
            raise OptionsError(
                f"{at}.effect={item['effect']!r} is not allowed: one of {', '.join(_EFFECTS)}."
            )
        for key in ("key", "value"):
            if key in item and not isinstance(item[key], str):
                raise OptionsError(f"{at}.{key}={item[key]!r} is not allowed: give a string.")
        if operator == "Exists" and item.get("value"):
            raise OptionsError(f'{at}: operator "Exists" takes no value; leave value out.')
        if "tolerationSeconds" in item:
            requests.count(item["tolerationSeconds"], "tolerationSeconds", at, 0, 10**9)
        out.append(dict(item))
    return tuple(out)


def parse(given: Any) -> KubeSpec:
    """Check the body's ``"kubernetes"`` part (OptionsError names the field and the fix)."""
    where = "kubernetes"
    given = requests.mapping(
        given, where, '{"namespace": "default", "worker_groups": [{"replicas": 2}]}'
    )
    requests.keys(given, FIELDS, where)
    namespace = requests.text(
        given.get("namespace", "default"),
        "namespace",
        where,
        _LABEL_RE,
        "give an existing namespace's name (lowercase letters, digits and "
        "'-', at most 63 characters)",
    )
    head = _group(given.get("head", {}), f"{where}.head", head=True)
    raw_groups = given.get("worker_groups", [{"replicas": 1}])
    if not isinstance(raw_groups, list) or len(raw_groups) > 16:
        raise OptionsError(
            f"{where}.worker_groups must be a list of at most 16 groups such as "
            f'[{{"replicas": 2, "cpus": 2, "memory": "8Gi"}}], not {raw_groups!r}.'
        )
    groups = tuple(
        _group(g, f"{where}.worker_groups[{i}]", False, i) for i, g in enumerate(raw_groups)
    )
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise OptionsError(
            f"{where}.worker_groups: the group names {names} repeat; give each group its own name."
        )
    gpu = any(g.gpus for g in (head, *groups))
    image = given.get("image") or default_image(gpu)
    requests.text(
        image,
        "image",
        where,
        _IMAGE_RE,
        "give an image reference such as "
        f"{default_image(gpu)} (its Ray must be the same version as this server's)",
    )
    queue = given.get("queue")
    if queue is not None:
        requests.text(
            queue,
            "queue",
            where,
            _LABEL_RE,
            "give the name of a Kueue LocalQueue in "
            "the namespace (lowercase letters, digits and '-'), or leave it out",
        )
    account = given.get("service_account")
    if account is not None:
        requests.text(
            account,
            "service_account",
            where,
            _SUBDOMAIN_RE,
            "give the name of a service account in the namespace, or leave it out",
        )
    return KubeSpec(
        namespace=namespace,
        image=image,
        head=head,
        worker_groups=groups,
        queue=queue,
        service_account=account,
        node_selector=_node_selector(given.get("node_selector", {})),
        tolerations=_tolerations(given.get("tolerations", [])),
    )


def _millicores(cpus: float) -> str:
    return str(int(cpus)) if float(cpus).is_integer() else f"{round(cpus * 1000)}m"


def _template(spec: KubeSpec, group: GroupSpec, container: str, ports: bool) -> dict[str, Any]:
    amounts = {"cpu": _millicores(group.cpus), "memory": group.memory}
    if group.gpus:
        amounts[GPU] = str(group.gpus)
    box: dict[str, Any] = {
        "name": container,
        "image": spec.image,
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
    }
    if ports:
        box["ports"] = [{"name": n, "containerPort": p} for n, p in PORTS.items()]
    pod: dict[str, Any] = {"containers": [box]}
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    if spec.node_selector:
        pod["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        pod["tolerations"] = [dict(t) for t in spec.tolerations]
    return {"spec": pod}


def manifest(spec: KubeSpec, cluster: str, cluster_id: str | None = None) -> dict[str, Any]:
    """The ``RayCluster`` object for ``spec``, named ``cluster`` (a DNS label)."""
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY}
    if cluster_id:
        labels["eugo.io/cluster-id"] = cluster_id
    if spec.queue:
        labels["kueue.x-k8s.io/queue-name"] = spec.queue
    autoscale = any(g.min_replicas != g.max_replicas for g in spec.worker_groups)
    body: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": cluster, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "rayVersion": metadata.version("ray"),
            "enableInTreeAutoscaling": autoscale,
            "authOptions": {"mode": "token", "secretName": secret_name(cluster)},
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": _template(spec, spec.head, "ray-head", ports=True),
            },
            "workerGroupSpecs": [
                {
                    "groupName": g.name,
                    "replicas": g.replicas,
                    "minReplicas": g.min_replicas,
                    "maxReplicas": g.max_replicas,
                    "rayStartParams": {},
                    "template": _template(spec, g, "ray-worker", ports=False),
                }
                for g in spec.worker_groups
            ],
        },
    }
    return body


def secret(spec: KubeSpec, cluster: str, token: str) -> dict[str, Any]:
    """The Secret holding the Ray token that ``authOptions.secretName`` names."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(cluster),
            "namespace": spec.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, "ray.io/cluster": cluster},
        },
        "type": "Opaque",
        "stringData": {"auth_token": token},
    }
