"""The decision: probe facts in, pass or fail and one plain sentence out. Pure, no I/O.

Inputs are the dict :func:`~eugo_jupyter.gpu.probe.probe` returns, plus what the check itself
adds when no probe ran (``infeasible``: why no node can run the request; ``timeout``: seconds
waited; ``probe_error``: the exception text). A pass needs proof: torch saw CUDA and a real kernel
gave the right answer on the device. NVML then confirms or adds a caveat, never replaces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["Verdict", "decide"]


class Verdict(NamedTuple):
    ok: bool
    verdict: str


def _where(facts: Mapping[str, Any]) -> str:
    ids = facts.get("gpu_ids")
    if ids:
        return f"GPU {', '.join(str(i) for i in ids)}"
    visible = facts.get("cuda_visible_devices")
    if visible:
        return f"GPU {visible.split(',')[0]}"
    return "cuda:0"


def _nvml_sees(facts: Mapping[str, Any]) -> str | None:
    devices = facts.get("nvml_devices") or []
    if not devices:
        return None
    names: dict[str, int] = {}
    for device in devices:
        names[device["name"]] = names.get(device["name"], 0) + 1
    return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in names.items())


def _nvml_none(facts: Mapping[str, Any]) -> str:
    error = facts.get("nvml_error")
    if error:
        return (
            "NVML found no driver" if facts.get("nvml_reason") == "no_driver" else f"NVML: {error}"
        )
    return "NVML lists no device on the node"


def decide(facts: Mapping[str, Any]) -> Verdict:
    """Pass or fail, and the sentence a user reads.

    The infeasible case reads the feasibility check's parts (``infeasible_needs``,
    ``infeasible_missing``, ``infeasible_on_node``), never its sentence's words.

    >>> decide({"infeasible": "needs 1 GPU and 1 CPU; no node in this cluster has a GPU",
    ...         "infeasible_missing": ["GPU"]})
    Verdict(ok=False, verdict='no node in this cluster has a GPU')
    """
    if facts.get("infeasible"):
        reason = str(facts["infeasible"])
        pinned = facts.get("pinned_node")
        on_node = facts.get("infeasible_on_node")
        if pinned and on_node:  # the sentence is about that node, not the whole cluster
            needs = facts.get("infeasible_needs") or "the request"
            return Verdict(False, f"node {pinned[:8]} cannot run this probe ({needs}): {on_node}")
        if "GPU" in (facts.get("infeasible_missing") or ()):
            return Verdict(False, "no node in this cluster has a GPU")
        return Verdict(False, f"no node can run this probe: {reason}")
    if facts.get("timeout") is not None:
        return Verdict(
            False,
            f"the probe did not finish within {facts['timeout']:g} s: the GPUs exist but are "
            "busy, so it was cancelled",
        )
    if facts.get("probe_error"):
        return Verdict(False, f"the probe task failed: {facts['probe_error']}")

    kernel = facts.get("scope") == "kernel"
    subject = "this kernel" if kernel else "the task"
    requested = float(facts.get("requested_gpus") or 0)
    cuda = bool(facts.get("cuda"))
    visible = facts.get("cuda_visible_devices")

    if not kernel and requested == 0:
        if cuda and facts.get("kernel_ok"):
            return Verdict(
                False,
                f"the task used {facts.get('device')} without requesting a GPU, so Ray does not "
                "count it; ask for num_gpus=1 or a fraction",
            )
        hidden = " (CUDA_VISIBLE_DEVICES is empty)" if visible == "" else ""
        return Verdict(
            False,
            f"no GPU was requested, so Ray gave the task none{hidden}; ask for num_gpus=1 or a "
            "fraction",
        )

    if facts.get("torch_version") is None:
        sees = _nvml_sees(facts)
        where = "this kernel" if kernel else "the worker"
        if sees:
            return Verdict(
                False,
                f"torch is not installed on {where}; NVML sees {sees} (driver "
                f"{facts.get('nvml_driver')}), but nothing ran on it to prove use",
            )
        return Verdict(
            False,
            f"torch is not installed on {where} and {_nvml_none(facts)}, so nothing could look "
            "for a GPU",
        )

    if not cuda:
        sees = _nvml_sees(facts)
        if sees and facts.get("torch_cuda_version") is None:
            return Verdict(
                False,
                f"NVML sees {sees}, but torch {facts['torch_version']} is a CPU-only build, so "
                f"{subject} cannot use it",
            )
        if sees and visible == "":
            return Verdict(
                False,
                f"NVML sees {sees}, but CUDA_VISIBLE_DEVICES is empty, so {subject} may use none",
            )
        details = f"torch.cuda.is_available() is False and {_nvml_none(facts)}"
        if sees:
            details = f"torch.cuda.is_available() is False although NVML sees {sees}"
        ids = facts.get("gpu_ids")
        if ids and not sees:
            details = f"Ray assigned GPU {', '.join(map(str, ids))}, yet {details}"
        if kernel:
            return Verdict(False, f"this kernel sees no GPU: {details}")
        return Verdict(False, f"a GPU was requested but the task saw none: {details}")

    device = facts.get("device") or "a CUDA device"
    if not facts.get("kernel_ok"):
        return Verdict(
            False,
            f"torch sees {device} ({_where(facts)}) but a small kernel failed on it: "
            f"{facts.get('kernel_error')}",
        )
    base = f"ran on {device} ({_where(facts)})"
    if facts.get("nvml_error"):
        return Verdict(True, f"{base}; NVML could not confirm it ({facts['nvml_error']})")
    if facts.get("mig"):
        return Verdict(
            True,
            f"{base}; a MIG instance has no per-process utilisation in NVML, so torch's "
            "allocation on it is the evidence",
        )
    seen_by = facts.get("seen_by")
    if seen_by == "pid":
        return Verdict(True, base)
    if seen_by == "memory change":
        return Verdict(
            True,
            f"{base}; NVML lists host process ids (a container), so the task was matched by the "
            "device's UUID and memory change",
        )
    return Verdict(
        True,
        f"{base}; NVML did not list its process, so torch's allocation on it is the evidence",
    )
