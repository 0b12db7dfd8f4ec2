"""Separate test hosts on one machine: network namespaces with their own address, sshd and /data.

:class:`TestBed` builds N hosts. Each is a network namespace joined by a veth pair to a bridge
the test bed creates and which owns the whole of 198.51.100.0/24 (a documentation range), with
its own ``sshd`` (own host key; one client key generated per run) and its own mount namespace
holding a private ``/data`` and its own root's ``~/.bashrc`` (empty, as on a fresh machine: this
machine's may start tools that share state across shells; pyenv's rehash lock, left behind by a
shell killed with its host, made every later ssh command wait 60 s). Everything else of the file
system (the venv, ``/tmp``) is shared, so the ``ray`` of the test's venv runs on every host.

Safety: on this kind of machine an address in 198.51.100.0/24 that is not on our bridge is routed
out of the machine and something answers. So the bridge is made *before* any traffic to the
range, the bed refuses to start if another interface already routes or holds an address in it,
it checks that an unused address there does not answer, and every namespace's default route
points at the bridge (forwarding stays off: nothing leaves this machine).

>>> with TestBed(2) as bed:                                  # doctest: +SKIP
...     bed.ssh(bed.hosts[0], "hostname -I").stdout
'198.51.100.11 \\n'
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from eugo_jupyter import _processes as processes
from eugo_jupyter._rayaddress import tcp_answer

__all__ = ["BRIDGE", "NETWORK", "Host", "TestBed", "TestBedError", "available"]

NETWORK = "198.51.100.0/24"
BRIDGE = "eugotb0"
BRIDGE_IP = "198.51.100.1"
PREFIX = "198.51.100."
FIRST_HOST = 11
UNUSED_IP = "198.51.100.254"
NAMESPACE = "eugo-h{}"


class TestBedError(RuntimeError):
    """The test bed cannot be built safely here; the message says why."""

    __test__ = False


def available() -> str | None:
    """None when a test bed can be built here, else the reason it cannot (for a skip)."""
    if os.geteuid() != 0:
        return "the test bed needs root (network namespaces, a bridge)"
    for tool in ("/usr/sbin/sshd", "ip", "ssh", "ssh-keygen", "unshare"):
        if not (Path(tool).exists() or shutil.which(tool)):
            return f"{tool} is not installed (Debian: openssh-server, iproute2, util-linux)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@dataclass
class Host:
    """One test host: a namespace, an address, an sshd."""

    name: str
    address: str
    veth: str
    config: Path
    authorized: bool = True
    hidden: tuple[str, ...] = ()
    sshd: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def namespace(self) -> str:
        return self.name


class TestBed:
    """Build ``count`` hosts; use as a context manager (everything is torn down on exit).

    ``refuse_key``: indices of hosts whose sshd accepts no key. ``hide``: index -> paths that
    host does not see (an empty tmpfs over each, e.g. the venv, for "a host without Ray").
    """

    __test__ = False

    def __init__(
        self,
        count: int,
        refuse_key: tuple[int, ...] = (),
        hide: dict[int, tuple[str, ...]] | None = None,
    ) -> None:
        if not 1 <= count <= 8:
            raise ValueError("a test bed has 1 to 8 hosts")
        self.count = count
        self.refuse_key = refuse_key
        self.hide = hide or {}
        self.dir = Path(tempfile.mkdtemp(prefix="eugo-testbed-"))
        self.key = self.dir / "id_ed25519"
        self.hosts: list[Host] = []
        self._made_bridge = False
        self._made_data = False

    # -- building

    def __enter__(self) -> Self:
        try:
            self._refuse_if_taken()
            self._make_bridge()
            self._check_unused_silent()
            self._make_key()
            for index in range(self.count):
                self.hosts.append(self._make_host(index))
            for host in self.hosts:
                self._wait_for_sshd(host)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refuse_if_taken(self) -> None:
        if _ip("link", "show", BRIDGE, check=False).returncode == 0:
            raise TestBedError(f"interface {BRIDGE} exists already: another test bed is running")
        existing = set(_ip("netns", "list").stdout.split())
        for index in range(self.count):
            if NAMESPACE.format(index + 1) in existing:
                raise TestBedError(
                    f"network namespace {NAMESPACE.format(index + 1)} exists already: another "
                    "test bed is running, or one was left behind (ip netns delete it)"
                )
        routes = json.loads(_ip("-j", "route", "show", "match", NETWORK).stdout or "[]")
        for route in routes:
            if route.get("dst") != "default":
                raise TestBedError(
                    f"{route.get('dst')} via {route.get('dev')} already routes {NETWORK}: "
                    "refusing to build test hosts in a range this machine uses"
                )
        for link in json.loads(_ip("-j", "-4", "addr", "show").stdout or "[]"):
            for info in link.get("addr_info", []):
                if str(info.get("local", "")).startswith(PREFIX):
                    raise TestBedError(
                        f"{link.get('ifname')} holds {info.get('local')}, inside {NETWORK}: "
                        "refusing to build test hosts there"
                    )

    def _make_bridge(self) -> None:
        _ip("link", "add", BRIDGE, "type", "bridge")
        self._made_bridge = True
        _ip("addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        route = _ip("route", "get", UNUSED_IP).stdout
        if f"dev {BRIDGE}" not in route:
            raise TestBedError(f"{UNUSED_IP} is not routed to {BRIDGE} ({route.strip()})")

    def _check_unused_silent(self) -> None:
        """Nothing must answer at an address no test host has: else traffic leaves the bed."""
        if tcp_answer(f"{UNUSED_IP}:22", timeout=5) in ("open", "refused"):
            raise TestBedError(f"something answers at {UNUSED_IP}: the range is not ours alone")

    def _make_key(self) -> None:
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "eugo-testbed",
                "-f",
                str(self.key),
            ],
            check=True,
        )
        (self.dir / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        (self.dir / "no_keys").write_text("")
        self._made_data = not Path("/data").exists()
        Path("/data").mkdir(exist_ok=True)

    def _make_host(self, index: int) -> Host:
        name = NAMESPACE.format(index + 1)
        address = f"{PREFIX}{FIRST_HOST + index}"
        folder = self.dir / name
        folder.mkdir()
        host_key = folder / "ssh_host_ed25519_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True
        )
        keys = "no_keys" if index in self.refuse_key else "authorized_keys"
        config = folder / "sshd_config"
        config.write_text(
            f"ListenAddress {address}\nPort 22\nHostKey {host_key}\n"
            f"PidFile {folder / 'sshd.pid'}\nAuthorizedKeysFile {self.dir / keys}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            "AcceptEnv RAY_* EUGO_*\nMaxStartups 50\nLogLevel ERROR\n"
        )
        veth = f"eugotbv{index + 1}"
        _ip("netns", "add", name)
        host = Host(name, address, veth, config, index not in self.refuse_key)
        self.hosts.append(host)  # from here on close() must undo it
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("link", "set", veth, "master", BRIDGE)
        _ip("link", "set", veth, "up")
        _ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", name, "route", "add", "default", "via", BRIDGE_IP)
        Path("/run/sshd").mkdir(exist_ok=True)
        hidden = self.hide.get(index, ())
        host.hidden = hidden
        # A private mount namespace: /data (and hidden paths) get an empty tmpfs only this host
        # sees; every ssh session is a child of this sshd, so it sees the same.
        mounts = ["mount -t tmpfs -o size=64m eugo-data /data"] + [
            f"mount -t tmpfs -o size=1m eugo-hide {_quote(path)}" for path in hidden
        ]
        # sshd's bash reads root's ~/.bashrc even for a command: the host gets its own.
        bashrc = Path(pwd.getpwnam("root").pw_dir, ".bashrc")
        if bashrc.exists():
            (folder / "bashrc").write_text(f"# {name}'s own ~/.bashrc (a test host)\n")
            mounts.append(f"mount --bind {_quote(str(folder / 'bashrc'))} {_quote(str(bashrc))}")
        script = " && ".join([*mounts, f"exec /usr/sbin/sshd -D -e -f {_quote(str(config))}"])
        with open(folder / "sshd.log", "wb") as log:  # the child keeps its own descriptor
            host.sshd = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    name,
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    script,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        self.hosts.pop()
        return host

    def _wait_for_sshd(self, host: Host, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if host.sshd is not None and host.sshd.poll() is not None:
                log = (self.dir / host.name / "sshd.log").read_text(errors="replace")
                raise TestBedError(f"sshd of {host.name} exited: {log.strip()[-500:]}")
            if tcp_answer(f"{host.address}:22", timeout=2) == "open":
                return
            time.sleep(0.1)
        raise TestBedError(f"sshd of {host.name} did not listen on {host.address}:22")

    # -- using

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    def ssh_options(self) -> list[str]:
        """Options of an ssh client for the bed (its key, no prompts, a per-run known_hosts)."""
        return [
            "-i",
            str(self.key),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "ConnectTimeout=10",
        ]

    def ssh(
        self, host: Host, command: str, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` on ``host`` as root (a test helper; commands here are fixed strings)."""
        return subprocess.run(
            ["ssh", *self.ssh_options(), f"root@{host.address}", command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def remove(self, host: Host) -> None:
        """The machine is gone: its namespace (and every process in it) disappears at once."""
        pids = _ip("netns", "pids", host.name, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                continue
        _ip("link", "delete", host.veth, check=False)
        _ip("netns", "delete", host.name, check=False)

    # -- tearing down

    def close(self) -> None:
        """Stop every sshd and process in the hosts, delete veths, namespaces and the bridge."""
        for host in self.hosts:
            if host.sshd is not None and host.sshd.poll() is None:
                try:
                    os.killpg(host.sshd.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            self.remove(host)
            if host.sshd is not None:
                try:
                    host.sshd.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(host.sshd.pid, signal.SIGKILL)
                    host.sshd.wait()
        self.hosts.clear()
        if self._made_bridge:
            _ip("link", "delete", BRIDGE, check=False)
            self._made_bridge = False
        if self._made_data:
            try:
                Path("/data").rmdir()
            except OSError:
                pass
            self._made_data = False
        shutil.rmtree(self.dir, ignore_errors=True)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def left_on_hosts(model: dict[str, Any]) -> list[str]:
    """Processes of the cluster's nodes still alive (the bed shares this machine's pid space)."""
    folders = [h["temp_dir"] for h in model["ssh"]["hosts"]]
    found = []
    for pid in processes.pids():
        line = processes.cmdline(pid)
        if any(f in line for f in folders):
            found.append(f"{pid}: {line[:120]}")
    return found
