"""``gpu_memory="6GB"``: a memory footprint turned into the ``num_gpus`` fraction that fits it.

Fractional GPUs divide scheduling, not memory: ``num_gpus=0.25`` lets four tasks share a device
whatever each allocates. Sizing the fraction from the footprint makes the scheduler keep the sum
within the device: on a GPU of ``T`` bytes, a task needing ``m`` gets ``1/floor(T/m)`` of it.
The GPUs' memory comes from NVML on each GPU node (one small task per node, cached per cluster).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

from .._units import format_bytes, parse_memory
from ..exceptions import EugoWarning, OptionsError

__all__ = [
    "cluster_gpu_memory",
    "fraction_for",
    "gpu_fraction_for",
    "options_for_gpu_memory",
    "resolve_gpu_memory",
]

# The GPUs NVML saw per set of GPU nodes; emptied when the kernel disconnects (see _forget).
_cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}


def _forget(reason: str) -> None:
    _cache.clear()


_PRECISION = 10_000  # Ray counts resources in steps of 1/10000


def fraction_for(memory: int, totals: list[int], label: str = "") -> float:
    """The ``num_gpus`` fraction for a task needing ``memory`` bytes on GPUs of ``totals`` bytes.

    Sized on the smallest GPU that can hold the task, so that however many such tasks the
    scheduler packs on a device, their footprints fit. Raises when no GPU is large enough;
    warns when some GPUs are too small (a task placed there would run out of memory).

    >>> fraction_for(6 * 10**9, [150754820096])      # 6 GB on one H200 (143771 MiB): 25 per GPU
    0.04
    """
    label = label or f"gpu_memory={format_bytes(memory)!r}"
    if memory <= 0:
        raise OptionsError(f"{label} is not allowed: gpu_memory must be more than 0 bytes.")
    if not totals:
        raise OptionsError(
            f"{label} cannot be sized: no GPU in this cluster reported its memory. Give "
            "num_gpus= directly (such as num_gpus=0.25)."
        )
    fits = sorted(t for t in totals if t >= memory)
    if not fits:
        raise OptionsError(
            f"{label} is more than any GPU in this cluster has (the largest has "
            f"{format_bytes(max(totals))}): no task of that size can run. "
            "Use a node with a larger GPU, "
            "or split the work so that each task needs less device memory."
        )
    if len(fits) < len(totals):
        warnings.warn(
            f"{label}: {len(totals) - len(fits)} of {len(totals)} GPUs in this cluster have less "
            f"than that ({format_bytes(min(totals))}); "
            "a task placed on one of them will run out of memory. "
            "Pin the task to the larger GPUs with accelerator_type=.",
            EugoWarning,
            stacklevel=3,
        )
    per_gpu = min(fits[0] // memory, _PRECISION)
    if per_gpu <= 1:
        return 1.0
    fraction = math.floor(_PRECISION / per_gpu) / _PRECISION
    if math.floor(1 / fraction + 1e-9) * memory > fits[0]:
        fraction = math.ceil(_PRECISION / per_gpu) / _PRECISION
    return fraction


def _nvml_on_node(node_id: str) -> Any:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .. import _nvml

    task = ray.remote(num_cpus=0)(_nvml.devices)
    return task.options(  # the task keeps the name it had, nvml_devices
        name="nvml_devices", scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    ).remote()


def cluster_gpu_memory(refresh: bool = False, timeout: float = 30) -> list[dict[str, Any]]:
    """The GPUs of every alive GPU node as NVML reports them, cached for this cluster.

    Each entry: ``{"node_id", "name", "memory_total"}``, or ``{"node_id", "error"}`` for a node
    whose NVML could not answer (for example a node that only declares a GPU).

    >>> cluster_gpu_memory()            # doctest: +SKIP
    [{'node_id': '5e0c...', 'name': 'NVIDIA H200', 'memory_total': 150754820096}]
    """
    import ray

    from ..hpc import _internal

    _internal.on_disconnect(_forget)
    _internal.ensure()
    snap = _internal.current_snapshot(max_age=0)
    nodes = tuple(
        n.node_id for n in (snap.alive_nodes if snap else []) if n.total.get("GPU", 0) > 0
    )
    if not refresh and nodes in _cache:
        return _cache[nodes]
    refs = {node: _nvml_on_node(node) for node in nodes}
    if refs:
        ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
    found: list[dict[str, Any]] = []
    for node, ref in refs.items():
        if not ray.wait([ref], timeout=0)[0]:
            ray.cancel(ref, force=True)
            found.append({"node_id": node, "error": f"NVML did not answer within {timeout:g} s"})
            continue
        view = ray.get(ref)
        if view["error"] or not view["devices"]:
            found.append({"node_id": node, "error": view["error"] or "NVML lists no device"})
        found.extend(
            {"node_id": node, "name": d["name"], "memory_total": d["memory_total"]}
            for d in view["devices"]
        )
    _cache[nodes] = found
    return found


def _cluster_totals(label: str) -> list[int]:
    gpus = cluster_gpu_memory()
    if not gpus:
        raise OptionsError(
            f"{label} needs a GPU node, and no node in this cluster has a GPU. Fix: launch or "
            "connect a cluster with a GPU node, or drop gpu_memory."
        )
    totals = [g["memory_total"] for g in gpus if "memory_total" in g]
    if not totals:
        errors = "; ".join(f"node {g['node_id'][:8]}: {g['error']}" for g in gpus)
        raise OptionsError(
            f"{label} cannot be sized: no GPU node reported its GPU memory ({errors}). Give "
            "num_gpus= directly (such as num_gpus=0.25)."
        )
    return totals


def gpu_fraction_for(memory_bytes: int | str) -> float:
    """The ``num_gpus`` fraction for a task needing this much device memory on this cluster.

    For the magics and the options widget: ``num_gpus=gpu_fraction_for("6GB")``. Raises
    :class:`~eugo_jupyter.exceptions.OptionsError` when no GPU has that much memory, or when the
    cluster's GPUs cannot be measured (no GPU node, or NVML missing on them).

    >>> from eugo_jupyter.gpu import gpu_fraction_for
    >>> gpu_fraction_for("6GB")         # doctest: +SKIP
    0.04
    """
    memory = parse_memory(memory_bytes, "gpu_memory")
    label = f"gpu_memory={memory_bytes!r}"
    return fraction_for(memory, _cluster_totals(label), label)


def resolve_gpu_memory(options: Mapping[str, Any], totals: list[int]) -> dict[str, Any]:
    """Options with ``gpu_memory`` replaced by ``num_gpus``, for GPUs of ``totals`` bytes.

    An explicit ``num_gpus`` wins, with a warning when it packs more such tasks on a GPU than
    its memory holds.

    >>> resolve_gpu_memory({"gpu_memory": "20GB"}, [24 * 2**30])
    {'num_gpus': 1}
    """
    result = dict(options)
    value = result.pop("gpu_memory", None)
    if value is None:
        return result
    memory = parse_memory(value, "gpu_memory")
    fraction = fraction_for(memory, totals, f"gpu_memory={value!r}")
    explicit = result.get("num_gpus")
    if explicit is None:
        result["num_gpus"] = int(fraction) if fraction == 1 else fraction
    elif isinstance(explicit, (int, float)) and 0 < explicit < fraction:
        per_gpu = math.floor(1 / explicit + 1e-9)
        warnings.warn(
            f"num_gpus={explicit!r} lets {per_gpu} tasks share one GPU, but {per_gpu} x "
            f"{value} is more than the smallest GPU that fits one holds "
            f"({format_bytes(min(t for t in totals if t >= memory))}): "
            "they will run out of memory. "
            f"Use num_gpus={fraction:g} (sized from gpu_memory={value!r}).",
            EugoWarning,
            stacklevel=5,
        )
    return result


def options_for_gpu_memory(options: Mapping[str, Any]) -> dict[str, Any]:
    """``.options(gpu_memory="6GB")`` made into ``num_gpus`` for this cluster's GPUs (validation
    uses it)."""
    value = options.get("gpu_memory")
    if value is None:
        return {k: v for k, v in options.items() if k != "gpu_memory"}
    parse_memory(value, "gpu_memory")  # a malformed value fails before the cluster is asked
    return resolve_gpu_memory(options, _cluster_totals(f"gpu_memory={value!r}"))
