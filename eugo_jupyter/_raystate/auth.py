"""Ray's token and dashboard: the token this process sends, a new token, the dashboard's address
and headers, and Ray's log folding."""

from __future__ import annotations

import logging


def enable_token_auth() -> None:
    """Have this process send the account's Ray token if one exists (Ray's own client setup).

    Quiet: Ray's notice is written for ``ray start``, not for a client. A Ray without token
    authentication, or without a usable token, is left as it is (Ray's own error then says
    what to do).
    """
    try:
        from ray._private.authentication import authentication_token_setup as setup
    except ImportError:  # a Ray without token authentication
        return
    quiet = logging.getLogger(setup.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    except Exception:  # noqa: BLE001 - without a usable token, Ray's own error says what to do
        pass
    finally:
        quiet.setLevel(level)


#: The logger that says "Token authentication is enabled" at each connection (a private module).
TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


def keep_every_log_line() -> None:
    """Ray's log stream in this process no longer folds repeated lines ("[repeated 5x across
    cluster]"): a notebook shows every line. A Ray without that switch is left as it is."""
    try:
        from ray._private import ray_logging

        ray_logging.RAY_DEDUP_LOGS = False  # type: ignore[attr-defined]
    except (ImportError, AttributeError):
        pass


def dashboard_auth_headers() -> dict[str, str]:
    """The HTTP header that carries this account's Ray token to a dashboard (empty without)."""
    try:
        from ray._private.authentication.http_token_authentication import (
            get_auth_headers_if_auth_enabled,
        )

        return dict(get_auth_headers_if_auth_enabled({}))
    except Exception:  # noqa: BLE001 - a Ray without token auth: no header
        return {}


def published_dashboard(gcs_address: str, timeout: float = 5.0) -> str | None:
    """The dashboard address a cluster published in its GCS key-value store, or None."""
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        client = GcsClient(address=gcs_address)
        value = client.internal_kv_get(b"dashboard", b"dashboard", timeout=timeout)
    except Exception:  # noqa: BLE001 - a cluster without dashboard is still usable
        return None
    return value.decode() if value else None


def new_token() -> str:
    """A new Ray authentication token, as Ray itself generates one."""
    from ray._private.authentication.authentication_token_generator import (
        generate_new_authentication_token,
    )

    return str(generate_new_authentication_token())
