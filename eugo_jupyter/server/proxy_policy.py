"""Which dashboard addresses may receive this account's Ray token (proxy and task counts).

A connected cluster publishes its dashboard address in its own key-value store, which the
cluster (or anyone who can write to that store) controls. Sending the token there would let it
steer the token to any host. So a dashboard address, published or typed by the user, is used
only on the head's own host (the host of the GCS address the user gave), or on loopback when
that head runs on this machine; the dashboard of a cluster we launched is ours (127.0.0.1).

>>> dashboard_allowed("http://10.0.0.5:8265", "10.0.0.5:6379", local_ips=set())
'http://10.0.0.5:8265'
>>> dashboard_allowed("http://203.0.113.9:80", "10.0.0.5:6379", local_ips=set()) is None
True
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from ..exceptions import OptionsError

__all__ = ["dashboard_allowed", "parse_user_dashboard"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_ANY = {"0.0.0.0", "::"}


def _split(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a plain http(s)://host:port[/] URL, else None."""
    if "://" not in url:
        url = f"http://{url}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if (
        parts.scheme not in ("http", "https")
        or not host
        or port is None
        or parts.username is not None
        or parts.password is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        return None
    return parts.scheme, host, port


def _same_host(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


def dashboard_allowed(published: str | None, gcs_address: str, local_ips: set[str]) -> str | None:
    """``published`` as a URL if it is on the cluster's head, else None (never proxied).

    ``local_ips`` are this machine's addresses: a head on one of them may publish a loopback
    dashboard (``ray start --dashboard-host=127.0.0.1``), which is then on the same machine.
    """
    if not published:
        return None
    split = _split(published)
    head = gcs_address.removeprefix("ray://").rpartition(":")[0].strip("[]").lower()
    if split is None or not head:
        return None
    scheme, host, port = split
    if host in _ANY:
        host = head
    head_is_here = head in _LOOPBACK or any(_same_host(head, ip) for ip in local_ips)
    if not (_same_host(host, head) or (head_is_here and host in _LOOPBACK)):
        return None
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def parse_user_dashboard(value: object) -> str | None:
    """A dashboard address the user gave in a connect request (``http://host:port``), or None."""
    if value is None:
        return None
    split = _split(value) if isinstance(value, str) else None
    if split is None:
        raise OptionsError(
            f"dashboard={value!r} is not allowed: give the dashboard's http://host:port (for "
            "example http://10.0.0.5:8265), or leave it out to use the one the head publishes."
        )
    scheme, host, port = split
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"
