"""The `ssh` backend: a Ray cluster on machines you can SSH into (workstations, plain VMs).

The head runs on this machine (``head_on: "local"``, the default) or on the first host; every
host then gets one worker node, started with ``ray start`` over ``ssh``. Every command is an
argument list; the one string ssh hands the remote shell is a fixed script whose arguments are
quoted with :func:`shlex.join`. Every node gets an explicit ``--node-ip-address`` (a host without
a default route would otherwise advertise 127.0.0.1) and a temp folder named after the cluster,
so stopping a node ends exactly its processes (never ``ray stop``, which would end every Ray on
that host). The cluster's Ray token travels on ssh's stdin into a file only the user can read.

Why ``ray start`` over ssh and not Ray's own cluster launcher (``ray up`` with the on-premise
``local`` provider): the launcher drives a head, whose autoscaler then starts the workers with
its own ``ray stop; ray start`` commands (``worker_start_ray_commands``), which end any other Ray
on the host, and in the Ray we depend on on-prem workers are known to stay "uninitialized" when
the autoscaler cannot reach them back with the same key and user; a failed host then blocks the
whole launch with no sentence per host. Its start also pays for the autoscaler's setup steps
(file mounts, initialization, setup commands) and an ssh round trip per step. Starting the nodes
ourselves costs one ssh call per host, in parallel, reports each host on its own, and lets the
other hosts join when one fails; ``benchmarks/bench_ssh.py`` measures it against the same
``ray start`` commands run by hand.

A launch body::

    {"kind": "ssh", "name": "lab",
     "ssh": {"hosts": ["10.0.0.11", "gpu-box"], "user": "ana", "key_file": "~/.ssh/id_ed25519",
             "port": 22, "ray_path": "ray", "head_on": "local",
             "cpus_per_host": 8, "gpus_per_host": 1},
     "head": {"num_cpus": 2, "num_gpus": 0}}

>>> spec = SshBackend().validate({"kind": "ssh", "ssh": {"hosts": ["10.0.0.11"]}})
>>> spec.fields.hosts, spec.fields.head_on
(('10.0.0.11',), 'local')
"""

from __future__ import annotations

import getpass
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._raytoken import secure_token_file
from ..._tempdirs import make_private, ray_temp_dir
from ...exceptions import OptionsError
from .. import requests
from ..exporters import closed_exporters
from . import local
from .base import Backend, Observed, Plan, Spec

__all__ = ["SshBackend", "SshSpec"]

MAX_HOSTS = 64
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[?[0-9A-Fa-f:.]+\]?")
_USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_PATH_RE = re.compile(r"[A-Za-z0-9_~./+][A-Za-z0-9_./+-]{0,255}")
_SSH_KEYS = (
    "hosts", "user", "key_file", "port", "ray_path", "head_on", "cpus_per_host", "gpus_per_host",
)  # fmt: skip

