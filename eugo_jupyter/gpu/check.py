"""``eugo.check()``: run the probe where a GPU request lands and report what it proved.

The report never waits on a request no node can satisfy: the request is compared with the
cluster's nodes first and an impossible one is answered at once. A feasible one that cannot start
within ``timeout`` seconds (every GPU busy) is cancelled and reported as such.

The probe runs as a task declared with ``max_calls=1``: its worker exits after the one call, so
the CUDA context and memory it created are released instead of being kept by an idle worker
(Ray only gives GPU functions ``max_calls=1`` when the GPU is on the decorator; a GPU requested
through ``.options`` keeps the worker, and its memory, alive).
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping
from typing import Any

from .._units import format_bytes
from ..hpc._internal import (
    current_snapshot,
    ensure,
    fix_for,
    infeasible_reason,
    missing_everywhere,
    needs_sentence,
    request_of,
    resolve_options,
)
from .probe import probe
from .verdict import decide

__all__ = ["DEFAULT_TIMEOUT", "GPUReport", "check", "check_nodes"]

#: Seconds a probe may take, queueing included, before it is cancelled and reported.
DEFAULT_TIMEOUT = 60.0

_remote_probe: Any = None


def _gib(value: Any) -> str:
    return "n/a" if value is None else format_bytes(value)


class GPUReport(Mapping[str, Any]):
    """What one probe found: a read-only mapping of facts, with ``ok``, ``verdict`` and an HTML
    view.

    Keys always present: ``cuda`` and ``device`` (as in the course's check), ``ok``, ``verdict``,
    ``request``, ``node_id``, ``hostname``, ``gpu_ids``, ``cuda_visible_devices``,
    ``torch_version``, ``device_uuid``, ``nvml_driver``, ``memory_total``, ``memory_used``,
    ``process_seen``, ``max_memory_allocated``, ``kernel_ok``, ``torch_error``, ``nvml_error``.

    >>> report = GPUReport(
    ...     {"infeasible": "needs 1 GPU and 1 CPU; no node in this cluster has a GPU"}
    ... )
    >>> report.ok, report.verdict, report["cuda"]
    (False, 'no node in this cluster has a GPU', False)
    """

    _DEFAULTS = dict.fromkeys(
        (
            "node_id", "hostname", "gpu_ids", "cuda_visible_devices", "torch_version",
            "device", "device_uuid", "nvml_driver", "memory_total", "memory_used",
            "process_seen", "max_memory_allocated", "kernel_ok", "torch_error", "nvml_error",
        )
    )  # fmt: skip

    def __init__(self, facts: Mapping[str, Any], request: Mapping[str, Any] | None = None) -> None:
        decided = decide(facts)
        self._data: dict[str, Any] = {
            **self._DEFAULTS,
            "cuda": False,
            **facts,
            "request": dict(request or {}),
            "ok": decided.ok,
            "verdict": decided.verdict,
        }

    @property
    def ok(self) -> bool:
        """True only when a real kernel ran on a CUDA device and gave the right answer."""
        return bool(self._data["ok"])

    @property
    def verdict(self) -> str:
        """One plain sentence: ``"ran on NVIDIA H200 (GPU 0)"``,
        ``"no node in this cluster has a GPU"``."""
        return str(self._data["verdict"])

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready copy of the facts."""
        return dict(self._data)

    def __repr__(self) -> str:
        return f"GPU check {'PASS' if self.ok else 'FAIL'}: {self.verdict}"

    def _rows(self) -> list[tuple[str, str]]:
        d = self._data
        rows = [
            ("request", ", ".join(f"{k}={v!r}" for k, v in d["request"].items()) or "-"),
            ("where", f"{d.get('scope') or 'task'} on {d['hostname'] or '-'} "
                      f"(node {str(d['node_id'] or '-')[:12]})"),
            ("Ray GPU ids", str(d["gpu_ids"]) if d["gpu_ids"] is not None else "-"),
            ("CUDA_VISIBLE_DEVICES", "unset" if d["cuda_visible_devices"] is None
                                     else repr(d["cuda_visible_devices"])),
            ("torch", f"{d['torch_version']} (cuda available: {d['cuda']})" if d["torch_version"]
                      else str(d["torch_error"] or "-")),
            ("device", f"{d['device'] or '-'}"
                       + (f" ({d['device_uuid']})" if d["device_uuid"] else "")),
            ("NVML", f"driver {d['nvml_driver']}" if d["nvml_driver"]
                     else str(d["nvml_error"] or "-")),
            ("device memory", f"{_gib(d['memory_used'])} used of {_gib(d['memory_total'])}"),
            ("process seen by NVML", "-" if d["process_seen"] is None
                                     else f"{d['process_seen']} "
                                          f"({d.get('seen_by') or 'not listed'})"),
            ("torch max_memory_allocated", _gib(d["max_memory_allocated"])),
        ]  # fmt: skip
        if d.get("fix"):
            rows.append(("fix", str(d["fix"])))
        return rows

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        return "\n".join([repr(self), *(f"  {k:<{width}}  {v}" for k, v in self._rows())])

    def _repr_html_(self) -> str:
        colour, mark = ("#2e7d32", "PASS") if self.ok else ("#c62828", "FAIL")
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        return (
            f"<div class='eugo-gpu-report'><p><b style='color:{colour}'>{mark}</b> "
            f"{html.escape(self.verdict)}</p><table>{rows}</table></div>"
        )


def _probe_remote() -> Any:
    global _remote_probe
    if _remote_probe is None:
        import ray

        _remote_probe = ray.remote(max_calls=1)(probe)
    return _remote_probe


def _prepare(
    num_gpus: float | None, options: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, float]]:
    if num_gpus is None:  # one GPU, unless gpu_memory= sizes the fraction
        num_gpus = None if options.get("gpu_memory") is not None else 1
    validated = resolve_options({"num_gpus": num_gpus, **options}, "task")
    return validated, request_of(validated, "task")


