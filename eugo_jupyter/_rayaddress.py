"""Asking a Ray address, before connecting, whether it speaks Ray and whether it wants a token.

One small gRPC call each, made here with grpcio (which Ray ships) rather than through Ray's own
client, whose authentication mode is global to the process:

- :func:`gcs_wants_token`: a GCS answers ``GetClusterId`` without a token only when it was started
  without authentication.
- :func:`auth_mismatch`: the sentence to show when this process and the cluster disagree (a
  client that sends a token to a cluster without authentication gets tasks that run and actors
  that "die before they ran"; Ray's message points nowhere near the cause);
  :func:`mismatch_sentence` the same for a GCS already asked.
- :func:`speaks_gcs`: whether a ``host:port`` is a Ray GCS, within the timeout (Ray's own
  client gives up on a port that accepts TCP but speaks no gRPC only after about 40 s).
- :func:`speaks_ray_client`: whether a ``ray://`` address is a Ray client server.
- :func:`tcp_answer` and :func:`reachable`: whether anything accepts a TCP connection at an
  address, the one place this package (its server, its kernels and its tests) asks that.

>>> auth_mismatch("10.0.0.5:6379")      # doctest: +SKIP
'The cluster at 10.0.0.5:6379 has token authentication off, but this kernel sends a token ...'
>>> tcp_answer("not an address")
'invalid'
"""

from __future__ import annotations

import os
import socket
from typing import Any, Literal

__all__ = [
    "auth_mismatch",
    "client_sends_token",
    "gcs_wants_token",
    "mismatch_sentence",
    "reachable",
    "speaks_gcs",
    "speaks_ray_client",
    "tcp_answer",
]

TcpAnswer = Literal["open", "refused", "unreachable", "invalid"]

_GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
_CLIENT_METHOD = "/ray.rpc.RayletDriver/ClusterInfo"


def tcp_answer(address: str, timeout: float = 3.0) -> TcpAnswer:
    """What a TCP connect to ``host:port`` (or ``ray://host:port``) gets.

    ``"open"`` (something accepts), ``"refused"`` (the host answers, nothing listens),
    ``"unreachable"`` (no answer in ``timeout`` seconds, or no route) or ``"invalid"`` (not a
    ``host:port``). An empty host means this machine.
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        target = (host.strip("[]") or "127.0.0.1", int(port))
    except ValueError:
        return "invalid"
    try:
        with socket.create_connection(target, timeout=timeout):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except (OSError, ValueError):  # timeouts, no route, a name that does not resolve
        return "unreachable"


def reachable(address: str, timeout: float = 3.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (or ``ray://host:port``)."""
    return tcp_answer(address, timeout) == "open"


def _call(target: str, method: str, request: bytes, timeout: float, metadata: Any = None) -> Any:
    """The gRPC status code of one unary call (``grpc.StatusCode.OK`` on success)."""
    import grpc

    channel = grpc.insecure_channel(target)
    try:
        call = channel.unary_unary(
            method, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        call(request, timeout=timeout, metadata=metadata)
        return grpc.StatusCode.OK
    except grpc.RpcError as exc:
        return exc.code()
    finally:
        channel.close()


def gcs_wants_token(address: str, timeout: float = 5.0) -> bool | None:
    """True if the GCS at ``host:port`` refuses a request without a token, False if it answers
    one, None if it does not answer as a GCS (unreachable, busy, or something else)."""
    import grpc

    code = _call(address, _GCS_METHOD, b"", timeout)
    if code == grpc.StatusCode.OK:
        return False
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return True
    return None


def speaks_gcs(address: str, timeout: float = 5.0) -> bool:
    """Whether a Ray GCS answers at ``host:port`` within ``timeout`` seconds (with or without
    authentication): one ``GetClusterId`` call."""
    return gcs_wants_token(address, timeout) is not None


def client_sends_token() -> bool:
    """Whether this process sends a Ray token when it connects (after ``enable_token_auth``)."""
    mode = os.environ.get("RAY_AUTH_MODE", "").strip().lower()
    return mode == "token"


def auth_mismatch(address: str, timeout: float = 5.0) -> str | None:
    """A sentence naming which side has token authentication on and how to match, or None."""
    wants = gcs_wants_token(address, timeout)
    return None if wants is None else mismatch_sentence(address, wants)


def mismatch_sentence(address: str, wants: bool) -> str | None:
    """:func:`auth_mismatch` for a GCS already asked (``wants``: from :func:`gcs_wants_token`)."""
    sends = client_sends_token()
    if wants == sends:
        return None
    if sends:
        return (
            f"The cluster at {address} has token authentication off, but this kernel sends a "
            "token (RAY_AUTH_MODE=token, or a token in ~/.ray/auth_token): Ray's tasks would run "
            "and its actors fail. Match them: restart the cluster with authentication "
            "(RAY_AUTH_MODE=token when running `ray start`), or set RAY_AUTH_MODE=disabled in "
            "this kernel's environment before connecting."
        )
    return (
        f"The cluster at {address} has token authentication on, but this kernel sends no token "
        f"(RAY_AUTH_MODE={os.environ.get('RAY_AUTH_MODE', 'unset')}). Match them: put the "
        "cluster's token in ~/.ray/auth_token (mode 0600) or RAY_AUTH_TOKEN, and leave "
        "RAY_AUTH_MODE unset or set it to token."
    )


def speaks_ray_client(address: str, timeout: float = 5.0) -> bool:
    """Whether ``ray://host:port`` (or ``host:port``) is a Ray client server.

    A Ray client server answers ``ClusterInfo(PING)``, or refuses it for want of a token, which
    only a Ray client server does for that method.
    """
    import grpc
    from ray.core.generated import ray_client_pb2

    # Generated protobuf classes: their type stubs do not list them.
    info = ray_client_pb2.ClusterInfoRequest  # type: ignore[attr-defined]
    ping = ray_client_pb2.ClusterInfoType.PING  # type: ignore[attr-defined]
    request = info(type=ping)
    target = address.removeprefix("ray://")
    code = _call(target, _CLIENT_METHOD, request.SerializeToString(), timeout)
    return code in (grpc.StatusCode.OK, grpc.StatusCode.UNAUTHENTICATED)