# Run by the remote shell as `sh -c START sh RAY_PATH TOKEN_FILE TEMP_DIR ray-start-args...`:
# the token arrives on stdin, `~/` in the ray path is the remote user's home, and exit 127 means
# no ray. Ray makes its own folders 0777, so they go inside TEMP_DIR, made 0700 here (Ray's
# --temp-dir is TEMP_DIR/r); Ray's Prometheus exporters, which answer without a token, are off.
_START = r"""
umask 077
ray=$1; token=$2; outer=$3; shift 3
case "$ray" in "~/"*) ray="$HOME/${ray#"~/"}";; esac
case "$token" in "~/"*) token="$HOME/${token#"~/"}";; esac
command -v "$ray" >/dev/null 2>&1 || { echo "EUGO_NO_RAY $ray"; exit 127; }
mkdir -p "$(dirname "$token")" && cat > "$token" || exit 1
mkdir -m 700 -- "$outer" 2>/dev/null
if [ -L "$outer" ] || [ ! -d "$outer" ] || [ ! -O "$outer" ]; then
  echo "$outer exists and is not a folder of this account: remove it and launch again"; exit 1
fi
chmod 700 -- "$outer" || exit 1
RAY_AUTH_TOKEN_PATH=$token RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0 EXPORTERS \
  exec "$ray" start "$@"
""".replace("EXPORTERS", " ".join(f"{k}={v}" for k, v in sorted(closed_exporters().items())))
# `sh -c STOP sh TEMP_DIR_PART1 TEMP_DIR_PART2 TOKEN_FILE`: the temp folder is passed in two
# halves so that this shell's own command line never matches the pattern it kills by.
_STOP = r"""
p="$1$2"; token=$3
case "$token" in "~/"*) token="$HOME/${token#"~/"}";; esac
pkill -TERM -f -- "$p"
i=0; while pgrep -f -- "$p" >/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
pkill -KILL -f -- "$p"
i=0; while pgrep -f -- "$p" >/dev/null && [ $i -lt 25 ]; do sleep 0.2; i=$((i+1)); done
left=$(pgrep -f -- "$p" | tr '\n' ' ')
rm -f -- "$token"
[ -z "$left" ] && rm -rf -- "$p"
echo "EUGO_LEFT $left"
"""


@dataclass(frozen=True)
class SshSpec:
    """A checked ssh launch."""

    hosts: tuple[str, ...]
    user: str
    key_file: str | None
    port: int
    ray_path: str
    head_on: str  # "local" | "first_host"
    cpus_per_host: int
    gpus_per_host: int
    head: local.NodeSpec

    def to_model(self) -> dict[str, Any]:
        return {
            "ssh": {
                "hosts": list(self.hosts),
                "user": self.user,
                "key_file": self.key_file,
                "port": self.port,
                "ray_path": self.ray_path,
                "head_on": self.head_on,
                "cpus_per_host": self.cpus_per_host,
                "gpus_per_host": self.gpus_per_host,
            },
            "head": self.head.to_model(),
        }

    @classmethod
    def from_model(cls, model: dict[str, Any]) -> SshSpec:
        ssh = model["ssh"]
        return cls(
            hosts=tuple(ssh["hosts"]),
            user=ssh["user"],
            key_file=ssh.get("key_file"),
            port=int(ssh["port"]),
            ray_path=ssh["ray_path"],
            head_on=ssh["head_on"],
            cpus_per_host=int(ssh["cpus_per_host"]),
            gpus_per_host=int(ssh["gpus_per_host"]),
            head=local.NodeSpec(**model["head"]),
        )


# ---------------------------------------------------------------- ssh commands


def _known_hosts() -> str:
    """Host keys: first the Manager's own file (written on first contact), then the user's."""
    from ... import records

    ours = records.records_dir().parent / "ssh_known_hosts"
    ours.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"{ours} {Path('~/.ssh/known_hosts').expanduser()}"


def ssh_command(spec: SshSpec, host: str, script: str, args: list[str]) -> list[str]:
    """``ssh [options] user@host -- sh -c SCRIPT sh ARGS...`` as an argument list."""
    options = [
        "ssh", "-p", str(spec.port),
        "-o", "BatchMode=yes",  # never prompt: a refused key is an error, not a hang
        "-o", "ConnectTimeout=10",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
        "-o", "StrictHostKeyChecking=accept-new",
        "-o", "LogLevel=ERROR",  # no "Permanently added" chatter in what we parse
        "-o", f"UserKnownHostsFile={_known_hosts()}",
    ]  # fmt: skip
    if spec.key_file:
        options += ["-i", str(Path(spec.key_file).expanduser()), "-o", "IdentitiesOnly=yes"]
    remote = shlex.join(["sh", "-c", script, "sh", *args])
    return [*options, f"{spec.user}@{host.strip('[]')}", "--", remote]


