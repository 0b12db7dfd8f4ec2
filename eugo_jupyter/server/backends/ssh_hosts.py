"""One host of an ssh cluster: reaching it, starting a Ray node there, stopping exactly that node.

Blocking functions (the backend runs them in threads, a host each). Every command is an argument
list; the one string ssh hands the remote shell is a fixed script (:data:`_START`,
:data:`_STOP`) whose arguments are quoted with :func:`shlex.join`. The cluster's Ray token
travels on ssh's stdin. A host that fails gets one sentence naming it, what went wrong and the
fix (:func:`why_host_failed`). :class:`SshSpec` is what a launch asked of its hosts.

>>> spec = SshSpec(("10.0.0.11",), "ana", None, 22, "ray", "local", 1, 0, ray_start.NodeSpec())
>>> ssh_command(spec, "10.0.0.11", "echo $1", ["hi"])[-3:]                   # doctest: +SKIP
['ana@10.0.0.11', '--', "sh -c 'echo $1' sh hi"]
"""

from __future__ import annotations

import secrets
import shlex
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._raytoken import account_token
from . import ray_start

__all__ = ["HostProblem", "SshSpec", "failure_of", "ssh_command", "stop_on", "why_host_failed"]

# Run by the remote shell as `sh -c START sh RAY_PATH TOKEN_FILE TEMP_DIR ray-start-args...`:
# the token arrives on stdin, `~/` in the ray path is the remote user's home, and exit 127 means
# no ray. Ray makes its own folders 0777, so they go inside TEMP_DIR, made 0700 here (Ray's
# --temp-dir is TEMP_DIR/r); the node gets ray_start.node_settings (token auth, exporters off).
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
ps -o sid= -p $$ | tr -d ' ' > "$outer/sid"
RAY_AUTH_TOKEN_PATH=$token SETTINGS \
  exec "$ray" start "$@"
""".replace("SETTINGS", " ".join(f"{k}={v}" for k, v in sorted(ray_start.node_settings().items())))
# `sh -c STOP sh TEMP_DIR_PART1 TEMP_DIR_PART2 TOKEN_FILE`: the temp folder is passed in two
# halves so that this shell's own command line never matches the pattern it kills by.
# Not every process of a node names its temp folder: a head's Ray client server
# (`ray.util.client.server --address=...`) and its dashboard's module processes do not, and
# outlive a stop by folder alone. They all share the ssh session `ray start` ran in (Ray starts
# no new session), noted by START in TEMP_DIR/sid: that session's Ray processes go too.
_STOP = r"""
p="$1$2"; token=$3
case "$token" in "~/"*) token="$HOME/${token#"~/"}";; esac
sid=$(cat -- "$p/sid" 2>/dev/null | tr -cd '0-9')
ours() { pgrep -f -- "$p"; [ -n "$sid" ] && pgrep -s "$sid" -f -- ray; }
end() { pkill "$1" -f -- "$p"; [ -n "$sid" ] && pkill "$1" -s "$sid" -f -- ray; }
# As _processes.stop: the GCS first, so that an attached kernel finds the cluster gone before
# a task fails for a lost node; then the rest, killed (without their GCS they only wait on it).
for q in $(ours); do
  [ "$(cat "/proc/$q/comm" 2>/dev/null)" = gcs_server ] && kill -KILL "$q" 2>/dev/null
done
end -KILL
i=0; while [ -n "$(ours)" ] && [ $i -lt 25 ]; do sleep 0.2; i=$((i+1)); end -KILL; done
left=$(ours | sort -u | tr '\n' ' ')
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
    head: ray_start.NodeSpec

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
            head=ray_start.NodeSpec(**model["head"]),
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


def _ports() -> Callable[[str], int]:
    """Ports named up front, on the host (another machine: ours cannot be checked free there).

    With them named, a raylet waits for fewer of its agents' port files. It still waits (15 s,
    fixed by Ray) for the dashboard agent's listen port, and on a busy host a head, which starts
    its GCS and dashboard alongside, can miss that: the head gets three tries, a worker two.
    """
    return ray_start.port_block(20000 + secrets.randbelow(30000))


def _worker_args(spec: SshSpec, head: str, ip: str, temp_dir: str) -> list[str]:
    node = ray_start.NodeSpec(num_cpus=spec.cpus_per_host, num_gpus=spec.gpus_per_host)
    return [f"--address={head}", *ray_start.node_arguments(node, ip, temp_dir, _ports())]


def _head_args_remote(spec: SshSpec, ip: str, port: int, temp_dir: str) -> list[str]:
    # The GCS on ``port``, the dashboard and the Ray client on Ray's own defaults (the card's
    # dashboard link is port 8265); the dashboard answers on the head's address (behind Ray's
    # token), so the Manager can read task counts from this machine.
    block, pinned = _ports(), {"gcs": port, "dashboard": 8265, "client": 10001}
    args, _, _ = ray_start.head_arguments(
        spec.head, ip, temp_dir, lambda name: pinned.get(name) or block(name), dashboard_host=ip
    )
    return args


# ---------------------------------------------------------------- sentences


