"""Ray's Prometheus exporters, which answer anyone without a token: off on launched clusters.

Three kinds of Prometheus endpoint listen on every interface of a node started by ``ray start``,
whatever ``--dashboard-host`` says, and serve metrics to any request (no token):

- each node's metrics export port (the dashboard agent's exporter, ``--metrics-export-port``);
- the dashboard's own metrics (``DASHBOARD_METRIC_PORT``, 44227 by default, on the head);
- the autoscaler monitor's metrics (``AUTOSCALER_METRIC_PORT``, 44217 by default, on the head).

The first is turned off by Ray's ``enable_metrics_collection`` setting (the raylet then starts
the agent with ``--disable-metrics-collection``). The other two have no switch and no host
setting; given the port -1 they fail to bind, log that once, and the process carries on
without them. Ray's gRPC ports and the agents' HTTP ports, which refuse requests without the
token, are unchanged.

>>> closed_exporters()["RAY_enable_metrics_collection"]
'0'
"""

from __future__ import annotations

__all__ = ["closed_exporters"]


def closed_exporters() -> dict[str, str]:
    """Environment for ``ray start`` that leaves no unauthenticated Prometheus port open."""
    return {
        "RAY_enable_metrics_collection": "0",
        # Not a port: the exporter's bind fails, which Ray logs and survives (checked in tests).
        "DASHBOARD_METRIC_PORT": "-1",
        "AUTOSCALER_METRIC_PORT": "-1",
    }