def _ip_of(host: str) -> str:
    """The address a host is reached at (Ray needs an address, not a name)."""
    try:
        return str(socket.getaddrinfo(host.strip("[]"), None, socket.AF_INET)[0][4][0])
    except OSError:
        return host


def _temp_dir(cluster_id: str, index: int) -> str:
    # "eugo-n01-<id>", never "eugo-<id>-...": the local head's folder must not be a prefix of a
    # host's, or stopping one would match the other's processes on a machine that runs both.
    return f"/tmp/eugo-n{index + 1:02d}-{cluster_id}"


def _token_file(cluster_id: str) -> str:
    return f"~/.ray/eugo-{cluster_id}.token"


def _ports() -> list[str]:
    """Ports named up front, on the host (another machine: ours cannot be checked free there).

    With them named, a raylet does not wait for its agents to write their ports into files: on a
    busy host that wait times out and the node dies at start.
    """
    port = 20000 + secrets.randbelow(30000)
    names = (
        "node-manager-port", "object-manager-port", "dashboard-agent-listen-port",
        "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port",
    )  # fmt: skip
    return [f"--{name}={port + i}" for i, name in enumerate(names)]


def _worker_args(spec: SshSpec, head: str, ip: str, temp_dir: str) -> list[str]:
    return [
        *_ports(),
        f"--address={head}",
        f"--node-ip-address={ip}",
        f"--num-cpus={spec.cpus_per_host}",
        f"--num-gpus={spec.gpus_per_host}",
        f"--temp-dir={ray_temp_dir(temp_dir)}",
        "--disable-usage-stats",
        "--log-style=record",
        "--log-color=false",
    ]


def _head_args_remote(spec: SshSpec, ip: str, port: int, temp_dir: str) -> list[str]:
    return [
        "--head",
        *_ports(),
        f"--port={port}",
        f"--node-ip-address={ip}",
        f"--num-cpus={spec.head.num_cpus}",
        f"--num-gpus={spec.head.num_gpus}",
        f"--temp-dir={ray_temp_dir(temp_dir)}",
        # The dashboard answers on the head's address (behind Ray's token), so the Manager can
        # read task counts from this machine.
        f"--dashboard-host={ip}",
        "--disable-usage-stats",
        "--log-style=record",
        "--log-color=false",
    ]


def _token() -> str:
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    token = os.environ.get("RAY_AUTH_TOKEN") or Path(path).read_text().strip()
    return token


# ---------------------------------------------------------------- sentences


def why_host_failed(spec: SshSpec, host: str, code: int, output: str) -> str:
    """One sentence naming the host, what went wrong and the fix."""
    text = output.strip()
    who = f"{spec.user}@{host}"
    if "EUGO_NO_RAY" in text or code == 127:
        import ray

        return (
            f"{host}: no `{spec.ray_path}` command there. Install the same Ray as this server "
            f"on it (pip install 'ray[default]=={ray.__version__}'), or set ray_path to where "
            "it lives."
        )
    if "ersion mismatch" in text:
        import ray

        return (
            f"{host}: its Ray is another version than this server's ({ray.__version__}); "
            f"install ray[default]=={ray.__version__} there."
        )
    if "Permission denied" in text:
        key = spec.key_file or "your default ssh key"
        return (
            f"{host}: refused the key {key} for {spec.user}. Add its public key "
            f"({key}.pub) to ~{spec.user}/.ssh/authorized_keys on {host}, or choose the key "
            "that host accepts."
        )
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key verification" in text:
        return (
            f"{host}: its host key changed since the last connection; if that is expected, "
            f"remove the old key with ssh-keygen -R {host} and launch again."
        )
    if code == 255:
        detail = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no answer")
        return (
            f"{host}: cannot be reached over ssh as {who} on port {spec.port} ({detail[:200]}). "
            "Check the host name, that sshd runs there and that this machine can reach it."
        )
    return f"{host}: `ray start` failed: {local._why(text)}"


# ---------------------------------------------------------------- start and stop


