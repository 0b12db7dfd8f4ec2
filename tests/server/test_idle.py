"""Idle timeout and maximum lifetime: a launched cluster stops by itself and the card says why.

Real clusters launched through REST, a real driver process (a kernel's `eugo.hpc.init`) holding
one busy. Times are measured and printed, never asserted against a bound tighter than the limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter import _processes as processes
from eugo_jupyter.server.expiry import Expiry, check_interval
from tests.fixtures.jupyter import fetch_json, poll_model

DEADLINE = 240.0  # generous: the machine is shared; we poll for a condition, never time it
POLL_S = 0.25  # polled often: the tests print how long after its limit a cluster stopped

DRIVER = textwrap.dedent(
    """
    import sys
    import eugo_jupyter as eugo
    print("ready", flush=True)
    eugo.hpc.init(address=sys.stdin.readline().strip())
    print("connected", flush=True)
    sys.stdin.read()  # connected until the test closes our stdin
    eugo.hpc.shutdown()
    """
)


async def _launch(jp_fetch: Any, **limits: float) -> dict[str, Any]:
    body = {"kind": "local", "name": "limited", "head": {"num_cpus": 1}, **limits}
    model = await fetch_json(jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body))
    assert model["expiry"]["fired"] is None
    return await poll_model(
        jp_fetch, model["id"], lambda m: m["status"] == "running", interval_s=POLL_S
    )


def _record(cluster_id: str) -> dict[str, Any]:
    path = Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "eugo" / "clusters" / f"{cluster_id}.json"
    return json.loads(path.read_text())


def _driver() -> subprocess.Popen[str]:
    """A kernel-like process, started before the cluster: its imports (slow on a busy machine)
    go on while the cluster launches, and are done before it connects (:func:`_connect`)."""
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _connect(driver: subprocess.Popen[str], address: str) -> None:
    assert driver.stdin is not None and driver.stdout is not None
    line = driver.stdout.readline()
    assert line.strip() == "ready", line + driver.stdout.read()[-2000:]
    driver.stdin.write(address + "\n")
    driver.stdin.flush()
    line = driver.stdout.readline()
    assert line.strip() == "connected", line + driver.stdout.read()[-2000:]


async def _remove(jp_fetch: Any, model: dict[str, Any]) -> None:
    record = _record(model["id"])
    await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert processes.owned_groups(record["pgids"], record["temp_dir"]) == []


async def test_idle_cluster_stops_after_its_timeout_and_says_why(jp_fetch: Any) -> None:
    model = await _launch(jp_fetch, idle_timeout=4)
    running_at = time.monotonic()
    record = _record(model["id"])
    counting = await poll_model(
        jp_fetch, model["id"], lambda m: m["expiry"]["stops_in"] is not None, interval_s=POLL_S
    )
    assert counting["expiry"]["stops_because"] == "idle"
    assert 0 <= counting["expiry"]["stops_in"] <= 4
    stopped = await poll_model(
        jp_fetch, model["id"], lambda m: m["status"] == "stopped", interval_s=POLL_S
    )
    print(f"idle_timeout=4 s: stopped {time.monotonic() - running_at:.1f} s after running")
    assert stopped["expiry"]["fired"] == "idle"
    assert stopped["expiry"]["reason"] == (
        "Stopped after 4 s without tasks or connected kernels (idle timeout)."
    )
    assert stopped["nodes"] == []
    assert processes.owned_groups(record["pgids"], record["temp_dir"]) == []
    assert _record(model["id"])["stop_reason"] == stopped["expiry"]["reason"]
    listed = await fetch_json(jp_fetch, "eugo", "clusters")
    assert [m["status"] for m in listed if m["id"] == model["id"]] == ["stopped"]
    await _remove(jp_fetch, model)


async def test_a_connected_kernel_keeps_it_alive_until_it_leaves(jp_fetch: Any) -> None:
    loop = asyncio.get_running_loop()
    driver = _driver()
    # Long enough for the kernel to connect before the cluster's first idle timeout.
    idle_timeout = 10
    try:
        model = await _launch(jp_fetch, idle_timeout=idle_timeout)
        await loop.run_in_executor(None, _connect, driver, model["address"])
    except BaseException:
        driver.kill()
        driver.wait()
        raise
    try:
        # Watch, with the kernel connected, for a whole idle timeout after it connected plus a
        # few of the manager's looks: the cluster was idle from the moment it ran (before the
        # kernel connected), so had the kernel not counted, it would have stopped by then.
        until = time.monotonic() + idle_timeout + 3 * check_interval(idle_timeout, None)
        while time.monotonic() < until:
            seen = await fetch_json(jp_fetch, "eugo", "clusters", model["id"])
            assert seen["status"] == "running", seen
            await asyncio.sleep(0.5)
        assert seen["expiry"]["idle_for"] is None and seen["expiry"]["stops_in"] is None
    finally:
        assert driver.stdin is not None
        driver.stdin.close()  # the kernel disconnects
        driver.wait(timeout=DEADLINE)
    stopped = await poll_model(
        jp_fetch, model["id"], lambda m: m["status"] == "stopped", interval_s=POLL_S
    )
    assert stopped["expiry"]["fired"] == "idle"
    await _remove(jp_fetch, model)


async def test_max_lifetime_stops_even_a_busy_cluster(jp_fetch: Any) -> None:
    loop = asyncio.get_running_loop()
    driver = _driver()
    try:
        # Long enough for the kernel to connect well before the lifetime ends.
        model = await _launch(jp_fetch, max_lifetime=20, idle_timeout=3600)
        await loop.run_in_executor(None, _connect, driver, model["address"])
        # The kernel connected while the cluster ran: what stops it below is a busy cluster.
        seen = await fetch_json(jp_fetch, "eugo", "clusters", model["id"])
        assert seen["status"] == "running", seen
        stopped = await poll_model(
            jp_fetch, model["id"], lambda m: m["status"] == "stopped", interval_s=POLL_S
        )
    finally:
        driver.kill()
        driver.wait()
    assert stopped["expiry"]["fired"] == "max_lifetime"
    assert stopped["expiry"]["reason"] == "Stopped when it reached its maximum lifetime of 20 s."
    await _remove(jp_fetch, model)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"idle_timeout": -1}, "idle_timeout=-1 is not allowed: give seconds above 0"),
        ({"max_lifetime": "1h"}, "max_lifetime='1h' is not allowed"),
        ({"idle_timeout": True}, "idle_timeout=True is not allowed"),
    ],
)
async def test_bad_limits_are_refused_with_the_fix(
    jp_fetch: Any, limits: dict[str, Any], message: str
) -> None:
    body = {"kind": "local", "head": {"num_cpus": 1}, **limits}
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))
    assert err.value.code == 400
    assert message in json.loads(err.value.response.body)["message"]
    assert await fetch_json(jp_fetch, "eugo", "clusters") == []


def test_without_limits_nothing_counts_down() -> None:
    expiry = Expiry(idle_timeout=None, max_lifetime=None, started=0.0)
    assert expiry.observe(busy=False, now=1e9) is None
    assert expiry.to_model(now=1e9)["stops_in"] is None


def test_busy_resets_the_idle_clock_and_the_earlier_limit_counts_down() -> None:
    expiry = Expiry(idle_timeout=60, max_lifetime=100, started=0.0)
    assert expiry.observe(busy=False, now=10) is None
    assert (
        expiry.to_model(now=10)["stops_in"] == 60 and expiry.to_model(10)["stops_because"] == "idle"
    )
    assert expiry.observe(busy=True, now=50) is None
    assert expiry.to_model(now=50)["idle_for"] is None
    assert expiry.to_model(now=50)["stops_because"] == "max_lifetime"
    assert expiry.observe(busy=False, now=60) is None
    assert expiry.observe(busy=False, now=100) == "max_lifetime"


class _Cluster:
    status = "running"
    record: dict[str, Any] = {"address": "127.0.0.1:1", "dashboard_url": None}


def _watch_idle(monkeypatch: pytest.MonkeyPatch, task_counts_busy: bool) -> list[bool]:
    """Run the idle watch over a 1 s idle timeout with no driver connected; the ``counts``
    argument of each look (False: the cheap driver read; True: a pass over the task table).

    The GCS is replaced by a recorder here (what the watch asks is the point); the real reads
    are in the tests above.
    """
    from eugo_jupyter.server import expiry

    looks: list[bool] = []

    def busy(address: str, dashboard: str | None, timeout: float, counts: bool = True) -> bool:
        looks.append(counts)
        return counts and task_counts_busy and looks.count(True) == 1

    monkeypatch.setattr(expiry, "busy", busy)
    limit = Expiry(idle_timeout=1.0, max_lifetime=None, started=None)
    reasons: list[str | None] = []

    async def expire(reason: str | None) -> None:
        reasons.append(reason)

    asyncio.run(
        expiry.watch(
            _Cluster(), limit, known=lambda: not reasons, save=lambda: None, expire=expire,
            read_timeout=1.0,
        )
    )  # fmt: skip
    assert reasons == [limit.reason()] and limit.fired == "idle"
    return looks


def test_the_idle_watch_counts_tasks_only_to_confirm_before_stopping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each look is the cheap driver read; the task table is read once, before stopping.
    looks = _watch_idle(monkeypatch, task_counts_busy=False)
    assert looks.count(True) == 1 and looks[-1] is True and len(looks) >= 3


def test_a_task_without_a_driver_found_when_confirming_restarts_the_idle_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A detached actor's task: no driver, but the counts show it running: not stopped then.
    looks = _watch_idle(monkeypatch, task_counts_busy=True)
    first, second = [i for i, counts in enumerate(looks) if counts]
    assert second - first >= 3  # idle again for a whole timeout before the next confirmation
