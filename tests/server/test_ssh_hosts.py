"""The ssh layer of the SSH backend on the test bed, without starting Ray: arguments arrive
intact (no shell injection), the token lands in a file only the user reads, a refused key and a
missing `ray` each get their sentence, stop ends exactly the node's processes, and a vanished
host is reported within ssh's connect timeout instead of being waited on.

`/bin/echo` stands in for `ray` in the argument test only: it prints what the host received.
Launching real Ray nodes over ssh is tested in test_ssh.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eugo_jupyter import _processes as processes
from eugo_jupyter.server.backends import ssh, ssh_hosts
from tests.testbed import TestBed, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestBed]:
    os.environ["JUPYTER_RUNTIME_DIR"] = str(tmp_path_factory.mktemp("runtime"))  # known_hosts
    with TestBed(3, refuse_key=(1,)) as testbed:
        yield testbed


def _spec(bed: TestBed, ray_path: str = "/bin/echo") -> ssh.SshSpec:
    body = {
        "kind": "ssh",
        "ssh": {
            "hosts": [h.address for h in bed.hosts],
            "user": "root",
            "key_file": str(bed.key),
            "ray_path": ray_path,
        },
    }
    return ssh.SshBackend().validate(body).fields  # type: ignore[no-any-return]


def test_arguments_arrive_intact_and_the_token_is_private(bed: TestBed) -> None:
    spec, host = _spec(bed), bed.hosts[0].address
    outer = "/tmp/eugo-n01-c-args0001"
    tricky = [f"--temp-dir={outer}/r", "it's; $(touch /tmp/eugo-pwned) `id`"]
    token_file = "~/.ray/eugo-c-args0001.token"
    args = [spec.ray_path, token_file, outer, *tricky]
    command = ssh.ssh_command(spec, host, ssh_hosts._START, args)
    result = subprocess.run(
        command, input="secret-token", capture_output=True, text=True, timeout=60, check=False
    )
    token = Path("~/.ray/eugo-c-args0001.token").expanduser()
    try:
        assert result.returncode == 0, result.stderr
        assert result.stdout == "start " + " ".join(tricky) + "\n"
        assert not Path("/tmp/eugo-pwned").exists()
        assert token.read_text() == "secret-token"
        assert token.stat().st_mode & 0o777 == 0o600
        # Ray makes its folders 0777: the node's own folder around them is 0700 (issue 16).
        assert Path(outer).stat().st_mode & 0o777 == 0o700
    finally:
        token.unlink(missing_ok=True)
        ssh.stop_on(spec, "c-args0001", host, outer)


def test_a_refused_key_and_a_missing_ray_are_named_with_the_fix(bed: TestBed) -> None:
    refused = ssh._start_on(_spec(bed), "c-keys0001", bed.hosts[1].address, 1, [], 60)
    assert not refused.joined
    assert refused.reason == (
        f"{bed.hosts[1].address}: refused the key {bed.key} for root. Add its public key "
        f"({bed.key}.pub) to ~root/.ssh/authorized_keys on {bed.hosts[1].address}, or choose "
        "the key that host accepts."
    )
    no_ray = _spec(bed, "/opt/none/ray")
    missing = ssh._start_on(no_ray, "c-keys0001", bed.hosts[0].address, 0, [], 60)
    assert not missing.joined
    assert missing.reason is not None and missing.reason.startswith(
        f"{bed.hosts[0].address}: no `/opt/none/ray` command there. Install the same Ray"
    )


def test_stop_ends_exactly_the_nodes_processes(bed: TestBed) -> None:
    mine, other = "/tmp/eugo-n01-c-stop0001", "/tmp/eugo-n02-c-stop0001"
    for folder in (mine, other):
        # A process whose command line names the node's folder, as every process of a node does.
        bed.ssh(
            bed.hosts[0],
            f"mkdir -p {folder}; nohup sh -c 'sleep 600; true' {folder} >/dev/null 2>&1 &",
        )
    try:
        assert ssh.stop_on(_spec(bed), "c-stop0001", bed.hosts[0].address, mine) is None
        alive = subprocess.run(
            ["pgrep", "-f", "sleep 600; true"], capture_output=True, text=True, check=False
        )
        lines = [processes.cmdline(int(pid)) for pid in alive.stdout.split()]
        assert [line for line in lines if mine in line] == []
        assert [line for line in lines if other in line] != []  # another node's: untouched
        assert not Path(mine).exists()
    finally:
        ssh.stop_on(_spec(bed), "c-stop0001", bed.hosts[0].address, other)


def test_a_vanished_host_is_reported_not_waited_on(bed: TestBed) -> None:
    gone = bed.hosts[2]
    bed.remove(gone)
    started = time.monotonic()
    problem = ssh.stop_on(_spec(bed), "c-gone0001", gone.address, "/tmp/eugo-n03-c-gone0001")
    print(f"vanished host answered in {time.monotonic() - started:.1f} s")
    assert problem is not None and problem.reason == ssh_hosts.UNREACHABLE
    sentence = problem.sentence
    assert sentence.startswith(f"{gone.address}: could not be reached to stop its node")
    assert "Check the host name, that sshd runs there" in sentence
