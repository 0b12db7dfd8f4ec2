"""A kernel whose cluster dies while it waits in ``eugo.hpc.get`` (or ``wait``, ``map``, a
``%%distribute`` cell) gets a ClusterError within seconds, and the kernel process lives on and
falls back (issue 16).

The "kernel" is a real Python process (Ray ends the whole process of a driver that lost its
cluster, so it cannot be this test's own process), the cluster real ``ray start`` processes.
The kernel's Ray is told to give up on a lost cluster after 10 s, Ray's own default being 60 s:
a kernel still running well past that has been let go of the dead cluster cleanly.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eugo_jupyter import _processes as processes
from eugo_jupyter import records
from eugo_jupyter._tempdirs import expected_dir
from eugo_jupyter.server.backends import local, ray_start
from tests.fixtures.waiting import until

DEADLINE = 300.0

KERNEL = r"""
import json, sys, time
import eugo_jupyter as eugo
from eugo_jupyter.exceptions import ClusterError

job = json.loads(sys.stdin.readline() or "null")  # from the test, once the cluster runs
if job is None:
    sys.exit()  # the test ended before
marker, waits_in = job["marker"], job["waits_in"]
connection = eugo.hpc.init(address=job["address"] or None)
print("CONNECTED", connection.source, flush=True)

@eugo.hpc.distribute
def forever(path):
    open(path, "w").close()          # tells the test that the task runs
    time.sleep(10_000)

@eugo.hpc.distribute
def double(x):
    return 2 * x

def slow(path):
    open(path, "w").close()
    time.sleep(10_000)

try:
    if waits_in == "get":
        eugo.hpc.get(forever(marker))
    elif waits_in == "wait":
        eugo.hpc.wait([forever(marker)], num_returns=1)
    elif waits_in == "map":
        eugo.hpc.map(slow, [marker], progress=False)
    else:  # a %%distribute cell in a real IPython shell, as in a notebook
        from IPython.testing.globalipapp import get_ipython

        shell = get_ipython()
        shell.run_line_magic("load_ext", "eugo_jupyter")
        shell.user_ns["path"] = marker
        cell = "%%distribute\nimport time\nopen(path, 'w').close()\ntime.sleep(10_000)\n"
        ran = shell.run_cell(cell)
        if ran.error_in_exec is not None:
            raise ran.error_in_exec
except ClusterError as exc:
    print("ERROR", str(exc).replace("\n", " "), flush=True)
for attempt in range(3):  # on a loaded machine Ray's 30 s start window can pass: try again
    try:
        print("FALLBACK", eugo.hpc.get(double(21)), eugo.hpc.cluster().embedded, flush=True)
        break
    except Exception as exc:
        print("RETRY", type(exc).__name__, str(exc)[:200].replace("\n", " "), flush=True)
        eugo.hpc.shutdown()
