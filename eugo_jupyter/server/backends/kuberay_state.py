"""What a `RayCluster` and its pods say, as the card's rows and sentences (no client here).

:func:`pod_rows` turns the pods (their phase, conditions and container states, and the
scheduler's events about them) into the rows the card's job table shows, each pending or failed
one with its reason as a sentence; :func:`cluster_sentence` reads the `RayCluster`'s own status
and conditions (KubeRay's documented ``ready``/``failed``/``suspended`` states and its
``HeadPodReady``, ``ReplicaFailure`` and ``RayClusterSuspended`` conditions).

>>> unschedulable("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
'no node has room for the pod: 2 nodes have too little free nvidia.com/gpu'
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["cluster_sentence", "failure", "pod_rows", "unschedulable"]

_ITEM_RE = re.compile(r"(\d+) (.+)")
_INSUFFICIENT_RE = re.compile(r"Insufficient (\S+)")
#: Image pull failures, as the kubelet names a waiting container's reason.
_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
_CRASH = (
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)


def _nodes(n: int) -> str:
    return f"{n} node{'s' if n != 1 else ''} {'has' if n == 1 else 'have'}"


def unschedulable(message: str) -> str:
    """The scheduler's "0/3 nodes are available: ..." as a sentence's part."""
    _, _, items = message.partition(":")
    parts = []
    for item in re.split(r",\s*", items.strip().rstrip(".")):
        match = _ITEM_RE.fullmatch(item.strip())
        if not match:
            continue
        n, what = int(match.group(1)), match.group(2)
        insufficient = _INSUFFICIENT_RE.fullmatch(what)
        if insufficient:
            parts.append(f"{_nodes(n)} too little free {insufficient.group(1)}")
        elif "untolerated taint" in what:
            taint = what.partition("taint")[2].strip() or "a taint"
            parts.append(
                f"{_nodes(n)} a taint the pod does not tolerate ({taint}): add a "
                "toleration, or leave those nodes"
            )
        elif "node affinity/selector" in what or "node selector" in what:
            parts.append(f"{_nodes(n)} labels that do not match the node selector")
        else:
            parts.append(f"{n} node{'s' if n != 1 else ''}: {what}")
    if not parts:
        return message.strip().rstrip(".") or "the scheduler found no node for it"
    return "no node has room for the pod: " + "; ".join(parts)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def failure(pod: dict[str, Any], events: list[dict[str, Any]], image: str) -> tuple[str, bool]:
    """Why a pod is not running: (a sentence, True when it will not start as asked)."""
    status = pod.get("status") or {}
    for box in status.get("containerStatuses") or []:
        waiting = (box.get("state") or {}).get("waiting") or {}
        reason, detail = waiting.get("reason", ""), waiting.get("message", "")
        if reason in _PULL:
            return (
                f"image pull failed: {detail or reason}. Check kubernetes.image ({image}): "
                "the tag must exist and the nodes must reach its registry",
                True,
            )
        if reason in _CRASH:
            return f"its container does not start ({reason}: {detail or 'see its logs'})", True
        terminated = (box.get("state") or {}).get("terminated") or {}
        if terminated and status.get("phase") == "Failed":
            return (
                f"its container ended ({terminated.get('reason', 'Error')}, exit code "
                f"{terminated.get('exitCode', '?')})",
                True,
            )
    if status.get("phase") == "Failed":
        return f"it failed ({status.get('reason') or status.get('message') or 'no reason'})", True
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False":
        message = str(scheduled.get("message") or "")
        if not message:
            message = next(
                (
                    str(e.get("message", ""))
                    for e in reversed(events)
                    if e.get("reason") == "FailedScheduling"
                ),
                "",
            )
        return unschedulable(message), False
    return "starting", False


def pod_rows(
    pods: list[dict[str, Any]], events: list[dict[str, Any]], image: str
) -> tuple[list[dict[str, Any]], list[str], bool]:
    """The card's rows (head first), the sentences of pods not running, and whether one of them
    will not start as asked."""
    rows, sentences, stuck = [], [], False

    def order(pod: dict[str, Any]) -> tuple[int, str]:
        labels = pod["metadata"].get("labels") or {}
        return (labels.get("ray.io/node-type") != "head", pod["metadata"]["name"])

    for pod in sorted(pods, key=order):
        meta, status = pod["metadata"], pod.get("status") or {}
        name, phase = meta["name"], status.get("phase", "Pending")
        labels = meta.get("labels") or {}
        ready = _condition(pod, "Ready")
        row: dict[str, Any] = {
            "id": name,
            "role": "head" if labels.get("ray.io/node-type") == "head" else "worker",
            "group": labels.get("ray.io/group", ""),
            "state": phase,
            "reason": None,
            "nodes": [status["hostIP"]] if status.get("hostIP") else [],
            "time_left": None,
        }
        if meta.get("deletionTimestamp"):
            row["state"] = "Terminating"
        elif phase != "Running" or (
            ready and ready.get("status") == "False" and phase != "Running"
        ):
            own = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
            reason, final = failure(pod, own, image)
            if reason != "starting":
                row["reason"] = reason
                sentences.append(f"Pod {name}: {reason}.")
                stuck = stuck or final
        rows.append(row)
    return rows, sentences, stuck


def cluster_sentence(obj: dict[str, Any]) -> tuple[str | None, bool]:
    """What the `RayCluster`'s status says that the pods do not: (a sentence or None, whether it
    waits in a queue (Kueue suspends it until its quota admits it))."""
    status = obj.get("status") or {}
    suspended = _condition(obj, "RayClusterSuspended")
    if (
        (obj.get("spec") or {}).get("suspend")
        or status.get("state") == "suspended"
        or (suspended and suspended.get("status") == "True")
    ):
        queue = ((obj.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/queue-name")
        where = f"in Kueue queue {queue!r}" if queue else "(spec.suspend is true)"
        return f"The RayCluster is suspended {where}: it starts when it is admitted.", True
    failed = _condition(obj, "ReplicaFailure")
    if failed and failed.get("status") == "True":
        return (
            f"KubeRay could not create its pods: {failed.get('message') or failed.get('reason')}."
            " Check the namespace's quota and the operator's logs.",
            False,
        )
    if status.get("state") == "failed":
        return f"KubeRay reports the cluster failed: {status.get('reason') or 'no reason'}.", False
    return None, False
