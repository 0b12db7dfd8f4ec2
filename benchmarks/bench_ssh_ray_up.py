"""A trial of Ray's own cluster launcher (``ray up``, on-prem ``local`` provider) on the test bed.

The ssh backend starts nodes itself (``ray start`` over ssh); the issue asked to try Ray's
launcher too and measure it. This builds a test bed of three hosts (network namespaces with their
own sshd; needs root and ``rsync``), then per run:

1. writes a cluster YAML into a temp folder: ``provider: {type: local, head_ip: host 1,
   worker_ips: [host 2, host 3]}``, ``auth: {ssh_user: root, ssh_private_key: the bed's key}``,
   and start commands that never run ``ray stop`` (the defaults do, and on a shared host that
   ends every Ray there) and give each node its own temp folder and ``--node-ip-address``;
2. runs ``ray up -y --no-config-cache`` (an argument list, bounded) and times launch to three
   alive nodes in the GCS, recording how far each worker got (``uninitialized``,
   ``waiting-for-ssh``, ``setting-up``, ``up-to-date``, ``update-failed``) from the provider's
   state file on the head; on a timeout it records how it failed and after how long;
3. runs ``ray down -y`` and lists what is left on every host; then ends what is left itself and
   proves nothing is (no process in any host but its sshd, no process here naming the run).

``ray down`` runs ``ray stop`` on the head through a login shell. The bed's hosts share this
machine's process table, so a ``ray`` on that shell's ``PATH`` would end every Ray on the
machine: ``ray down`` is only run after checking that the head's login shell finds no ``ray``
(the start commands use the full path), and is skipped (and said so) otherwise.

The figures to compare are ``benchmarks/bench_ssh.py``'s (``eugo`` and ``by hand``): there the
head runs here and two hosts join; here the head is host 1 and two hosts join, so both count
launch to three alive nodes.

    sudo python benchmarks/bench_ssh_ray_up.py [--repeats 1]
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eugo_jupyter.server import monitor
from tests.testbed import Host, TestBed, _ip

RAY = str(Path(sys.executable).with_name("ray"))
BOOTSTRAP = [Path.home() / "ray_bootstrap_key.pem", Path.home() / "ray_bootstrap_config.yaml"]
UP_TIMEOUT = 300.0
NODES_TIMEOUT = 300.0  # after `ray up` returns: the autoscaler on the head starts the workers
DOWN_TIMEOUT = 180.0

# Run by `ray up` on the head and by the head's autoscaler on each worker, through
# `bash --login -c -i`; RUN is this run's folder (shared /tmp: one folder per node inside it).
_NODE_ENV = (
    "export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0; "
    "ip=$(hostname -I | awk '{print $1}'); d=RUN/n${ip##*.}; mkdir -p $d/tmp; "
)
_HEAD = (
    _NODE_ENV + "export RAY_TMPDIR=$d/tmp; ulimit -c unlimited; "
    "RAYBIN start --head --port=6379 --node-ip-address=$ip --num-cpus=1 --temp-dir=$d/r "
    "--autoscaling-config=~/ray_bootstrap_config.yaml --disable-usage-stats"
)
_WORKER = (
    _NODE_ENV + "RAYBIN start --address=$RAY_HEAD_IP:6379 --node-ip-address=$ip --num-cpus=1 "
    "--temp-dir=$d/r --disable-usage-stats"
)


def cluster_config(bed: TestBed, name: str, run: Path) -> dict[str, Any]:
    """The cluster YAML (as a dict): head on host 1, workers on the others, no `ray stop`."""
    fill = {"RUN": str(run), "RAYBIN": RAY}
    head, worker = _HEAD, _WORKER
    for key, value in fill.items():
        head, worker = head.replace(key, value), worker.replace(key, value)
    return {
        "cluster_name": name,
        "provider": {
            "type": "local",
            "head_ip": bed.hosts[0].address,
            "worker_ips": [h.address for h in bed.hosts[1:]],
        },
        "auth": {"ssh_user": "root", "ssh_private_key": str(bed.key)},
        "min_workers": len(bed.hosts) - 1,
        "max_workers": len(bed.hosts) - 1,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 5,
        "file_mounts": {},
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [head],
        "worker_start_ray_commands": [worker],
    }


def _alive(address: str) -> list[str]:
    try:
        nodes = monitor.read(address, None, 5)["nodes"]
    except Exception:  # noqa: BLE001 - not up yet
        return []
    return sorted(n["address"] for n in nodes if n["alive"])


def _worker_states(run: Path, name: str) -> dict[str, str]:
    """ip -> the launcher's status for it, from the provider's state file on the head."""
    path = run / "n11" / "tmp" / "ray" / f"cluster-{name}.state"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {
        ip: str(info.get("tags", {}).get("ray-node-status", info.get("state")))
        for ip, info in state.items()
        if info.get("tags", {}).get("ray-node-type") == "worker"
    }


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def left_on_hosts(bed: TestBed, run: Path) -> list[str]:
    """Every process in a test host but its sshd, and every process here that names the run."""
    found = []
    for host in bed.hosts:
        for pid in _ip("netns", "pids", host.name, check=False).stdout.split():
            line = _comm(pid)
            if host.sshd is not None and int(pid) == host.sshd.pid:
                continue
            if line.startswith("sshd:") or not line:  # a session of sshd being closed
                continue
            found.append(f"{host.address} pid {pid}: {line[:100]}")
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and str(run) in _comm(entry.name):
            if not any(f"pid {entry.name}:" in f for f in found):
                found.append(f"here pid {entry.name}: {_comm(entry.name)[:100]}")
    return found


def _pids_of(found: list[str]) -> list[int]:
    return [int(f.split("pid ", 1)[1].split(":", 1)[0]) for f in found]


def _end(found: list[str]) -> None:
    """End what this run left (its own nodes: the bed's hosts run nothing else)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_of(found):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(2)


def _ray_on_login_path(bed: TestBed, host: Host) -> str:
    """What `ray stop` in `ray down`'s login shell on the head would run ('' for nothing)."""
    out = bed.ssh(host, "bash --login -c -i 'source ~/.bashrc; command -v ray' 2>/dev/null")
    return out.stdout.strip()


def trial(bed: TestBed, number: int) -> dict[str, Any]:
    name = f"eugo-trial-{os.getpid()}-{number}"
    run = Path(tempfile.mkdtemp(prefix="eru-", dir="/tmp"))
    run.chmod(0o755)  # the nodes make their folders inside it
    (run / "local").mkdir()
    config = run / "cluster.yaml"
    config.write_text(json.dumps(cluster_config(bed, name, run), indent=1))  # JSON is YAML
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_TMPDIR": str(run / "local"),  # the launcher's state and lock files, not /tmp/ray
        "TMPDIR": str(run / "local"),
    }
    result: dict[str, Any] = {"run": number + 1, "cluster": name}
    expected = sorted(h.address for h in bed.hosts)
    head_address = f"{bed.hosts[0].address}:6379"
    steps: dict[str, float] = {}
    start = time.perf_counter()
    try:
        with open(run / "ray_up.log", "w") as log:
            up = subprocess.run(
                [RAY, "up", "-y", "--no-config-cache", "--log-style=record", str(config)],
                stdout=log, stderr=subprocess.STDOUT, env=env, timeout=UP_TIMEOUT, check=False,
            )  # fmt: skip
        result["ray_up_s"] = round(time.perf_counter() - start, 2)
        result["ray_up_rc"] = up.returncode
    except subprocess.TimeoutExpired:
        result["ray_up_s"] = round(time.perf_counter() - start, 2)
        result["failed"] = f"`ray up` did not return within {UP_TIMEOUT:g} s"
    if "failed" not in result and result["ray_up_rc"] != 0:
        result["failed"] = "`ray up` failed: " + _tail(run / "ray_up.log")
    if "failed" not in result:
        deadline = time.perf_counter() + NODES_TIMEOUT
        alive: list[str] = []
        while time.perf_counter() < deadline:
            alive = _alive(head_address)
            for ip, status in _worker_states(run, name).items():
                steps.setdefault(f"{ip} {status}", round(time.perf_counter() - start, 2))
            if alive == expected:
                result["three_alive_s"] = round(time.perf_counter() - start, 2)
                break
            time.sleep(0.25)
        else:
            result["failed"] = (
                f"{len(alive)} of 3 nodes alive after {time.perf_counter() - start:.0f} s "
                f"(workers: {_worker_states(run, name)})"
            )
    result["worker_steps_s"] = steps
    result.update(teardown(bed, run, config, env))
    return result


