"""Where data has to live: explain a task that cannot find a file the notebook can see.

A task runs on some node of the cluster, in that node's file system and that worker's working
directory. When it fails with ``FileNotFoundError`` (or an ``OSError`` saying a path does not
exist), :func:`explain` turns Ray's error into a
:class:`~eugo_jupyter.exceptions.DataLocationError` that says which node ran it, whether the
path exists on the notebook's machine, what a relative path resolved against there, and the fix.
:func:`paths_check` is readiness's look-ahead: the same question asked of every node before a run.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable
from typing import Any

from ..exceptions import DataLocationError

__all__ = ["explain", "hint", "paths_check"]

_MISSING = (errno.ENOENT, errno.ENOTDIR)
#: How long to wait for Ray's task events to say which node ran a failed task.
_NODE_LOOKUP_S = 10.0
_LOOK_TIMEOUT_S = 60.0

FIX = (
    "Fix: keep the data where every node can read it at the same path (storage all nodes "
    "mount), or send the bytes instead of the path (read the file here and pass its contents, "
    "or eugo.hpc.put(data) once and pass the future to every call)."
)


def _missing_path(error: BaseException | None) -> str | None:
    """The path an OSError says does not exist, else None."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in _MISSING and error.filename is not None:
            return os.fsdecode(error.filename)
        error = getattr(error, "cause", None) or error.__cause__
    return None


def _look(paths: list[str]) -> dict[str, Any]:
    """Runs on a node: its id, host name, working directory, and which paths exist there."""
    import socket

    import ray

    return {
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "cwd": os.getcwd(),
        "exists": {p: os.path.exists(p) for p in paths},
    }


def _look_on(node_id: str, paths: list[str]) -> dict[str, Any] | None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        remote = ray.remote(_look).options(
            num_cpus=0,
            name="eugo.data_location",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        )
        return ray.get(remote.remote(paths), timeout=_LOOK_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - the explanation is best effort; the task's error stands
        return None


def _node_of(ref: Any, error: BaseException) -> str | None:
    """The id of the node that ran the failed task: Ray's task events (asked of the GCS
    itself, which a busy dashboard does not slow down), else the worker's IP."""
    import ray

    from .._raystate import task_node

    deadline = time.monotonic() + _NODE_LOOKUP_S
    while ref is not None and hasattr(ref, "task_id"):
        try:
            gcs = ray.get_runtime_context().gcs_address
            node = task_node(gcs, ref.task_id().hex(), timeout=5)
            if node:
                return node
        except Exception:  # noqa: BLE001 - task events off or unreadable: the IP below
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.25)  # the task's events reach the GCS within about a second
    ip = getattr(error, "ip", None)
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("NodeManagerAddress") == ip]
    return nodes[0]["NodeID"] if len(nodes) == 1 else None


def _describe(path: str, node: str | None, seen: dict[str, Any] | None) -> str:
    here = os.path.abspath(path)
    where = f"node {node[:12]}" if node else "a worker node"
    if seen:
        where += f" (host {seen['host']})"
    parts = [f"It ran on {where}, where {path!r} does not exist."]
    if not os.path.isabs(path):
        cwd = seen["cwd"] if seen else "its own working directory"
        parts.append(
            f"{path!r} is a relative path: the worker resolved it against its working directory "
            f"{cwd}, which is not the notebook's ({os.getcwd()}). Pass an absolute path."
        )
    if os.path.exists(here):
        kind = "folder" if os.path.isdir(here) else "file"
        parts.append(
            f"On this notebook's machine {here} exists (a {kind}): the notebook and that node do "
            "not share this storage."
        )
    else:
        parts.append(f"It does not exist on this notebook's machine either ({here}).")
    parts.append(FIX)
    return " ".join(parts)


def hint(error: BaseException | None, ref: Any = None) -> str | None:
    """The explanation for a task that failed on a missing path, or None for other errors."""
    path = _missing_path(error)
    if path is None:
        return None
    node = _node_of(ref, error) if error is not None else None
    seen = _look_on(node, [path]) if node else None
    return _describe(path, node, seen)


def explain(error: BaseException, ref: Any = None) -> DataLocationError | None:
    """A :class:`DataLocationError` for a task's missing-path failure (``ref``: its future)."""
    text = hint(error, ref)
    if text is None:
        return None
    path = _missing_path(error)
    function = getattr(error, "function_name", None) or "a task"
    cause = getattr(error, "cause", None) or error
    message = f"{function} raised {type(cause).__name__}: {cause}\n{text}"
    return DataLocationError(message, path)


def _candidates(items: Iterable[Any]) -> list[str]:
    """Strings and path objects among the items (one level into tuples, lists and dicts) that
    look like paths: they exist here, or hold a path separator."""
    found: dict[str, None] = {}

    def consider(value: Any) -> None:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and 0 < len(value) < 4096 and "\n" not in value:
            if os.sep in value or os.path.exists(value):
                found[value] = None

    for item in items:
        consider(item)
        if isinstance(item, (tuple, list)):
            for value in item[:20]:
                consider(value)
        elif isinstance(item, dict):
            for value in list(item.values())[:20]:
                consider(value)
    return list(found)[:200]


def paths_check(items: Iterable[Any]) -> tuple[str, bool | None, str, str]:
    """Readiness's check: do the file paths among ``items`` exist on every node?

    Returns the checklist line's ``(name, ok, detail, fix)`` (readiness makes it a ``Check``).
    """
    import ray

    paths = _candidates(items)
    name = "paths visible on every node"
    if not paths:
        return (name, None, "no file paths among the items", "")
    relative = [p for p in paths if not os.path.isabs(p)]
    missing: dict[str, list[str]] = {}
    looked = 0
    cwds = set()
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        seen = _look_on(node["NodeID"], paths)
        if seen is None:
            continue
        looked += 1
        cwds.add(seen["cwd"])
        for path, exists in seen["exists"].items():
            if not exists:
                missing.setdefault(path, []).append(f"{seen['host']}:{node['NodeID'][:8]}")
    if missing:
        path, nodes = next(iter(missing.items()))
        more = f" (and {len(missing) - 1} more paths)" if len(missing) > 1 else ""
        here = "exists here" if os.path.exists(path) else "does not exist here either"
        detail = f"{path!r} {here} but not on node {', '.join(nodes)}{more}"
        if path in relative:
            detail += f"; relative paths resolve against the worker's directory ({', '.join(cwds)})"
        return (name, False, detail, FIX[5:].rstrip("."))
    if relative:
        return (
            name,
            True,
            f"{len(paths)} path(s) exist on all {looked} nodes; {len(relative)} are relative and "
            "resolve against each worker's own directory: prefer absolute paths",
            "",
        )
    return (name, True, f"{len(paths)} path(s) exist on all {looked} nodes", "")
