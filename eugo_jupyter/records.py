"""Cluster records on disk: how the Jupyter server tells kernels which cluster to use.

Layout, under Jupyter's runtime directory (``jupyter --runtime-dir``, which honours
``$JUPYTER_RUNTIME_DIR``)::

    <runtime>/eugo/clusters/<id>.json    one record per cluster the server launched or connected
    <runtime>/eugo/active.json           {"id": ..., "address": ..., "name": ...}:
                                         new kernels use it; with "gone": "why" the
                                         active cluster ended by itself, and new kernels say
                                         so once as they start the embedded Ray instead
    <runtime>/eugo/clusters/<id>.findings/<stamp>.json   one per profiled run (the last
                                                         FINDINGS_KEPT), see RunFindings

A record is a JSON object with at least::

    {"version": 1, "id": "c-3f9a2b", "name": "dev", "kind": "local" (a backend's kind:
     "connect", "ssh", "slurm", "gridengine", "allocation" or "kubernetes"),
     "address": "10.0.0.5:6379", "dashboard_url": "http://127.0.0.1:8265" | null,
     "created": "2026-11-29T16:20:00+00:00", "lifetime": "server" | "persistent",
     "server_pid": 1234, "pids": [...]}

Files are written atomically (write, then rename) with owner-only permissions. Unknown keys are
kept, so the server may store more.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, TypedDict

__all__ = [
    "FINDINGS_KEPT",
    "RECORD_VERSION",
    "RunFindings",
    "active_record",
    "clear_active",
    "delete_record",
    "findings_dir",
    "gone_active",
    "list_records",
    "mark_active_gone",
    "read_findings",
    "read_record",
    "records_dir",
    "set_active",
    "write_findings",
    "write_record",
]

RECORD_VERSION = 1
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def _root() -> Path:
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir()) / "eugo"


def records_dir() -> Path:
    """The folder holding one ``<id>.json`` per cluster."""
    return _root() / "clusters"


def _record_path(cluster_id: str) -> Path:
    if not _ID_RE.fullmatch(cluster_id):
        raise ValueError(f"{cluster_id!r} is not a cluster id (letters, digits, - and _).")
    return records_dir() / f"{cluster_id}.json"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_record(record: dict[str, Any]) -> Path:
    """Write (or replace) the record of cluster ``record["id"]``."""
    data = {"version": RECORD_VERSION, **record}
    path = _record_path(str(data["id"]))
    _write_json(path, data)
    return path


def read_record(cluster_id: str) -> dict[str, Any] | None:
    """The record of one cluster, or None when there is none (or it is unreadable)."""
    return _read_json(_record_path(cluster_id))


def list_records() -> list[dict[str, Any]]:
    """Every readable record, oldest first."""
    folder = records_dir()
    if not folder.is_dir():
        return []
    records = [r for p in folder.glob("*.json") if (r := _read_json(p)) and "id" in r]
    return sorted(records, key=lambda r: str(r.get("created", "")))


def delete_record(cluster_id: str, gone: str | None = None) -> None:
    """Forget a cluster (and its runs' findings); clears the active marker if it pointed there.

    ``gone``: the cluster ended by itself (killed, wall time), saying why. The marker of an
    active cluster then stays with that reason, so that a new kernel says the active cluster
    is gone instead of silently using the embedded Ray (see :func:`gone_active`).
    """
    _record_path(cluster_id).unlink(missing_ok=True)
    shutil.rmtree(findings_dir(cluster_id), ignore_errors=True)
    if gone is not None:
        mark_active_gone(cluster_id, gone)
        return
    marker = _read_json(_root() / "active.json")
    if marker and marker.get("id") == cluster_id:
        clear_active()


def mark_active_gone(cluster_id: str, reason: str) -> None:
    """If ``cluster_id`` is the active cluster, mark it gone with ``reason`` (else nothing)."""
    active = active_record()
    if active and active.get("id") == cluster_id:
        _write_json(_root() / "active.json", {**active, "gone": reason})


def forget(record: dict[str, Any], gone: str | None = None) -> None:
    """A cluster is gone for good: remove its record, and its temp folder if that is exactly
    one the Manager created (the one owner of forgetting: the manager and the watchdog call it).

    ``gone``: it ended by itself, saying why (see :func:`delete_record`).
    """
    delete_record(str(record["id"]), gone=gone)
    if record.get("temp_dir"):
        from ._tempdirs import remove_ours

        remove_ours(str(record["id"]), str(record["temp_dir"]))


def set_active(record: dict[str, Any]) -> None:
    """Mark a cluster as the one new kernels connect to."""
    _write_json(
        _root() / "active.json",
        {"id": record["id"], "address": record["address"], "name": record.get("name")},
    )


def clear_active() -> None:
    """New kernels go back to the embedded default."""
    (_root() / "active.json").unlink(missing_ok=True)


def active_record() -> dict[str, Any] | None:
    """``{"id", "address", "name"}`` of the active cluster, or None (also when it is gone)."""
    data = _read_json(_root() / "active.json")
    return data if data and data.get("address") and not data.get("gone") else None


def gone_active() -> dict[str, Any] | None:
    """``{"id", "address", "name", "gone"}`` of an active cluster that ended by itself, or None.

    >>> gone_active()                    # doctest: +SKIP
    {'id': 'c-3f9a2b1c', 'address': '192.0.2.2:6379', 'name': 'dev', 'gone': 'Its processes ...'}
    """
    data = _read_json(_root() / "active.json")
    return data if data and data.get("gone") else None


# -- findings of profiled runs ---------------------------------------------------------------

#: Profiled runs kept per cluster; writing one more drops the oldest.
FINDINGS_KEPT = 10


class RunFindings(TypedDict):
    """What one ``eugo.hpc.profile()`` run found, as the panel shows it on the cluster's card.

    ``summary``: ``tasks``, ``duration_s``, ``busy_s``, ``speedup``, ``utilisation``, ``cpus``;
    ``timeline``: ``workers``, ``first_start_s``, ``last_end_s``, ``tail_s`` (the end of the run
    with fewer tasks running than at its peak); ``findings``: ``{kind, function, message, fix}``.
    """

    version: int
    created: float  # epoch seconds
    functions: list[str]
    summary: dict[str, float]
    timeline: dict[str, float]
    findings: list[dict[str, str]]


def findings_dir(cluster_id: str) -> Path:
    """The folder of one cluster's run findings, next to its record."""
    return _record_path(cluster_id).with_suffix(".findings")


def write_findings(cluster_id: str, run: RunFindings) -> Path:
    """Store one run's findings (atomically, owner-only) and keep only the newest FINDINGS_KEPT.

    >>> write_findings("c-1", {"version": 1, "created": 0.0, "functions": [], "summary": {},
    ...                        "timeline": {}, "findings": []})   # doctest: +SKIP
    """
    folder = findings_dir(cluster_id)
    stamp = f"{run['created']:017.6f}-{os.getpid()}-{time.monotonic_ns() % 10**9:09d}"
    path = folder / f"{stamp}.json"
    _write_json(path, dict(run))
    for old in sorted(folder.glob("[0-9]*.json"))[:-FINDINGS_KEPT]:
        old.unlink(missing_ok=True)
    return path


def read_findings(cluster_id: str, limit: int = FINDINGS_KEPT) -> list[RunFindings]:
    """The newest ``limit`` runs' findings of a cluster, newest first ([] when none)."""
    folder = findings_dir(cluster_id)
    if not folder.is_dir():
        return []
    runs = [r for p in sorted(folder.glob("[0-9]*.json"), reverse=True) if (r := _read_json(p))]
    runs.sort(key=lambda r: float(r.get("created", 0)), reverse=True)
    return runs[:limit]  # type: ignore[return-value]
