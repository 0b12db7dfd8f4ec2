"""A real Jupyter server with the EugoHPC Manager enabled and authentication required.

Jupyter test fixtures give every test a fresh home and runtime folder; the runtime folder is kept
for the whole module here, so cluster records (and with them the cluster) carry from one test's
server to the next, the way a restarted server finds its clusters again. Ray's auth token is
pinned to this account's real one, which the fresh home would otherwise hide.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_TOKEN = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


@pytest.fixture(scope="session", autouse=True)
def _ray_token() -> Iterator[Path]:
    if not _TOKEN.exists():
        from ray._private.authentication.authentication_token_generator import (
            generate_new_authentication_token,
        )

        _TOKEN.parent.mkdir(parents=True, exist_ok=True)
        _TOKEN.write_text(generate_new_authentication_token())
        _TOKEN.chmod(0o600)
    saved = os.environ.get("RAY_AUTH_TOKEN_PATH")
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(_TOKEN)
    yield _TOKEN
    if saved is None:
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runtime")


@pytest.fixture
def jp_runtime_dir(runtime_dir: Path) -> Path:
    return runtime_dir


@pytest.fixture
def manager_config() -> dict[str, object]:
    """The EugoManagerExtension's settings; a test module overrides this fixture for its own.

    Other Ray clusters on a shared test machine are not these tests' business: finding them is
    off unless a module turns it on.
    """
    return {"find_clusters": False}


@pytest.fixture
def jp_server_config(manager_config: dict[str, object]) -> dict[str, object]:
    return {
        "ServerApp": {
            "jpserver_extensions": {"eugo_jupyter": True},
            "allow_unauthenticated_access": False,
        },
        "EugoManagerExtension": manager_config,
    }