sys.stdin.readline()
print("ALIVE", flush=True)
"""


def _start_kernel(folder: Path) -> subprocess.Popen[str]:
    """A kernel's process, started before its cluster (its imports go on while the cluster
    launches); :func:`_connect` tells it where to go."""
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(folder),
        "RAY_gcs_rpc_server_reconnect_timeout_s": "10",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    with open(folder / "kernel.err", "w") as errors:  # shown if the kernel dies
        return subprocess.Popen(  # its folder last: _line finds kernel.err there
            [sys.executable, "-c", KERNEL, str(folder)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            text=True, env=env, start_new_session=True,
        )  # fmt: skip


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    process = _start_kernel(tmp_path)
    yield process
    _kill(process)


@pytest.fixture
def cluster(kernel: subprocess.Popen[str]) -> Iterator[local.Launched]:
    started = local.launch(
        ray_start.NodeSpec(num_cpus=1), [], expected_dir(f"c-g{secrets.token_hex(4)}")
    )
    yield started
    processes.stop(started.pgids, started.temp_dir)


def _connect(
    kernel: subprocess.Popen[str], address: str, marker: Path, waits_in: str = "get"
) -> None:
    """Tell the kernel to connect to ``address`` ("": as a fresh kernel would choose), start a
    task that writes ``marker`` and wait on it in ``waits_in``."""
    assert kernel.stdin is not None
    job = {"address": address, "marker": str(marker), "waits_in": waits_in}
    kernel.stdin.write(json.dumps(job) + "\n")
    kernel.stdin.flush()


#: The lines the kernel prints, in this order; a RETRY line may come between them.
STEPS = ("CONNECTED", "ERROR", "FALLBACK", "ALIVE")


def _line(kernel: subprocess.Popen[str], prefix: str) -> str:
    """The kernel's next line starting with ``prefix`` (the kernel must not have died).

    A later step's line instead fails at once: waiting on would wait forever, since the kernel
    then waits for the test (a kernel whose wait returned without an ERROR went on to FALLBACK
    and sat on its stdin while the test read on for an ERROR).
    """
    assert kernel.stdout is not None
    for line in kernel.stdout:
        if line.startswith(prefix):
            return line.strip()
        if line.startswith(STEPS):
            raise AssertionError(f"waiting for the kernel's {prefix} line, it printed: {line}")
    errors = Path(kernel.args[-1]) / "kernel.err"
    tail = errors.read_text(errors="replace")[-3000:] if errors.exists() else ""
    raise AssertionError(f"the kernel exited ({kernel.wait()}) before {prefix!r}:\n{tail}")


def _finish(kernel: subprocess.Popen[str]) -> None:
    assert kernel.stdin is not None
    kernel.stdin.write("bye\n")
    kernel.stdin.flush()
    assert _line(kernel, "ALIVE") == "ALIVE"
    assert kernel.wait(timeout=DEADLINE) == 0


def _kill(kernel: subprocess.Popen[str]) -> None:
    if kernel.poll() is None:
        os.killpg(kernel.pid, signal.SIGKILL)
        kernel.wait()


WAITS = ("get", "map", "distribute")


@dataclass
class Killed:
    kernel: subprocess.Popen[str]
    connected: str  #: its CONNECTED line


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Killed]]]:
    """One cluster killed while three kernels wait on it, one in each of :data:`WAITS`: what each
    printed up to then, and its process, which goes on to its ERROR and FALLBACK lines.

    The three share the cluster's start and its death (a test of its own each took 37 s)."""
    kernels = {waits_in: _start_kernel(tmp_path_factory.mktemp(waits_in)) for waits_in in WAITS}
    started = None
    try:
        started = local.launch(
            ray_start.NodeSpec(num_cpus=len(WAITS)), [], expected_dir(f"c-g{secrets.token_hex(4)}")
        )
        markers = {}
        for waits_in, kernel in kernels.items():
            markers[waits_in] = Path(kernel.args[-1]) / "running"
            _connect(kernel, started.gcs_address, markers[waits_in], waits_in)
        connected = {waits_in: _line(kernel, "CONNECTED") for waits_in, kernel in kernels.items()}
        for marker in markers.values():
            until(marker.exists, f"{marker} written", DEADLINE)
        for pid, _ in processes.cluster_processes(started.pgids, started.temp_dir):
            with contextlib.suppress(ProcessLookupError):  # a worker may end meanwhile
                os.kill(pid, signal.SIGKILL)  # the head dies at once, as in a crash
        yield started.gcs_address, {w: Killed(kernels[w], connected[w]) for w in WAITS}
    finally:
        for kernel in kernels.values():
            _kill(kernel)
        if started is not None:
            processes.stop(started.pgids, started.temp_dir)


@pytest.mark.parametrize("waits_in", WAITS)
def test_killed_cluster_raises_cluster_error_and_the_kernel_falls_back(
    killed: tuple[str, dict[str, Killed]], waits_in: str
) -> None:
    """Killed while the kernel waits in eugo.hpc.get, eugo.hpc.map or a %%distribute cell."""
    address, kernels = killed
    kernel = kernels[waits_in].kernel
    assert kernels[waits_in].connected == "CONNECTED explicit"
    error = _line(kernel, "ERROR")
    assert f"The cluster at {address} is gone" in error
    assert "its head stopped accepting connections" in error
    assert "This kernel is still running" in error
    assert _line(kernel, "FALLBACK") == "FALLBACK 42 True"
    _finish(kernel)


def _driver_heard(temp_dir: str, pid: int, line: str) -> bool:
    """Whether the kernel's own Ray log (its core driver log, in the cluster's folder) has
    ``line``."""
    return any(
        line in log.read_text(errors="replace")
        for log in Path(temp_dir).glob(f"**/logs/python-core-driver-*_{pid}.log")
    )