#: Why a host failed, as a code that other code tests (never the sentence that explains it).
NO_RAY = "no_ray"
VERSION_MISMATCH = "version_mismatch"
KEY_REFUSED = "key_refused"
HOST_KEY_CHANGED = "host_key_changed"
UNREACHABLE = "unreachable"
RAY_START_FAILED = "ray_start_failed"
#: Failures that another try cannot cure.
FINAL = (NO_RAY, VERSION_MISMATCH, KEY_REFUSED, HOST_KEY_CHANGED, UNREACHABLE)


def failure_of(code: int, output: str) -> str:
    """The reason code of a failed ssh command, from its exit code and output (ssh's and Ray's).

    >>> failure_of(127, ""), failure_of(1, "Version mismatch: ..."), failure_of(255, "")
    ('no_ray', 'version_mismatch', 'unreachable')
    """
    if "EUGO_NO_RAY" in output or code == 127:
        return NO_RAY
    if "ersion mismatch" in output:  # Ray's own words ("Version mismatch", "version mismatch")
        return VERSION_MISMATCH
    if "Permission denied" in output:
        return KEY_REFUSED
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in output or "Host key verification" in output:
        return HOST_KEY_CHANGED
    if code == 255:
        return UNREACHABLE
    return RAY_START_FAILED


def why_host_failed(spec: SshSpec, host: str, code: int, output: str) -> str:
    """One sentence naming the host, what went wrong and the fix."""
    text = output.strip()
    who = f"{spec.user}@{host}"
    reason = failure_of(code, text)
    if reason in (NO_RAY, VERSION_MISMATCH):
        import ray

        if reason == NO_RAY:
            return (
                f"{host}: no `{spec.ray_path}` command there. Install the same Ray as this "
                f"server on it (pip install 'ray[default]=={ray.__version__}'), or set ray_path "
                "to where it lives."
            )
        return (
            f"{host}: its Ray is another version than this server's ({ray.__version__}); "
            f"install ray[default]=={ray.__version__} there."
        )
    if reason == KEY_REFUSED:
        key = spec.key_file or "your default ssh key"
        return (
            f"{host}: refused the key {key} for {spec.user}. Add its public key "
            f"({key}.pub) to ~{spec.user}/.ssh/authorized_keys on {host}, or choose the key "
            "that host accepts."
        )
    if reason == HOST_KEY_CHANGED:
        return (
            f"{host}: its host key changed since the last connection; if that is expected, "
            f"remove the old key with ssh-keygen -R {host} and launch again."
        )
    if reason == UNREACHABLE:
        detail = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "no answer")
        return (
            f"{host}: cannot be reached over ssh as {who} on port {spec.port} ({detail[:200]}). "
            "Check the host name, that sshd runs there and that this machine can reach it."
        )
    return f"{host}: `ray start` failed: {ray_start.why(text)}"


@dataclass(frozen=True)
class HostProblem:
    """What stopping a host's node left: a reason code (``UNREACHABLE`` or ``LEFT``), the words."""

    host: str
    reason: str
    sentence: str


#: Stopping answered, but some of the node's processes did not stop.
LEFT = "left"


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
    spec: SshSpec,
    cluster_id: str,
    host: str,
    index: int,
    args: list[str],
    timeout: float,
    attempts: int = 2,
) -> _HostResult:
    temp_dir = _temp_dir(cluster_id, index)
    script_args = [spec.ray_path, _token_file(cluster_id), temp_dir, *args]
    command = ssh_command(spec, host, _START, script_args)
    for attempt in range(1, attempts + 1):
        code, output = _run(command, account_token(), timeout)
        if code == 0:
            return _HostResult(host, _ip_of(host), temp_dir, True)
        if failure_of(code, output) in FINAL or attempt == attempts:
            break
        # `ray start` itself failed (a busy host times a node's start out): clear what it left
        # and try again, as the local backend does for its worker nodes.
        stop_on(spec, cluster_id, host, temp_dir)
    reason = why_host_failed(spec, host, code, output)
    return _HostResult(host, _ip_of(host), temp_dir, False, reason)


def stop_on(
    spec: SshSpec, cluster_id: str, host: str, temp_dir: str, timeout: float = 60
) -> HostProblem | None:
    """Stop this cluster's node on one host; None when nothing is left, else what is wrong.

    A host that does not answer is reported, not waited on: ssh gives up after its timeouts.
    """
    half = len(temp_dir) // 2
    args = [temp_dir[:half], temp_dir[half:], _token_file(cluster_id)]
    code, output = _run(ssh_command(spec, host, _STOP, args), "", timeout)
    if code != 0 or not any(ln.startswith("EUGO_LEFT") for ln in output.splitlines()):
        why = why_host_failed(spec, host, code, output)
        return HostProblem(
            host, UNREACHABLE, f"{host}: could not be reached to stop its node ({why})"
        )
    # Only the script's own line: ssh may add warnings of its own to the output.
    line = next(ln for ln in output.splitlines() if ln.startswith("EUGO_LEFT"))
    left = line.removeprefix("EUGO_LEFT").split()
    if not left:
        return None
    return HostProblem(host, LEFT, f"{host}: pids {' '.join(left)} did not stop")
