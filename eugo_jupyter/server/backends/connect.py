"""The `connect` backend: attach to a Ray cluster someone else started; never stop it.

>>> backend = ConnectBackend()
>>> backend.validate({"kind": "connect", "address": "10.0.0.5:6379"}).fields.address
'10.0.0.5:6379'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ... import _rayaddress
from ..._raytoken import secure_token_file
from ...exceptions import ClusterError, OptionsError
from .. import monitor, proxy_policy, requests
from ..models import error_text
from .base import Backend, Observed, Plan, Spec

__all__ = ["ConnectBackend"]

_ADDRESS_RE = re.compile(
    r"^(?P<scheme>ray://)?(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])"
    r":(?P<port>[0-9]{1,5})$"
)


@dataclass(frozen=True)
class ConnectSpec:
    """A checked connect request: the head's address and a dashboard the user gave, if any."""

    address: str
    dashboard: str | None = None

    def __str__(self) -> str:
        return self.address


class ConnectBackend(Backend):
    """``kind: "connect"``: the spec is the head's address; stopping only detaches."""

    kind = "connect"
    label = "connected"
    stop_effect = "The cluster keeps running; this server and new kernels stop using it."
    owns_processes = False
    starts_quickly = True

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "address", "dashboard"), "a connect request")
        address = body.get("address")
        match = _ADDRESS_RE.fullmatch(address.strip()) if isinstance(address, str) else None
        if match is None or not 1 <= int(match.group("port")) <= 65535:
            raise OptionsError(
                f"address={address!r} is not allowed: give host:port of the head's GCS (for "
                "example 10.0.0.5:6379, as printed by `ray start --head`) or ray://host:10001."
            )
        address = address.strip()  # type: ignore[union-attr]
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), address),
            lifetime=None,
            fields=ConnectSpec(address, proxy_policy.parse_user_dashboard(body.get("dashboard"))),
        )

    def plan(self, spec: Spec) -> Plan:
        return Plan(summary=f"Attach to the Ray cluster at {spec.fields}; nothing is started.")

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Check that a Ray cluster answers; raises ClusterError within seconds if not.

        The dashboard is one the user gave; without it, the one the head publishes, only if
        the token may go there (see :func:`..proxy_policy.decide`: on this machine its socket
        must belong to the cluster's own Ray session; elsewhere only a dashboard the user
        names is used). The server sends this account's Ray token to the dashboard it proxies.
        """
        fields: ConnectSpec = spec.fields
        address, dashboard = fields.address, fields.dashboard
        secure_token_file()
        if not monitor.reachable(address, 3.0):
            raise ClusterError(
                f"No Ray cluster answers at {address}: nothing accepts connections there. Check "
                "the host and the port (the head's GCS port, 6379 unless changed, as printed by "
                "`ray start --head`), and that this machine can reach it."
            )
        problem = _protocol_problem(address)
        if problem:
            raise ClusterError(problem)
        if not address.startswith("ray://"):
            try:
                monitor.read(address, None, 3.0)
            except Exception as exc:  # noqa: BLE001 - any failure means "not a GCS"
                raise ClusterError(
                    f"Something answers at {address}, but not as a Ray cluster's GCS "
                    f"({error_text(exc)}). Give the "
                    "head's GCS address (host:port), or ray://host:10001 for a Ray client server."
                ) from None
        named, refused = dashboard is not None, None
        if named:
            decision = proxy_policy.decide(
                dashboard, address, local_ips=monitor.local_ips(), named=True
            )
            if decision.url is None:
                raise ClusterError(
                    f"dashboard={dashboard!r}: {decision.reason} Give the head's own dashboard, "
                    "or leave dashboard out."
                )
        elif not address.startswith("ray://"):
            published = monitor.dashboard_of(address, 3.0)
            decision = proxy_policy.decide(published, address, local_ips=monitor.local_ips())
            dashboard, refused = decision.url, decision.reason
        return {
            "address": address,
            "dashboard_url": dashboard,
            "dashboard_named": named,
            "dashboard_refused": refused,
        }

    def state(self, record: dict[str, Any]) -> Observed:
        return Observed(address=record.get("address"), dashboard_url=record.get("dashboard_url"))

    def stop(self, record: dict[str, Any]) -> list[str]:
        return []  # not ours: detaching only forgets the record

    def adopt(self, record: dict[str, Any]) -> str | None:
        # A record may predate the dashboard check (or have been edited): check it again; a
        # dashboard the token may not go to is dropped.
        record["dashboard_url"] = proxy_policy.dashboard_allowed(
            record.get("dashboard_url"), str(record.get("address")), monitor.local_ips()
        )
        return "running"


def _protocol_problem(address: str) -> str | None:
    """Why connecting to ``address`` would fail in a confusing way, or None (blocking)."""
    if address.startswith("ray://"):
        if _rayaddress.speaks_ray_client(address, 5.0):
            return None
        return (
            f"Something answers at {address}, but not as a Ray client server. Give the address "
            "of the head's client server (ray://host:10001 by default), or the GCS address "
            "(host:port) without ray://."
        )
    wants = _rayaddress.gcs_wants_token(address, 5.0)  # one call: is it a GCS, and its auth
    if wants is None:  # Ray's own client takes 40 s to say so
        return (
            f"Something answers at {address}, but not as a Ray cluster's GCS (no answer to a "
            "GCS request within 5 s). Give the head's GCS address (host:port), or "
            "ray://host:10001 for a Ray client server."
        )
    monitor.auth_headers()  # sets this process's auth mode, as a connection would
    return _rayaddress.mismatch_sentence(address, wants)