@pytest.fixture
def head_and_worker(kernel: subprocess.Popen[str]) -> Iterator[local.Launched]:
    """A head that runs nothing (no CPU) and a worker node: the kernel attaches to the head's
    node (Ray prefers the head on its machine), its tasks run on the other one."""
    started = local.launch(
        ray_start.NodeSpec(num_cpus=0),
        [ray_start.NodeSpec(num_cpus=1)],
        expected_dir(f"c-g{secrets.token_hex(4)}"),
    )
    yield started
    processes.stop(started.pgids, started.temp_dir)


def test_the_kernels_node_announced_dead_before_the_head_goes_never_ends_the_kernel(
    head_and_worker: local.Launched, kernel: subprocess.Popen[str], tmp_path: Path
) -> None:
    """The order that ended kernels now and then, made certain: the kernel's node goes first
    and the head, still up, announces it dead; then the head goes too.

    As when that node's dashboard agent fails (its raylet fate-shares and says goodbye to the
    head) or ``ray stop`` ends the raylet before the head. Ray 2.60 then ends a driver that
    owns an object in that node's store, from a thread of its own (its plasma client exits the
    process, exit 1): map must keep its payload out of the store. The map's task runs on the
    other node, so the kernel is still waiting in map when its Ray hears the news.
    """
    cluster = head_and_worker
    marker = tmp_path / "running"
    _connect(kernel, cluster.gcs_address, marker, "map")
    try:
        assert _line(kernel, "CONNECTED") == "CONNECTED explicit"
        until(marker.exists, f"{marker} written", DEADLINE)
        head = processes.descendants(set(processes.group_members(cluster.pgids[0])))
        for pid in head:
            if "dashboard/agent.py" in processes.cmdline(pid):
                os.kill(pid, signal.SIGKILL)  # the head's raylet fate-shares with its agent
        deadline = time.monotonic() + DEADLINE
        # The kernel's Ray hears it from the head ("Node failure. All objects pinned on that
        # node will be lost"): what it does with its objects then is what this test is about.
        while not _driver_heard(cluster.temp_dir, kernel.pid, "Node failure"):
            assert kernel.poll() is None, _line(kernel, "ERROR")  # says how it ended
            assert time.monotonic() < deadline, "the kernel's Ray never heard of the node"
            time.sleep(0.2)
        for pid, _ in processes.cluster_processes(cluster.pgids, cluster.temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        error = _line(kernel, "ERROR")
        assert f"The cluster at {cluster.gcs_address} is gone" in error
        # Said while the head still answered (the node is what died), or after it went too.
        assert (
            "the Ray node on this machine, through which this kernel reaches the" in error
            or "its head stopped accepting connections" in error
        ), error
        assert "This kernel is still running" in error
        assert _line(kernel, "FALLBACK") == "FALLBACK 42 True"
        _finish(kernel)
    finally:
        _kill(kernel)


def test_cluster_shut_down_in_the_manager_says_so(
    cluster: local.Launched,
    kernel: subprocess.Popen[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel follows the active cluster; the manager shuts it down (record removed, then
    its processes stopped, as ``DELETE /eugo/clusters/{id}`` does)."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    cluster_id = Path(cluster.temp_dir).name.removeprefix("eugo-")
    record = {"id": cluster_id, "name": "team", "kind": "local", "address": cluster.gcs_address}
    records.write_record(record)
    records.set_active(record)
    marker = tmp_path / "running"
    _connect(kernel, "", marker, waits_in="wait")  # eugo.hpc.wait this time
    try:
        assert _line(kernel, "CONNECTED") == "CONNECTED active cluster 'team'"
        until(marker.exists, f"{marker} written", DEADLINE)
        records.delete_record(cluster_id)
        assert processes.stop(cluster.pgids, cluster.temp_dir) == []
        error = _line(kernel, "ERROR")
        assert f"The cluster at {cluster.gcs_address} is gone: it was shut down" in error
        assert "the EugoHPC Manager no longer lists it" in error
        assert _line(kernel, "FALLBACK") == "FALLBACK 42 True"
        _finish(kernel)
    finally:
        _kill(kernel)