@dataclass
class _HostResult:
    host: str
    address: str
    temp_dir: str
    joined: bool
    reason: str | None = None

    def to_record(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "address": self.address,
            "temp_dir": self.temp_dir,
            "status": "joined" if self.joined else "failed",
            "reason": self.reason,
        }


def _run(command: list[str], stdin: str, timeout: float) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {timeout:g} s"
    return proc.returncode, proc.stdout + proc.stderr


def _start_on(
    spec: SshSpec, cluster_id: str, host: str, index: int, args: list[str], timeout: float
) -> _HostResult:
    temp_dir = _temp_dir(cluster_id, index)
    script_args = [spec.ray_path, _token_file(cluster_id), temp_dir, *args]
    command = ssh_command(spec, host, _START, script_args)
    for attempt in (1, 2):
        code, output = _run(command, _token(), timeout)
        if code == 0:
            return _HostResult(host, _ip_of(host), temp_dir, True)
        if code in (127, 255) or "ersion mismatch" in output or attempt == 2:
            break
        # `ray start` itself failed (a busy host times a node's start out): clear what it left
        # and try once more, as the local backend does for its worker nodes.
        stop_on(spec, cluster_id, host, temp_dir)
    reason = why_host_failed(spec, host, code, output)
    return _HostResult(host, _ip_of(host), temp_dir, False, reason)


def stop_on(
    spec: SshSpec, cluster_id: str, host: str, temp_dir: str, timeout: float = 60
) -> str | None:
    """Stop this cluster's node on one host; None when nothing is left, else a sentence.

    A host that does not answer is reported, not waited on: ssh gives up after its timeouts.
    """
    half = len(temp_dir) // 2
    args = [temp_dir[:half], temp_dir[half:], _token_file(cluster_id)]
    code, output = _run(ssh_command(spec, host, _STOP, args), "", timeout)
    if code != 0 or not any(ln.startswith("EUGO_LEFT") for ln in output.splitlines()):
        why = why_host_failed(spec, host, code, output)
        return f"{host}: could not be reached to stop its node ({why})"
    # Only the script's own line: ssh may add warnings of its own to the output.
    line = next(ln for ln in output.splitlines() if ln.startswith("EUGO_LEFT"))
    left = line.removeprefix("EUGO_LEFT").split()
    return f"{host}: pids {' '.join(left)} did not stop" if left else None


