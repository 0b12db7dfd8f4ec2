"""``eugo.hpc``: ordinary Python on a Ray cluster, from a notebook.

>>> import eugo_jupyter as eugo
>>> @eugo.hpc.distribute
... def square(x):
...     return x * x
>>> eugo.hpc.get([square(i) for i in range(4)])     # doctest: +SKIP
[0, 1, 4, 9]
"""

from .._feasibility import Waiting, WaitingList
from ._actors import ActorProxy, get_actor, kill
from ._cluster import ClusterInfo, cluster, waiting
from ._debug import debug
from ._distribute import BoundCall, DistributedClass, DistributedFunction, distribute
from ._futures import as_completed, cancel, get, put, wait
from ._imap import imap, map
from ._journal import Journal, journal
from ._launching import clusters, launch
from ._output import logs
from ._profile.run import Report, Run, profile
from ._readiness.measure import readiness
from ._readiness.report import ReadinessReport
from ._results import Failed, MapResults
from ._session import Connection, init, shutdown
from .optimize import OptimizationReport, optimize, set_optimize

__all__ = [
    "ActorProxy",
    "BoundCall",
    "ClusterInfo",
    "Connection",
    "DistributedClass",
    "DistributedFunction",
    "Failed",
    "Journal",
    "MapResults",
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
    "debug",
    "distribute",
    "get",
    "get_actor",
    "imap",
    "init",
    "journal",
    "kill",
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
