"""The `kubernetes` backend's calls to the Kubernetes API server (the official client).

The client library is an optional extra, imported here only: without it every call says
``pip install "eugo_jupyter[kubernetes]"``. :meth:`Client.api` loads the user's kubeconfig
(``$KUBECONFIG``, else ``~/.kube/config``) or, inside a pod, its service account. Answers are read
as plain JSON (``_preload_content=False``), so the code that reads them (:mod:`.kuberay_state`)
needs no client; a refusal becomes a :class:`~eugo_jupyter.exceptions.ClusterError` sentence that
names the namespace and the fix (403: a Role; 404 on create: KubeRay is not installed).

>>> Client().call  # doctest: +ELLIPSIS
<bound method Client.call of ...>
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...exceptions import ClusterError
from .kuberay_forward import Forward
from .kuberay_manifest import PORTS

__all__ = ["GROUP", "INSTALL", "PLURAL", "VERSION", "Client"]

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayclusters"
INSTALL = 'pip install "eugo_jupyter[kubernetes]"'


class Client:
    """One API server connection, made at the first call and kept."""

    def __init__(self) -> None:
        self._client: Any = None

    def api(self) -> Any:
        """An ``ApiClient`` from the kubeconfig or the in-cluster service account."""
        try:
            import kubernetes  # noqa: F401
            from kubernetes import client, config
        except ImportError:
            raise ClusterError(
                "The kubernetes kind needs the Kubernetes client library, which is not "
                f"installed: {INSTALL}, then restart the Jupyter server."
            ) from None
        if self._client is not None:
            return self._client
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            configuration = client.Configuration()
            try:
                config.load_incluster_config(client_configuration=configuration)
            except config.ConfigException as exc:
                raise ClusterError(
                    f"This server runs in a pod but cannot use its service account ({exc}). "
                    "Mount the service account token (automountServiceAccountToken), or give "
                    "a kubeconfig in KUBECONFIG."
                ) from None
            self._client = client.ApiClient(configuration)
            return self._client
        path = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        files = [p for p in path.split(os.pathsep) if p]
        if not any(Path(p).expanduser().is_file() for p in files):
            raise ClusterError(
                f"No kubeconfig: {path} does not exist. Set KUBECONFIG to your cluster's "
                "kubeconfig file (or write it to ~/.kube/config, e.g. from your provider's "
                "`get-credentials` command), then launch again."
            )
        try:
            self._client = config.new_client_from_config(config_file=path)
        except config.ConfigException as exc:
            raise ClusterError(
                f"The kubeconfig {path} cannot be used: {exc}. Fix it (`kubectl config view` "
                "shows it) or point KUBECONFIG at another one."
            ) from None
        return self._client

    def call(
        self, what: str, namespace: str, api: str, method: str, *args: Any, **kwargs: Any
    ) -> Any:
        """One API call (``api``: "core" or "custom"); its JSON, or a ClusterError sentence."""
        from kubernetes import client

        target = client.CoreV1Api if api == "core" else client.CustomObjectsApi
        call = getattr(target(self.api()), method)
        try:
            resp = call(*args, _preload_content=False, **kwargs)
        except client.ApiException as exc:
            raise _api_error(exc, what, namespace) from None
        except Exception as exc:  # noqa: BLE001 - urllib3's connection errors, TLS
            host = self.api().configuration.host
            raise ClusterError(
                f"The Kubernetes API server at {host} does not answer ({type(exc).__name__}: "
                f"{str(exc)[:200]}). Check the kubeconfig's server and your network."
            ) from None
        data = resp.data
        return json.loads(data) if data else {}

    def raycluster(self, what: str, namespace: str, verb: str, *args: Any) -> Any:
        """One call on RayClusters (``verb``: "create", "get", "patch" or "delete")."""
        method = f"{verb}_namespaced_custom_object"
        return self.call(
            what, namespace, "custom", method, GROUP, VERSION, namespace, PLURAL, *args
        )

    @staticmethod
    def unless_gone(call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)``'s answer; None when the object was already gone (404)."""
        try:
            return call(*args)
        except ClusterError as exc:
            if getattr(exc, "status", None) == 404:
                return None
            raise

    def cluster(self, own: dict[str, Any]) -> dict[str, Any] | None:
        """The `RayCluster` ``own`` names (``{"name", "namespace"}``), None once it is gone."""
        found = self.unless_gone(
            self.raycluster, "read the RayCluster", own["namespace"], "get", own["name"]
        )
        return None if found is None else dict(found)

    def pods(self, own: dict[str, Any]) -> dict[str, Any]:
        """The cluster's pods (KubeRay labels each with ``ray.io/cluster``), as a list."""
        return dict(
            self.call(
                "list the cluster's pods",
                own["namespace"],
                "core",
                "list_namespaced_pod",
                own["namespace"],
                label_selector=f"ray.io/cluster={own['name']}",
            )
        )

    def forward(self, namespace: str, pod: str) -> Forward:
        """Local ports to the pod's Ray ports, through the API server's port-forward."""
        from kubernetes import client
        from kubernetes.stream import portforward

        configuration = self.api().configuration

        def open_stream(port: int) -> Any:
            # An ApiClient of its own: the client library's stream swaps its client's call_api
            # while it opens, so a call of another thread on a shared client (the server's reads
            # go on meanwhile) went out as a port-forward ("Missing required parameter `ports`").
            core = client.CoreV1Api(client.ApiClient(configuration))
            return portforward(
                core.connect_get_namespaced_pod_portforward, pod, namespace, ports=str(port)
            )

        return Forward(open_stream, tuple(PORTS.values()), name=pod)

    def wait_gone(self, own: dict[str, Any], timeout: float) -> list[str]:
        """Wait on a pod watch until no pod of the cluster is left; returns those left."""
        from kubernetes import client, watch

        listed = self.pods(own)
        left = {p["metadata"]["name"] for p in listed.get("items") or []}
        deadline = time.monotonic() + timeout
        version = (listed.get("metadata") or {}).get("resourceVersion")
        core = client.CoreV1Api(self.api())
        while left and time.monotonic() < deadline:
            stream = watch.Watch()
            wait = max(1, int(deadline - time.monotonic()))
            try:
                for event in stream.stream(
                    core.list_namespaced_pod,
                    own["namespace"],
                    label_selector=f"ray.io/cluster={own['name']}",
                    resource_version=version,
                    timeout_seconds=wait,
                ):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    if event["type"] == "DELETED":
                        left.discard(pod.metadata.name)
                    if not left:
                        break
            except client.ApiException as exc:
                if exc.status != 410:  # 410: the version expired; list again
                    raise _api_error(exc, "watch the pods", own["namespace"]) from None
                listed = self.pods(own)
                left = {p["metadata"]["name"] for p in listed.get("items") or []}
                version = (listed.get("metadata") or {}).get("resourceVersion")
            finally:
                stream.stop()
        return [f"pod {p} (namespace {own['namespace']})" for p in sorted(left)]


