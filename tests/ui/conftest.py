"""Fixtures for the browser tests: a real `jupyter lab` process and the system Chromium.

The server runs as a subprocess with its own runtime, config, settings and workspace folders,
bound to 127.0.0.1 with a token, exactly as a user starts it (the extension is enabled by its
installed config file, not by the test). Chromium is driven through Playwright's Python API.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = os.environ.get("EUGO_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
# Generous: this only bounds how long a broken server may hang the suite, it measures nothing.
STARTUP_DEADLINE_S = 300

T = TypeVar("T")


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> Iterator[Any]:
    """Opt out of pytest-jupyter's shared event loop: these tests start `jupyter lab` as a
    process, and Playwright's sync API runs a loop of its own that must not be closed under it."""
    import asyncio

    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> Iterator[None]:
    """No in-process Jupyter server to clean up here (see jp_asyncio_loop)."""
    yield


@dataclass
class Lab:
    """A running JupyterLab: its base URL, token and a small authenticated REST client."""

    url: str
    token: str
    log: Path
    notebooks: Path  # the server's root folder: what a save writes, as the user's disk holds it

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text else None
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            return error.code, json.loads(text) if text.startswith("{") else text

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_settings(settings_dir: Path) -> None:
    # No news/update toasts over the panel; nothing else differs from a fresh user.
    folder = settings_dir / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True)
    (folder / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


@contextlib.contextmanager
def running_lab(
    root: Path, config: dict[str, Any] | None = None, env_extra: dict[str, str] | None = None
) -> Iterator[Lab]:
    """`jupyter lab --no-browser` on a free port, in folders under ``root``, with more server
    ``config`` (a jupyter_server_config.json) and environment; every cluster left behind is
    shut down after."""
    for name in ("runtime", "config", "settings", "workspaces", "notebooks"):
        (root / name).mkdir()
    if config:
        (root / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
    _write_settings(root / "settings")
    env = {k: v for k, v in os.environ.items() if k not in {"RAY_ADDRESS", "EUGO_CLUSTER_ADDRESS"}}
    env.update(
        JUPYTER_RUNTIME_DIR=str(root / "runtime"),
        JUPYTER_CONFIG_DIR=str(root / "config"),
        JUPYTERLAB_SETTINGS_DIR=str(root / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"),
    )
    env.update(env_extra or {})
    port, token = _free_port(), secrets.token_hex(16)
    log = root / "jupyter-lab.log"
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", "--allow-root",
        "--EugoManagerExtension.find_clusters=False",
        "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root / 'notebooks'}",
    ]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    server = Lab(url=url, token=token, log=log, notebooks=root / "notebooks")
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{server.log_tail()}")
            try:
                status, _ = server.api("GET", "api/status")
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer on port {port}:\n{server.log_tail()}")
            time.sleep(0.5)
        status, body = server.api("GET", "eugo/clusters")
        assert status == 200, (
            f"GET /eugo/clusters answered {status} {body!r}: the eugo_jupyter server extension is "
            f"not enabled; reinstall with `pip install -e .`.\n{server.log_tail()}"
        )
        yield server
    finally:
        _shut_down_clusters(server)
        process.terminate()
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _shut_down_clusters(server: Lab) -> None:
    """Every cluster still listed, shut down at once: each stop takes seconds of waiting for
    its processes to end, and none needs another's to be over."""
    try:
        _, clusters = server.api("GET", "eugo/clusters")
    except OSError:
        return
    ids = [c["id"] for c in clusters] if isinstance(clusters, list) else []

    def shut_down(cluster_id: str) -> None:
        with contextlib.suppress(OSError):
            server.api("DELETE", f"eugo/clusters/{cluster_id}")

    with ThreadPoolExecutor(max_workers=max(1, len(ids))) as pool:
        list(pool.map(shut_down, ids))


@contextlib.contextmanager
def meanwhile(manager: contextlib.AbstractContextManager[T]) -> Iterator[Callable[[], T]]:
    """Enter ``manager`` in a thread while the caller goes on (a second thing to start that
    takes seconds and does not need the first); yields a function that waits for the entry and
    returns its value. On leaving, the entry is waited for and ``manager`` exited; an entry
    that failed raises then, if nothing called the function."""
    stack = contextlib.ExitStack()
    pool = ThreadPoolExecutor(max_workers=1)
    entered = pool.submit(stack.enter_context, manager)
    try:
        yield entered.result
    finally:
        pool.shutdown(wait=True)
        stack.close()
    entered.result()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """`jupyter lab --no-browser` on a free port; every cluster left behind is shut down after."""
    with running_lab(tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The system Chromium, headless, driven by Playwright."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"No Chromium at {CHROMIUM}: `apt-get install -y chromium` (or set EUGO_CHROMIUM)."
        )
    with sync_playwright() as p:
        instance = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh tab with JupyterLab loaded in a workspace of its own (no layout carried over from
    another test); console errors are kept on ``page.console_errors``."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(120_000)
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.console_errors = errors
    workspace = re.sub(r"[^A-Za-z0-9-]", "-", request.node.name)
    tab.goto(f"{lab.url}lab/workspaces/{workspace}?reset&token={lab.token}")
    tab.wait_for_selector("#jp-main-dock-panel", state="visible")
    yield tab
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"failure-{workspace}.png"))
        print(f"jupyter lab log (tail):\n{lab.log_tail()}")
    context.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Keep each phase's report on the test item, so the page fixture knows the test failed.
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go (git-ignored; CI keeps them)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