def teardown(bed: TestBed, run: Path, config: Path, env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    found_ray = _ray_on_login_path(bed, bed.hosts[0])
    if found_ray:
        out["ray_down"] = f"skipped: its `ray stop` would run {found_ray} and end every Ray here"
    else:
        start = time.perf_counter()
        try:
            with open(run / "ray_down.log", "w") as log:
                down = subprocess.run(
                    [RAY, "down", "-y", "--log-style=record", str(config)],
                    stdout=log, stderr=subprocess.STDOUT, env=env, timeout=DOWN_TIMEOUT,
                    check=False,
                )  # fmt: skip
            out["ray_down"] = f"rc {down.returncode} in {time.perf_counter() - start:.1f} s"
        except subprocess.TimeoutExpired:
            out["ray_down"] = f"did not return within {DOWN_TIMEOUT:g} s"
    # ssh's shared connections linger 10 s (ControlPersist): wait for what goes by itself.
    left = left_on_hosts(bed, run)
    for _ in range(40):
        if not left:
            break
        time.sleep(1)
        left = left_on_hosts(bed, run)
    out["left_after_ray_down"] = left
    _end(left)
    out["left_after_cleanup"] = left_on_hosts(bed, run)
    control = Path(
        "/tmp/ray_ssh_" + hashlib.sha256(getpass.getuser().encode()).hexdigest()[:10],
        hashlib.sha256(json.loads(config.read_text())["cluster_name"].encode()).hexdigest()[:10],
    )
    shutil.rmtree(control, ignore_errors=True)
    try:
        control.parent.rmdir()  # only when empty: another `ray up` of this account may use it
    except OSError:
        pass
    for path in BOOTSTRAP:  # written by `ray up` into the head's home (shared with this machine)
        path.unlink(missing_ok=True)
    shutil.rmtree(run, ignore_errors=True)
    return out


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    options = parser.parse_args()
    if shutil.which("rsync") is None:
        sys.exit("`ray up` needs rsync (Debian: apt-get install -y rsync).")
    taken = [str(p) for p in BOOTSTRAP if p.exists()]
    if taken:
        sys.exit(f"{', '.join(taken)} exist: another `ray up` uses this home; not touching it.")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    results = []
    with TestBed(3) as bed:
        for number in range(options.repeats):
            results.append(trial(bed, number))
            print(json.dumps(results[-1]), flush=True)
    launched = [r["three_alive_s"] for r in results if "three_alive_s" in r]
    clean = all(not r["left_after_cleanup"] for r in results)
    took = (
        f"median {statistics.median(launched):.2f} s over {len(launched)} run(s)"
        if launched
        else "never"
    )
    print(
        f"ray up, head + 2 hosts, launch to three alive nodes: {took}; "
        f"{len(results) - len(launched)} failed; nothing left after cleanup: {clean}"
    )


if __name__ == "__main__":
    main()
