"""Which dashboard addresses may receive this account's Ray token (proxy and task counts).

A connected cluster publishes its dashboard address in its own key-value store, which the
cluster (or anyone who can write to that store) controls. Sending the token there would let it
steer the token to any host, and on a shared machine any local account can listen on a loopback
port. So the token goes to a dashboard only when (:func:`decide`):

- it is on the head's own host (the host of the GCS address), or on loopback when that head runs
  on this machine (:func:`dashboard_allowed`); and
- on this machine, the socket listening on its port belongs to a process of the cluster's own
  Ray session: the same kernel session id and the same Ray session folder as the process that
  listens on the GCS port (read from ``/proc``, see :mod:`.listeners`); or
- on another machine, where no such proof is possible, the user named it (``dashboard`` in a
  connect request) or the Manager started that head itself.

Otherwise there is no proxy and no task counts, and :class:`Decision` says why in a sentence.

>>> dashboard_allowed("http://10.0.0.5:8265", "10.0.0.5:6379", local_ips=set())
'http://10.0.0.5:8265'
>>> dashboard_allowed("http://203.0.113.9:80", "10.0.0.5:6379", local_ips=set()) is None
True
>>> decide("http://203.0.113.9:80", "10.0.0.5:6379", local_ips=set()).url is None
True
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import _processes as processes
from ..exceptions import OptionsError
from . import listeners

__all__ = ["Decision", "dashboard_allowed", "decide", "parse_user_dashboard"]

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


@dataclass(frozen=True)
class Decision:
    """Where the token may go: ``url`` (None: nowhere) and, when refused, ``reason``."""

    url: str | None
    reason: str | None = None


# (dashboard url, GCS address) -> the inode of the dashboard socket proven to be the cluster's:
# the same socket (same inode) needs no second scan of every process's descriptors.
_proven: dict[tuple[str, str], int] = {}
_proven_lock = threading.Lock()


def _port_of(address: str) -> int | None:
    try:
        return int(address.removeprefix("ray://").rpartition(":")[2])
    except ValueError:
        return None


def _serves(listener: listeners.Listener, host: str, local_ips: set[str]) -> bool:
    """Whether a connection to ``host`` on this machine reaches this listening socket."""
    bound = listener.host
    if bound in _ANY:
        return True
    if host in ("localhost", "127.0.0.1", "::1"):
        return _same_host(bound, "::1" if host == "::1" else "127.0.0.1")
    return _same_host(bound, host) or (host in _ANY and bound in local_ips)


def _sessions(port: int, host: str | None, local_ips: set[str]) -> tuple[set[int], set[tuple]]:
    """(inodes, {(uid, session id, session folder)}) of the processes listening on ``port``."""
    inodes: set[int] = set()
    sessions: set[tuple] = set()
    for listener in listeners.listening(port):
        if host is not None and not _serves(listener, host, local_ips):
            continue
        inodes.add(listener.inode)
        for pid in processes.socket_holders(listener.inode):
            session = listeners.session_of(pid)
            if session is not None and session[1]:
                sessions.add((listener.uid, *session))
    return inodes, sessions


def _belongs(url: str, gcs_address: str, local_ips: set[str]) -> str | None:
    """None if the dashboard's socket is held by the cluster's own Ray session, else why not."""
    split = _split(url)
    gcs_port = _port_of(gcs_address)
    if split is None or gcs_port is None:
        return f"{url} is not a dashboard address."
    _, host, port = split
    key = (url, gcs_address)
    current = {item.inode for item in listeners.listening(port) if _serves(item, host, local_ips)}
    with _proven_lock:
        if _proven.get(key) in current:
            return None
    inodes, dashboard = _sessions(port, host, local_ips)
    if not inodes:
        return f"nothing listens on port {port} of this machine."
    _, head = _sessions(gcs_port, None, local_ips)
    if not head:
        return (
            f"the cluster's GCS (port {gcs_port}) is not held by a process this account can "
            "see, so nothing ties the dashboard to it."
        )
    if not dashboard & head:
        return (
            f"port {port} of this machine is held by a process that is not part of the "
            f"cluster's Ray session (the one listening on port {gcs_port}); another program "
            "(or another account) may be listening there."
        )
    with _proven_lock:
        _proven[key] = next(iter(inodes & current), -1) if current else -1
    return None


def _is_here(host: str, local_ips: set[str]) -> bool:
    return host in _LOOPBACK or host in _ANY or any(_same_host(host, ip) for ip in local_ips)


def decide(
    url: str | None,
    gcs_address: str,
    *,
    local_ips: set[str],
    named: bool = False,
    ours: bool = False,
) -> Decision:
    """Whether this account's token may go to dashboard ``url`` of the cluster at ``gcs_address``.

    ``named``: the user gave this dashboard; ``ours``: the Manager started the head. A dashboard
    on this machine must be held by the cluster's own Ray session whatever else holds; one on
    another machine needs ``named`` or ``ours``. Blocking (reads ``/proc``).
    """
    if not url:
        return Decision(None)
    allowed = dashboard_allowed(url, gcs_address, local_ips)
    head = gcs_address.removeprefix("ray://").rpartition(":")[0].strip("[]")
    if allowed is None:
        return Decision(
            None,
            f"The dashboard {url} is not on the cluster's head ({head}): the server sends this "
            "account's Ray token to the dashboard it proxies, so it stays on the head's host.",
        )
    split = _split(allowed)
    assert split is not None  # dashboard_allowed returned a well-formed URL
    if _is_here(split[1], local_ips):
        why = _belongs(allowed, gcs_address, local_ips)
        if why is None:
            return Decision(allowed)
        return Decision(
            None,
            f"The dashboard {allowed} is not proxied (the server would send this account's Ray "
            f"token there): {why} Open the dashboard from the head's machine, or restart the "
            "cluster so that its own dashboard listens there.",
        )
    if named or ours:
        return Decision(allowed)
    return Decision(
        None,
        f"The dashboard {allowed} that the cluster publishes is not proxied: it is on another "
        "machine, where the server cannot check which process listens on that port, and it "
        "would receive this account's Ray token. To use it, connect again with it named "
        f'(dashboard: "{allowed}").',
    )