def infeasible_facts(
    request: Mapping[str, float], nodes: list[Any], node: str | None = None
) -> dict[str, Any] | None:
    """What the verdict needs when no node (or not the pinned ``node``) can run the probe.

    The sentences come from the feasibility check, as data the verdict picks from:
    ``infeasible`` (about the cluster, or about the node when pinned), ``infeasible_needs``,
    ``infeasible_missing`` (resources no node has at all) and ``infeasible_on_node``.
    """
    reason = infeasible_reason(request, nodes)
    if reason is None:
        return None
    facts: dict[str, Any] = {
        "infeasible": reason,
        "infeasible_needs": needs_sentence(request),
        "infeasible_missing": missing_everywhere(request, nodes),
        "fix": fix_for(request, nodes),
        "pinned_node": node,
    }
    if node is not None:
        on_node = infeasible_reason(request, nodes, about="node") or ""
        facts["infeasible_on_node"] = on_node.split("; ", 1)[-1]
    return facts


def _start(validated: dict[str, Any], request: dict[str, float], node: str | None) -> Any:
    """A pending probe (an ObjectRef), or a finished GPUReport when no node can run it."""
    ensure()
    snap = current_snapshot(max_age=0)
    if snap is not None:
        nodes = snap.alive_nodes
        if node is not None:
            nodes = [n for n in nodes if n.node_id.startswith(node)]
            if not nodes:
                return GPUReport(
                    {"infeasible": f"the node {node!r} is not an alive node of this cluster",
                     "fix": "pick a node from eugo.hpc.cluster()"},
                    validated,
                )  # fmt: skip
            node = nodes[0].node_id
        facts = infeasible_facts(request, nodes, node)
        if facts is not None:
            return GPUReport(facts, validated)
    options = dict(validated)
    if node is not None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
    return _probe_remote().options(**options).remote(float(validated.get("num_gpus", 0)))


def _finish(pending: list[Any], validated: dict[str, Any], timeout: float) -> list[GPUReport]:
    import ray

    refs = [p for p in pending if not isinstance(p, GPUReport)]
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=timeout)
    reports = []
    for item in pending:
        if isinstance(item, GPUReport):
            reports.append(item)
            continue
        ready, _ = ray.wait([item], timeout=0)
        if not ready:
            ray.cancel(item, force=True)
            reports.append(GPUReport({"timeout": timeout}, validated))
            continue
        try:
            reports.append(GPUReport(ray.get(item), validated))
        except Exception as exc:  # noqa: BLE001 - a failed probe is a finding, not a crash
            reports.append(GPUReport({"probe_error": f"{type(exc).__name__}: {exc}"}, validated))
    return reports


def check(
    num_gpus: float | None = 1,
    *,
    local: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    node: str | None = None,
    **options: Any,
) -> GPUReport:
    """Run a probe with these resources and report whether it really ran on a GPU.

    ``num_gpus`` and ``options`` are what a call would pass to ``.options()`` (fractions
    included; ``check(None, gpu_memory="6GB")`` sizes the fraction from memory); ``node`` pins
    the probe to one node (an id or its prefix). ``local=True`` probes this kernel's own
    process instead, without Ray. The report is a mapping (``report["cuda"]``,
    ``report["device"]``...) with ``.ok`` and ``.verdict``.

    >>> import eugo_jupyter as eugo
    >>> report = eugo.check(num_gpus=1)         # doctest: +SKIP
    >>> report.verdict                          # doctest: +SKIP
    'ran on NVIDIA H200 (GPU 0)'
    """
    if local:
        return GPUReport(probe(requested_gpus=num_gpus or 0, scope="kernel"), {"local": True})
    validated, request = _prepare(num_gpus, options)
    return _finish([_start(validated, request, node)], validated, timeout)[0]


def check_nodes(
    num_gpus: float | None = 1,
    nodes: list[str] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    **options: Any,
) -> list[GPUReport]:
    """One probe per node, all at once: ``nodes=None`` means every alive node that has a GPU.

    With no GPU node in the cluster it returns the one report that says so.

    >>> [r.verdict for r in check_nodes(0.25)]  # doctest: +SKIP
    ['ran on NVIDIA H200 (GPU 0)', 'ran on NVIDIA H200 (GPU 0)']
    """
    validated, request = _prepare(num_gpus, options)
    if nodes is None:
        ensure()
        snap = current_snapshot(max_age=0)
        nodes = [n.node_id for n in snap.alive_nodes if n.total.get("GPU", 0) > 0] if snap else []
        if not nodes:
            return _finish([_start(validated, request, None)], validated, timeout)
    pending = [_start(validated, request, node) for node in nodes]
    return _finish(pending, validated, timeout)