class _ApiError(ClusterError):
    """An API refusal as a sentence, with its HTTP status (404: gone)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _api_error(exc: Any, what: str, namespace: str) -> ClusterError:
    status = int(getattr(exc, "status", 0) or 0)
    try:
        message = json.loads(exc.body).get("message") or exc.reason
    except Exception:  # noqa: BLE001 - a body that is not a Status object
        message = getattr(exc, "reason", "") or str(exc)
    if status in (401, 403):
        return _ApiError(
            f"Kubernetes refused to {what} in namespace {namespace!r} ({status}: {message}). "
            "Choose a namespace you may use (kubernetes.namespace), or ask for a Role there "
            "that allows rayclusters.ray.io, pods, events and secrets.",
            status,
        )
    if status == 404 and "RayCluster" in what and "create" in what:
        return _ApiError(
            f"Kubernetes cannot {what} in namespace {namespace!r} (404: {message}): the "
            "KubeRay operator (its RayCluster resource, ray.io/v1) is not installed there, or "
            "the namespace does not exist. Install KubeRay 1.5.1 or later, or pick another "
            "namespace.",
            status,
        )
    if status == 409:
        return _ApiError(
            f"Kubernetes cannot {what} in namespace {namespace!r}: {message}. Give the "
            "cluster another name, or shut the other one down.",
            status,
        )
    return _ApiError(
        f"Kubernetes could not {what} in namespace {namespace!r} ({status}: {message}).", status
    )
