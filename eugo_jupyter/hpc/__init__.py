"""``eugo.hpc``: ordinary Python on a Ray cluster, from a notebook.

>>> import eugo_jupyter as eugo
>>> @eugo.hpc.distribute
... def square(x):
...     return x * x
>>> eugo.hpc.get([square(i) for i in range(4)])     # doctest: +SKIP
[0, 1, 4, 9]
"""

from ._cluster import ClusterInfo, cluster, waiting
from ._distribute import ActorProxy, BoundCall, DistributedClass, DistributedFunction, distribute
from ._feasibility import Waiting, WaitingList
from ._futures import as_completed, cancel, get, put, wait
from ._launching import clusters, launch
from ._map import map
from ._output import logs
from ._profile.run import Report, Run, profile
from ._readiness.measure import readiness
from ._readiness.report import ReadinessReport
from ._session import Connection, init, shutdown
from .optimize import OptimizationReport, optimize, set_optimize

__all__ = [
    "ActorProxy",
    "BoundCall",
    "ClusterInfo",
    "Connection",
    "DistributedClass",
    "DistributedFunction",
    "OptimizationReport",
    "ReadinessReport",
    "Report",
    "Run",
    "Waiting",
    "WaitingList",
    "as_completed",
    "cancel",
    "cluster",
    "clusters",
    "distribute",
    "get",
    "init",
    "launch",
    "logs",
    "map",
    "optimize",
    "profile",
    "put",
    "readiness",
    "set_optimize",
    "shutdown",
    "wait",
    "waiting",
]
