"""The SSH backend on the test bed: separate hosts with their own address, sshd and /data.

Real processes throughout: sshd in each test host, `ray start` over ssh, the Manager over REST,
a driver process that pins tasks to nodes. Host 3 has no Ray (the venv is hidden from it), host 4
refuses the key, host 5 is the first host's partner for a head on the first host (host 2 is lost
by another test). A host is lost by deleting its namespace, as a machine that vanishes.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from eugo_jupyter import _processes as processes
from eugo_jupyter.server.backends import ray_start
from tests.fixtures.jupyter import fetch_json, poll_model
from tests.testbed import Host, TestBed, available, left_on_hosts

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))

DEADLINE = 300.0  # generous: the machine is shared; we poll for a condition, never time it
VENV = str(Path(sys.executable).parent.parent)
RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def bed() -> Iterator[TestBed]:
    with TestBed(5, refuse_key=(3,), hide={2: (VENV,)}) as testbed:
        yield testbed


def _body(bed: TestBed, hosts: list[int], **ssh: Any) -> dict[str, Any]:
    return {
        "kind": "ssh",
        "name": "lab",
        "ssh": {
            "hosts": [bed.hosts[i].address for i in hosts],
            "user": "root",
            "key_file": str(bed.key),
            "ray_path": RAY,
            "cpus_per_host": 2,
            **ssh,
        },
        "head": {"num_cpus": 1},
    }


def _running_on(bed: TestBed, hosts: list[Host]) -> list[str]:
    """Every process on these hosts but their sshd: a host runs nothing else but our nodes.

    Stronger than matching the nodes' temp folders: Ray renames its worker processes
    (``ray::IDLE``), so a worker that outlived its raylet would not match.
    """
    found = []
    for host in hosts:
        pids = subprocess.run(
            ["ip", "netns", "pids", host.name], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in pids:
            line = processes.cmdline(int(pid))  # "" once gone meanwhile
            if line.startswith(("/usr/sbin/sshd", "sshd")) or not line:
                continue
            found.append(f"{host.address} pid {pid}: {line[:120]}")
    return found


async def test_preview_names_each_hosts_command(jp_fetch: Any, bed: TestBed) -> None:
    plan = await fetch_json(
        jp_fetch, "eugo", "clusters", "preview", method="POST",
        body=json.dumps(_body(bed, [0, 1])),
    )  # fmt: skip
    assert plan["kind"] == "ssh"
    head, first, second = plan["commands"]
    assert head[:2] == [ray_start.ray_executable(), "start"] and "--head" in head
    for command, host in ((first, bed.hosts[0]), (second, bed.hosts[1])):
        assert command[0] == "ssh" and f"root@{host.address}" in command
        assert f"--node-ip-address={host.address}" in command[-1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hosts": []}, "ssh.hosts=[] is not allowed"),
        ({"hosts": ["-oProxyCommand=x"]}, "is not allowed: give a host name or an address"),
        ({"key_file": "/nonexistent/key"}, "does not exist on this machine"),
        ({"head_on": "cloud"}, "ssh.head_on='cloud' is not allowed"),
    ],
)
async def test_bad_ssh_specs_are_refused_with_the_fix(
    jp_fetch: Any, bed: TestBed, change: dict[str, Any], message: str
) -> None:
    body = _body(bed, [0])
    body["ssh"].update(change)
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))
    assert err.value.code == 400
    assert message in json.loads(err.value.response.body)["message"]


# A task pinned to each live node prints, as one JSON line, the addresses it sees on its host
# (node address -> addresses); the tail of both drivers below, after their connect.
_WHERE_EACH_NODE = textwrap.dedent(
    """
    @ray.remote(num_cpus=1)
    def where():
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True)
        return sorted(line.split()[3].split("/")[0] for line in out.stdout.splitlines())

    nodes = [n for n in ray.nodes() if n["Alive"]]
    refs = [where.options(scheduling_strategy=On(n["NodeID"], soft=False)).remote() for n in nodes]
    seen = {n["NodeManagerAddress"]: r for n, r in zip(nodes, ray.get(refs))}
    print(json.dumps(seen), flush=True)
    """
)

WHERE = (
    textwrap.dedent(
        """
    import json, subprocess, sys
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
    ray.init(address=sys.argv[1], logging_level="ERROR")
    """
    )
    + _WHERE_EACH_NODE
)

# First where pinned tasks run (as WHERE), then tasks held on the host that will be lost: one
# driver, whose workers on each node serve both.
SURVIVE = (
    textwrap.dedent(
        """
    import json, os, subprocess, sys, time
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
    import eugo_jupyter as eugo
    import ray
    eugo.hpc.init(address=sys.argv[1], logging_level="ERROR")
    doomed, gate = sys.argv[2], sys.argv[3]
    """
    )
    + _WHERE_EACH_NODE
    + textwrap.dedent(
        """
    @eugo.hpc.distribute(num_cpus=1, max_retries=5)
    def square(i):
        # Held until the test opens the gate (a file: every host shares this file system), once
        # the host is seen lost: the tasks there are surely in flight when it vanishes.
        while not os.path.exists(gate):
            time.sleep(0.1)
        return i * i

    node = next(n["NodeID"] for n in ray.nodes() if n["NodeManagerAddress"] == doomed)
    # Soft affinity: they start on the host that will vanish, and may run elsewhere on retry.
    there = square.options(scheduling_strategy=On(node, soft=True))
    futures = [there(i) for i in range(2)] + [square(i) for i in range(2, 4)]
    print("submitted", flush=True)
    print(eugo.hpc.get(futures, progress=False), flush=True)
    """
    )
)


async def _where(address: str) -> dict[str, list[str]]:
    """Node address -> the addresses a task pinned to that node sees on its host."""
    where = await asyncio.get_running_loop().run_in_executor(
        None, lambda: subprocess.run(
            [sys.executable, "-c", WHERE, address], capture_output=True, text=True,
            timeout=DEADLINE, env={**os.environ, "RAY_AUTH_MODE": "token"}, check=False,
        )
    )  # fmt: skip
    assert where.returncode == 0, where.stdout[-2000:] + where.stderr[-2000:]
    seen: dict[str, list[str]] = json.loads(where.stdout.strip().splitlines()[-1])
    return seen


async def _line_of(driver: subprocess.Popen[str], starts: str) -> str:
    """The driver's next line that starts with ``starts`` (Ray's own log lines may come first).

    Bounded: past the deadline the test fails, and its cleanup kills the driver.
    """
    assert driver.stdout is not None
    loop, before = asyncio.get_running_loop(), []
    while True:
        line = await asyncio.wait_for(loop.run_in_executor(None, driver.stdout.readline), DEADLINE)
        if line.startswith(starts):
            return line
        if not line:  # the driver ended
            pytest.fail(f"the driver printed no line starting {starts!r}: {''.join(before)}")
        before.append(line)


def _run_driver(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "RAY_AUTH_MODE": "token"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


async def test_two_hosts_three_nodes_tasks_run_where_they_are_pinned_and_a_lost_host_is_survived(
    jp_fetch: Any, bed: TestBed, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The same path as with the defaults, on shorter timers (the test took 195 s, most of it
    # waiting): the head's GCS declares a silent node dead after 3 missed health checks of 2 s
    # instead of Ray's 5 of 10 s (seen in ~12 s, not ~65), and the driver's keepalive, which
    # eugo.hpc sets to 60 s + 30 s unless the user chose (see docs/guides/ssh.md), is 5 s + 5 s. The
    # head and the driver inherit this environment; the hosts' nodes are not affected.
    for name, value in (("period_ms", 2000), ("timeout_ms", 2000), ("failure_threshold", 3)):
        monkeypatch.setenv(f"RAY_health_check_{name}", str(value))
    monkeypatch.setenv("RAY_grpc_client_keepalive_time_ms", "5000")
    monkeypatch.setenv("RAY_grpc_client_keepalive_timeout_ms", "5000")
    h1, h2 = bed.hosts[0], bed.hosts[1]
    model = await fetch_json(
        jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(_body(bed, [0, 1]))
    )
    model = await poll_model(
        jp_fetch, model["id"], lambda m: m["status"] == "running", deadline_s=DEADLINE
    )
    try:
        assert [h["status"] for h in model["ssh"]["hosts"]] == ["joined", "joined"], model["ssh"]
        addresses = sorted(n["address"] for n in model["nodes"] if n["alive"])
        assert addresses == sorted([ray_start.node_ip(), h1.address, h2.address])

        loop = asyncio.get_running_loop()
        gate = tmp_path / "gate"
        driver = _run_driver(SURVIVE, model["address"], h2.address, str(gate))
        try:
            seen = json.loads(await _line_of(driver, "{"))
            # Each task ran in its node's host: the only addresses it sees are that host's.
            assert seen[h1.address] == ["127.0.0.1", h1.address]
            assert seen[h2.address] == ["127.0.0.1", h2.address]
            assert ray_start.node_ip() in seen[ray_start.node_ip()]

            assert (await _line_of(driver, "submitted")).strip() == "submitted"
            await poll_model(
                jp_fetch, model["id"], lambda m: m["tasks"]["running"] >= 3, deadline_s=DEADLINE
            )
            bed.remove(h2)  # the machine is gone, with everything on it
            lost = await poll_model(
                jp_fetch, model["id"],
                lambda m: any(n["address"] == h2.address and not n["alive"] for n in m["nodes"]),
                deadline_s=DEADLINE,
            )  # fmt: skip
            assert lost["status"] == "running"
            gate.touch()  # the tasks end; those lost with the host end on their retry elsewhere
            # Bounded: a driver stuck in `get` fails the test instead of hanging the suite.
            try:
                output, _ = await loop.run_in_executor(
                    None, lambda: driver.communicate(timeout=DEADLINE)
                )
            except subprocess.TimeoutExpired:
                driver.kill()
                output = driver.communicate()[0]
                pytest.fail(f"the driver's get was still waiting after {DEADLINE:g} s: {output}")
        finally:
            if driver.poll() is None:
                driver.kill()
        # Ray's own log lines (the retries) may follow the result on the merged output.
        assert "[0, 1, 4, 9]" in output.splitlines(), output[-2000:]
    finally:
        response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204  # the vanished host is reported, not waited on
    assert left_on_hosts(model) == []


async def test_a_host_without_ray_and_one_refusing_the_key_are_named_and_the_rest_join(
    jp_fetch: Any, bed: TestBed
) -> None:
    h1, no_ray, refuses = bed.hosts[0], bed.hosts[2], bed.hosts[3]
    model = await fetch_json(
        jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(_body(bed, [0, 2, 3]))
    )
    model = await poll_model(
        jp_fetch, model["id"], lambda m: m["status"] == "running", deadline_s=DEADLINE
    )
    try:
        hosts = {h["host"]: h for h in model["ssh"]["hosts"]}
        assert hosts[h1.address]["status"] == "joined"
        assert hosts[no_ray.address]["status"] == "failed"
        assert hosts[no_ray.address]["reason"].startswith(
            f"{no_ray.address}: no `{RAY}` command there. Install the same Ray"
        )
        assert hosts[refuses.address]["status"] == "failed"
        assert hosts[refuses.address]["reason"].startswith(
            f"{refuses.address}: refused the key {bed.key} for root. Add its public key"
        )
        alive = sorted(n["address"] for n in model["nodes"] if n["alive"])
        assert alive == sorted([ray_start.node_ip(), h1.address])
    finally:
        response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert left_on_hosts(model) == []


async def test_head_on_the_first_host_two_nodes_there_and_nothing_left_on_either(
    jp_fetch: Any, bed: TestBed
) -> None:
    first, second = bed.hosts[0], bed.hosts[4]
    body = _body(bed, [0, 4], head_on="first_host")
    model = await fetch_json(jp_fetch, "eugo", "clusters", method="POST", body=json.dumps(body))
    model = await poll_model(
        jp_fetch, model["id"], lambda m: m["status"] == "running", deadline_s=DEADLINE
    )
    try:
        # The card: the cluster lives on the first host, nothing of it on this machine.
        assert model["address"].rpartition(":")[0] == first.address, model["address"]
        assert [(h["host"], h["status"]) for h in model["ssh"]["hosts"]] == [
            (first.address, "joined"), (second.address, "joined"),
        ], model["ssh"]  # fmt: skip
        alive = [n for n in model["nodes"] if n["alive"]]
        assert sorted(n["address"] for n in alive) == sorted([first.address, second.address])
        assert [n["address"] for n in alive if n["is_head"]] == [first.address]

        # A task pinned to each node ran on that node's host: it sees only that host's address.
        assert await _where(model["address"]) == {
            first.address: ["127.0.0.1", first.address],
            second.address: ["127.0.0.1", second.address],
        }
    finally:
        response = await jp_fetch("eugo", "clusters", model["id"], method="DELETE")
    assert response.code == 204
    assert left_on_hosts(model) == []
    # Every process on both hosts, not only those naming the nodes' folders: a head's Ray client
    # server does not, and once outlived the stop.
    left = _running_on(bed, [first, second])
    assert left == [], "\n".join(left)