class SshBackend(Backend):
    """``kind: "ssh"``: a head here (or on the first host) and a worker node per host."""

    kind = "ssh"

    def validate(self, body: dict[str, Any]) -> Spec:
        requests.keys(body, ("kind", "name", "lifetime", "ssh", "head"), "an ssh launch")
        where = "ssh"
        given = requests.mapping(body.get("ssh"), where, '{"hosts": ["10.0.0.11"], "user": "ana"}')
        requests.keys(given, _SSH_KEYS, where)
        hosts = given.get("hosts")
        if not isinstance(hosts, list) or not hosts or len(hosts) > MAX_HOSTS:
            raise OptionsError(
                f"ssh.hosts={hosts!r} is not allowed: give a list of 1 to {MAX_HOSTS} host names "
                'or addresses, such as ["10.0.0.11", "gpu-box"].'
            )
        checked = tuple(
            requests.text(h, f"hosts[{i}]", where, _HOST_RE, "give a host name or an address")
            for i, h in enumerate(hosts)
        )
        if len(set(checked)) != len(checked):
            raise OptionsError("ssh.hosts lists a host twice: give each host once.")
        key_file = given.get("key_file") or None
        if key_file is not None:
            requests.text(key_file, "key_file", where, _PATH_RE, "give the path of a private key")
            if not Path(key_file).expanduser().is_file():
                raise OptionsError(
                    f"ssh.key_file={key_file!r} does not exist on this machine: give the path of "
                    "the private key the hosts accept (for example ~/.ssh/id_ed25519)."
                )
        head_on = given.get("head_on", "local")
        if head_on not in ("local", "first_host"):
            raise OptionsError(
                f'ssh.head_on={head_on!r} is not allowed: "local" (the head runs on this '
                'machine) or "first_host".'
            )
        fields = SshSpec(
            hosts=checked,
            user=requests.text(
                given.get("user") or getpass.getuser(),
                "user",
                where,
                _USER_RE,
                "give a user name (letters, digits, '_', '.', '-')",
            ),
            key_file=key_file,
            port=requests.count(given.get("port", 22), "port", where, 1, 65535),
            ray_path=requests.text(
                given.get("ray_path") or "ray",
                "ray_path",
                where,
                _PATH_RE,
                "give the path of the ray command on the hosts (for example ~/venv/bin/ray)",
            ),
            head_on=str(head_on),
            cpus_per_host=requests.count(
                given.get("cpus_per_host", 1), "cpus_per_host", where, 0, local.MAX_CPUS
            ),
            gpus_per_host=requests.count(
                given.get("gpus_per_host", 0), "gpus_per_host", where, 0, local.MAX_GPUS
            ),
            # The head may be another machine: bound its sizes loosely (1 PiB), not by ours.
            head=local.parse_node(body.get("head", {}), "head", most=2**50),
        )
        if fields.cpus_per_host == 0 and fields.gpus_per_host == 0:
            raise OptionsError(
                "Each host would offer nothing: give cpus_per_host or gpus_per_host above 0."
            )
        return Spec(
            kind=self.kind,
            name=requests.name(body.get("name"), "ssh"),
            lifetime=requests.lifetime(body.get("lifetime")),
            fields=fields,
        )

    def plan(self, spec: Spec) -> Plan:
        fields: SshSpec = spec.fields
        cluster_id = "c-<id>"
        commands: list[list[str]] = []
        workers = list(fields.hosts)
        if fields.head_on == "local":
            head_ip = local.node_ip()
            args, port, _ = local.head_arguments(fields.head, head_ip, f"/tmp/eugo-{cluster_id}")
            commands.append([local.ray_executable(), "start", *args])
            where = "this machine"
        else:
            head_ip, port = _ip_of(fields.hosts[0]), 6379
            args = _head_args_remote(fields, head_ip, port, _temp_dir(cluster_id, 0))
            commands.append(
                ssh_command(
                    fields,
                    fields.hosts[0],
                    "<start script>",
                    [fields.ray_path, "TOKEN", _temp_dir(cluster_id, 0), *args],
                )
            )
            where, workers = fields.hosts[0], workers[1:]
        for index, host in enumerate(fields.hosts):
            if host not in workers:
                continue
            folder = _temp_dir(cluster_id, index)
            args = _worker_args(fields, f"{head_ip}:{port}", _ip_of(host), folder)
            script_args = [fields.ray_path, "TOKEN", folder, *args]
            commands.append(ssh_command(fields, host, "<start script>", script_args))
        summary = (
            f"A head with {local._describe(fields.head)} on {where}, then a worker with "
            f"{fields.cpus_per_host} CPUs and {fields.gpus_per_host} GPUs on each of "
            f"{', '.join(workers) or 'no other host'}, over ssh as {fields.user}."
        )
        return Plan(summary=summary, commands=commands)

    def start(self, spec: Spec, record: dict[str, Any], timeout: float) -> dict[str, Any]:
        fields: SshSpec = spec.fields
        cluster_id = str(record["id"])
        results: list[_HostResult] = []
        updates: dict[str, Any] = {"pgids": [], "temp_dir": None}
        hosts = list(enumerate(fields.hosts))
        secure_token_file(create=True)  # read below to send to the hosts; 0600 before any use
        if fields.head_on == "local":
            head_ip = local.node_ip()
            temp_dir = make_private(f"{tempfile.gettempdir()}/eugo-{cluster_id}")
            args, port, dashboard_port = local.head_arguments(fields.head, head_ip, temp_dir)
            for attempt in (1, 2):  # a busy machine can time a head's start out: once more
                try:
                    updates["pgids"] = [local._run_ray_start(args, timeout)]
                    break
                except local.LaunchError:
                    if attempt == 2:
                        shutil.rmtree(temp_dir, ignore_errors=True)
                        raise
                    args, port, dashboard_port = local.head_arguments(
                        fields.head, head_ip, temp_dir
                    )
            updates["temp_dir"] = temp_dir
            updates["dashboard_url"] = f"http://127.0.0.1:{dashboard_port}"
        else:
            index, first = hosts.pop(0)
            head_ip, port = _ip_of(first), 6379
            args = _head_args_remote(fields, head_ip, port, _temp_dir(cluster_id, index))
            head = _start_on(fields, cluster_id, first, index, args, timeout)
            if not head.joined:
                raise local.LaunchError(f"The head did not start on {head.reason}")
            results.append(head)
            updates["dashboard_url"] = f"http://{head_ip}:8265"
        address = f"{head_ip}:{port}"

        # Hosts in parallel: each is its own machine, and one slow or failing host must not
        # hold the others back.
        def start_worker(pair: tuple[int, str]) -> _HostResult:
            index, host = pair
            args = _worker_args(fields, address, _ip_of(host), _temp_dir(cluster_id, index))
            return _start_on(fields, cluster_id, host, index, args, timeout)

        try:
            with ThreadPoolExecutor(max_workers=min(16, len(hosts) or 1)) as pool:
                results += list(pool.map(start_worker, hosts))
        except BaseException:
            # The record never learns of these nodes: stop them here, or nothing ever will.
            self.stop({**record, **updates, "ssh_hosts": [r.to_record() for r in results]})
            raise
        joined = [r for r in results if r.joined]
        updates.update(
            address=address,
            ssh_hosts=[r.to_record() for r in results],
            nodes_expected=len(joined) + (1 if fields.head_on == "local" else 0),
        )
        return updates

    def state(self, record: dict[str, Any]) -> Observed:
        hosts = list(record.get("ssh_hosts") or [])
        observed = Observed(
            address=record.get("address"),
            dashboard_url=record.get("dashboard_url"),
            nodes_expected=int(record.get("nodes_expected") or 1),
            detail={"hosts": hosts},
        )
        pgids = [int(p) for p in record.get("pgids") or []]
        if pgids and not local.owned_groups(pgids, str(record.get("temp_dir") or "")):
            observed.ended = (
                "The head's processes on this machine are gone (stopped outside the manager, or "
                "killed). Remove the cluster and launch a new one."
            )
        return observed

    def stop(self, record: dict[str, Any]) -> list[str]:
        spec = SshSpec.from_model(record["spec"])
        # Every host tried, joined or not: a `ray start` that failed half-way leaves processes.
        hosts = list(record.get("ssh_hosts") or [])
        with ThreadPoolExecutor(max_workers=min(16, len(hosts) or 1)) as pool:
            remote = list(
                pool.map(
                    lambda h: stop_on(spec, str(record["id"]), h["host"], h["temp_dir"]), hosts
                )
            )
        left = [
            f"pid {pid}"
            for pid in local.stop(
                [int(p) for p in record.get("pgids") or []], str(record.get("temp_dir") or "")
            )
        ] if record.get("temp_dir") else []  # fmt: skip
        # A host that vanished cannot be asked: it is reported in the log, never waited on.
        unreachable = [r for r in remote if r and "could not be reached" in r]
        for sentence in unreachable:
            import logging

            logging.getLogger("eugo_jupyter").warning("%s", sentence)
        return left + [r for r in remote if r and r not in unreachable]

    def adopt(self, record: dict[str, Any]) -> str | None:
        from .. import monitor

        address = record.get("address")
        if address and monitor.reachable(str(address)):
            return "running"
        self.stop(record)
        return None
