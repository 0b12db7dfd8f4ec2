"""The cluster manager: owns every cluster the Jupyter server launched or connected, returns models.

Async, imports no tornado: ``routes.py`` translates HTTP into calls on :class:`ClusterManager`,
which returns plain JSON-ready dicts ("models"), ``None`` for an unknown id (HTTP 404), and raises
:class:`~eugo_jupyter.exceptions.OptionsError` for bad input (HTTP 400).

The cluster model (``GET /eugo/clusters/{id}``; ``GET /eugo/clusters`` is a list of these)::

    {
      "id": "c-3f9a2b",                  # [A-Za-z0-9_-], stable across server restarts
      "name": "dev",
      "kind": "local" | "connect",
      "status": "starting" | "running" | "stopping" | "stopped" | "error",
      "error": null | "a sentence saying what went wrong and what to do",
      "active": false,                   # true: new kernels connect to this cluster
      "lifetime": "server" | "persistent" | null,   # null for kind "connect" (not ours to stop)
      "address": "127.0.0.1:52345",      # GCS host:port (or "ray://host:port" as given)
      "dashboard_url": "http://127.0.0.1:52346" | null,
      "created": "2026-11-29T16:20:00+00:00",
      "updated": "2026-11-29T16:21:03+00:00" | null,   # when the monitoring below was read
      "spec": {                          # what was asked for; null for kind "connect"
        "head": {"num_cpus": 2, "num_gpus": 0, "memory": null, "object_store_memory": null},
        "workers": [{"num_cpus": 1, "num_gpus": 1, "memory": null, "object_store_memory": null}]
      },
      "resources": {                     # sums over alive nodes, for the resource bars
        "total":     {"CPU": 3.0, "GPU": 1.0, "memory": 1.2e10, ...},
        "available": {"CPU": 2.0, "GPU": 1.0, "memory": 1.2e10, ...}
      },
      "nodes": [
        {"node_id": "ab12...", "address": "127.0.0.1", "is_head": true, "alive": true,
         "resources_total": {"CPU": 2.0, "memory": ..., "object_store_memory": ...},
         "resources_available": {"CPU": 1.0, ...},
         "gpus": [                         # real devices read through NVML (empty when none)
           {"index": 0, "name": "NVIDIA H200", "memory_total": 150e9, "memory_used": 1e9,
            "utilization": 12.0}]}
      ],
      "tasks": {"pending": 0, "running": 1, "finished": 10000, "failed": 0},
      "waiting": [
        {"request": {"CPU": 1.0, "GPU": 1.0}, "count": 1, "infeasible": true,
         "reason": "needs 1 GPU and 1 CPU; no node in this cluster has a GPU; launch or ...",
         "functions": []}
      ]
    }

``nodes``, ``tasks``, ``waiting`` and ``resources`` are empty (``[]``, zero counts, ``{}``) until
the first successful read and while the cluster is not running; a failed read keeps the last
values and says why in ``error`` (status stays "running" for a launched cluster whose processes
are alive; a connected cluster that stops answering turns "error").
"""
