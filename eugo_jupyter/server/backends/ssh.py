"""The `ssh` backend: a Ray cluster on machines you can SSH into (workstations, plain VMs).

The head runs on this machine (``head_on: "local"``, the default) or on the first host; every
host then gets one worker node, started with ``ray start`` over ``ssh``. Every command is an
argument list; the one string ssh hands the remote shell is a fixed script whose arguments are
quoted with :func:`shlex.join`. Every node gets an explicit ``--node-ip-address`` (a host without
a default route would otherwise advertise 127.0.0.1) and a temp folder named after the cluster,
so stopping a node ends exactly its processes (never ``ray stop``, which would end every Ray on
that host). The cluster's Ray token travels on ssh's stdin into a file only the user can read.
What happens on one host (the ssh command, the scripts, the per-host sentence) is
:mod:`.ssh_hosts`; this module checks a launch and drives the hosts.

Why ``ray start`` over ssh and not Ray's own cluster launcher (``ray up`` with the on-premise
``local`` provider): tried, measured, and it does not do the job in the Ray we depend on (2.60).
``benchmarks/bench_ssh_ray_up.py`` runs it on the test bed (head on host 1, ``worker_ips`` hosts 2
and 3, start commands without the default ``ray stop``). In two runs ``ray up`` returned in 18 and
31 s with the head up, the head's autoscaler had host 2 up at 29 and 61 s, and host 3 never: Ray's
v2 autoscaler took the on-prem head for an instance of the provider's single node type ("allocated
unmanaged worker cloud instance from ray node <head>") and then logged "Adding 1 node(s)" every 5 s
without ever launching host 3: after 5 minutes, still 2 of 3 nodes. ``ray down`` runs ``ray stop``
on the head (which ends every Ray on that host) and only marks the workers terminated, so without
``ray`` on the login ``PATH`` it returned in 8 s leaving all 23 processes of both nodes running. It
would also cost an autoscaler process on the head, ``rsync`` on both ends, a YAML per cluster, the
key copied to the head, and a failed host surfaces only in the autoscaler's log. Starting the nodes
ourselves costs one ssh call per host, in parallel, reports each host in its own sentence, lets the
other hosts join when one fails and stops exactly our processes; ``benchmarks/bench_ssh.py``
measures it against the same ``ray start`` commands run by hand.

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
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ... import _processes as processes
from ..._raytoken import secure_token_file
from ...exceptions import LaunchError, OptionsError
from .. import requests
from . import local, ray_start
from .base import Backend, Observed, Plan, Spec
from .ssh_hosts import (
    UNREACHABLE,
    SshSpec,
    _head_args_remote,
    _HostResult,
    _ip_of,
    _start_on,
    _temp_dir,
    _worker_args,
    ssh_command,
    stop_on,
)

__all__ = ["SshBackend", "SshSpec"]

MAX_HOSTS = 64
_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[?[0-9A-Fa-f:.]+\]?")
_USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_PATH_RE = re.compile(r"[A-Za-z0-9_~./+][A-Za-z0-9_./+-]{0,255}")
_SSH_KEYS = (
    "hosts", "user", "key_file", "port", "ray_path", "head_on", "cpus_per_host", "gpus_per_host",
)  # fmt: skip


class SshBackend(Backend):
    """``kind: "ssh"``: a head here (or on the first host) and a worker node per host."""

    kind = "ssh"
    label = "SSH"
    form_fields = _SSH_KEYS

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
            head_ip = ray_start.node_ip()
            args, port, _ = ray_start.head_arguments(
                fields.head, head_ip, f"/tmp/eugo-{cluster_id}"
            )
            commands.append([ray_start.ray_executable(), "start", *args])
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
            f"A head with {ray_start.describe(fields.head)} on {where}, then a worker with "
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
            # Short on purpose: Ray puts unix sockets under it (108-byte limit).
            started = local.launch(
                fields.head, [], f"{tempfile.gettempdir()}/eugo-{cluster_id}", timeout,
                say=lambda text: record.__setitem__("progress", text),
            )  # fmt: skip
            updates.update(
                pgids=started.pgids, temp_dir=started.temp_dir, dashboard_url=started.dashboard_url
            )
            address = started.gcs_address
        else:
            index, first = hosts.pop(0)
            head_ip, port = _ip_of(first), 6379
            args = _head_args_remote(fields, head_ip, port, _temp_dir(cluster_id, index))
            # Three tries, not two: a head starts a GCS, a dashboard and its modules next to its
            # raylet, and on a busy host the raylet misses Ray's fixed 15 s wait for its agent
            # ("Timed out waiting for file .../dashboard_agent_listen_port_...") more often
            # than a worker's does.
            head = _start_on(fields, cluster_id, first, index, args, timeout, attempts=3)
            if not head.joined:
                # A failed `ray start --head` leaves its GCS and dashboard running there, and the
                # record never learns of this host: stop them now or nothing ever will.
                stop_on(fields, cluster_id, first, head.temp_dir)
                raise LaunchError(f"The head did not start on {head.reason}")
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
        if pgids and not processes.owned_groups(pgids, str(record.get("temp_dir") or "")):
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
            for pid in processes.stop(
                [int(p) for p in record.get("pgids") or []], str(record.get("temp_dir") or "")
            )
        ] if record.get("temp_dir") else []  # fmt: skip
        # A host that vanished cannot be asked: it is reported in the log, never waited on.
        problems = [r for r in remote if r is not None]
        for problem in problems:
            if problem.reason == UNREACHABLE:
                import logging

                logging.getLogger("eugo_jupyter").warning("%s", problem.sentence)
        return left + [p.sentence for p in problems if p.reason != UNREACHABLE]

    def adopt(self, record: dict[str, Any]) -> str | None:
        from .. import monitor

        address = record.get("address")
        if address and monitor.reachable(str(address)):
            return "running"
        self.stop(record)
        return None
