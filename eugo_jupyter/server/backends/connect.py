"""The `connect` backend: attach to a Ray cluster someone else started; never stop it.

>>> backend = ConnectBackend()
>>> backend.validate({"kind": "connect", "address": "10.0.0.5:6379"}).fields
'10.0.0.5:6379'
"""

from __future__ import annotations

import re
from typing import Any

from ...exceptions import ClusterError, OptionsError
from .. import monitor, requests
from .base import Backend, Observed, Plan, Spec

__all__ = ["ConnectBackend"]

_ADDRESS_RE = re.compile(
    r"^(?P<scheme>ray://)?(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])"
    r":(?P<port>[0-9]{1,5})$"
)


class ConnectBackend(Backend):
    """``kind: "connect"``: the spec is the head's address; stopping only detaches."""

    kind = "connect"
    owns_processes = False
    starts_quickly = True

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "address"), "a connect request")
        address = body.get("address")
        match = _ADDRESS_RE.match(address.strip()) if isinstance(address, str) else None
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
            fields=address,
        )

    def plan(self, spec: Spec) -> Plan:
        return Plan(summary=f"Attach to the Ray cluster at {spec.fields}; nothing is started.")

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Check that a Ray cluster answers; raises ClusterError within seconds if not."""
        address = str(spec.fields)
        if not monitor.reachable(address, 3.0):
            raise ClusterError(
                f"No Ray cluster answers at {address}: nothing accepts connections there. Check "
                "the host and the port (the head's GCS port, 6379 unless changed, as printed by "
                "`ray start --head`), and that this machine can reach it."
            )
        dashboard = None
        if not address.startswith("ray://"):
            try:
                monitor.read(address, None, 3.0)
            except Exception as exc:  # noqa: BLE001 - any failure means "not a GCS"
                text = str(exc).strip()
                raise ClusterError(
                    f"Something answers at {address}, but not as a Ray cluster's GCS "
                    f"({text.splitlines()[0][:400] if text else type(exc).__name__}). Give the "
                    "head's GCS address (host:port), or ray://host:10001 for a Ray client server."
                ) from None
            dashboard = monitor.dashboard_of(address, 3.0)
        return {"address": address, "dashboard_url": dashboard}

    def state(self, record: dict[str, Any]) -> Observed:
        return Observed(address=record.get("address"), dashboard_url=record.get("dashboard_url"))

    def stop(self, record: dict[str, Any]) -> list[str]:
        return []  # not ours: detaching only forgets the record
