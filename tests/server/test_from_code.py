"""``eugo.hpc.launch`` and ``eugo.hpc.clusters``: clusters from code, with and without a server.

In a plain Python process (a script: no Jupyter server) the backends run in that process: a
cluster stops when the process exits, one launched ``lifetime="persistent"`` outlives it and a
Jupyter server started afterwards lists it. In a kernel started by a real Jupyter server the
calls go through that server's REST API: the cluster is in ``GET /eugo/clusters`` and outlives
the kernel. Bad arguments raise at the call with the REST API's sentence, and nothing starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eugo_jupyter as eugo
from eugo_jupyter import _processes as processes
from eugo_jupyter import records
from eugo_jupyter.exceptions import OptionsError
from eugo_jupyter.server.code_channel import kernel_server
from tests.fixtures.jupyter import jupyter_server

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 600.0  # a shared machine: we poll for a condition, never time it

_SCRIPT = """\
import json, sys
import eugo_jupyter as eugo

cluster = eugo.hpc.launch("local", name=sys.argv[1], head={"num_cpus": 1},
                          workers=[{"num_cpus": 1}], lifetime=sys.argv[2])
cluster.use()
print(json.dumps({"sum": sum(eugo.hpc.map(abs, [-1, -2, 3])), "id": cluster.id,
                  "where": cluster._channel.where,
                  "temp_dir": eugo.records.read_record(cluster.id)["temp_dir"],
                  "card": repr(cluster), "table": repr(eugo.hpc.clusters())}))
"""


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    return tmp_path / "runtime"


def _env(runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "JPY_PARENT_PID")}
    return {**env, "JUPYTER_RUNTIME_DIR": str(runtime), "PYTHONPATH": str(ROOT)}


def _script(runtime: Path, name: str, lifetime: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, name, lifetime], env=_env(runtime),
        capture_output=True, text=True, timeout=DEADLINE, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _left(temp_dir: str) -> list[str]:
    return [processes.cmdline(p) for p in processes.pids() if temp_dir in processes.cmdline(p)]


def _gone(temp_dir: str, deadline_s: float = 120.0) -> list[str]:
    deadline = time.monotonic() + deadline_s
    while _left(temp_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    return _left(temp_dir)


@pytest.mark.parametrize(
    ("kind", "fields", "sentence"),
    [
        ("local", {"num_cpus": 2}, "Unknown key 'num_cpus' in a local launch; allowed: kind"),
        ("slurm", {"nodes": 0}, "slurm.nodes=0 is out of range"),
        ("gridengine", {"walltime": "soon"}, "gridengine.walltime='soon'"),
        ("ssh", {"hosts": []}, "ssh.hosts=[] is not allowed"),
        ("local", {"name": "bad/name"}, "name='bad/name' is not allowed"),
        ("kubernetes", {"namespace": "Bad_NS"}, "kubernetes.namespace='Bad_NS' is not allowed"),
        ("pbs", {}, "kind='pbs' is not allowed: use one of"),
        ("local", {"lifetime": "forever"}, "lifetime='forever' is not allowed"),
    ],
)
def test_a_bad_argument_raises_with_the_field_named_and_nothing_starts(
    runtime: Path, kind: str, fields: dict[str, Any], sentence: str
) -> None:
    before = {p for p in processes.pids() if "ray" in processes.cmdline(p)}
    with pytest.raises(OptionsError) as info:
        eugo.hpc.launch(kind, **fields)
    assert sentence in str(info.value)
    assert records.list_records() == []  # nothing launched, nothing recorded
    assert {p for p in processes.pids() if "ray" in processes.cmdline(p)} <= before


def test_outside_a_job_allocation_says_where_to_run(runtime: Path) -> None:
    hidden = ("SLURM_JOB_ID", "JOB_ID", "PBS_JOBID")
    saved = {k: os.environ.pop(k) for k in hidden if k in os.environ}
    try:
        with pytest.raises(OptionsError, match="inside a job"):
            eugo.hpc.launch("allocation")
    finally:
        os.environ.update(saved)


def test_the_kinds_fields_given_flat_are_the_rest_bodys(runtime: Path) -> None:
    cluster = eugo.hpc.launch("slurm", name="hpc", nodes=2, walltime="01:00:00", start=False)
    assert cluster.body == {
        "kind": "slurm", "name": "hpc", "slurm": {"nodes": 2, "walltime": "01:00:00"},
    }  # fmt: skip
    text = cluster.preview()  # the job scripts, nothing submitted
    assert "#SBATCH" in text and "--time=01:00:00" in text
    assert "not started" in repr(cluster) and records.list_records() == []


def test_a_script_cluster_runs_tasks_and_stops_when_the_script_exits(runtime: Path) -> None:
    facts = _script(runtime, "scripted", "server")
    assert facts["sum"] == 6 and facts["where"] == "this process"
    assert "status running" in facts["card"] and "2 CPUs" in facts["card"]
    assert "scripted" in facts["table"] and "running" in facts["table"]
    assert _gone(facts["temp_dir"]) == []  # stopped at exit
    assert records.read_record(facts["id"]) is None


def test_a_persistent_script_cluster_outlives_it_and_a_later_server_lists_it(
    runtime: Path,
) -> None:
    facts = _script(runtime, "kept", "persistent")
    try:
        assert _left(facts["temp_dir"])  # still running after the script exited
        with jupyter_server(runtime, ("--EugoManagerExtension.find_clusters=False",)) as (
            client,
            _,
        ):
            listed = {m["id"]: m for m in client.clusters()}
            assert listed[facts["id"]]["status"] == "running"
            # Not inside a batch job: the panel does not offer "This job's nodes".
            in_job = any(os.environ.get(k) for k in ("SLURM_JOB_ID", "JOB_ID", "PBS_JOBID"))
            assert client.call("GET", "eugo/kinds")["allocation"]["available"] is in_job
            assert listed[facts["id"]]["name"] == "kept"
            client.shutdown(facts["id"])
        assert _gone(facts["temp_dir"]) == []
    finally:
        processes.stop([], facts["temp_dir"])


_KERNEL_CODE = """\
import json
import eugo_jupyter as eugo
cluster = eugo.hpc.launch("local", name="from-kernel", head={"num_cpus": 1})
cluster.wait()
print("FACTS", json.dumps({"id": cluster.id, "where": cluster._channel.where,
                           "html": cluster._repr_html_()}))
"""


@pytest.fixture
def kernel_in_server(runtime: Path) -> Iterator[tuple[Any, Any]]:
    from jupyter_client import BlockingKernelClient

    # Other people's Ray heads on a shared machine are not this test's business.
    args = ("--EugoManagerExtension.find_clusters=False",)
    with jupyter_server(runtime, args, env={"PYTHONPATH": str(ROOT)}) as (client, _):
        kernel = client.call("POST", "api/kernels", {"name": "python3"})
        kc = BlockingKernelClient()
        kc.load_connection_file(str(runtime / f"kernel-{kernel['id']}.json"))
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=DEADLINE)
            yield client, kc
        finally:
            kc.stop_channels()
            for model in client.clusters():
                if model["kind"] != "found":
                    client.shutdown(model["id"])


def _execute(kc: Any, code: str) -> str:
    texts: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            texts.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            texts.append("\n".join(msg["content"]["traceback"]))

    kc.execute_interactive(code, output_hook=hook, timeout=DEADLINE)
    return "".join(texts)


def test_in_a_kernel_of_a_server_the_cluster_is_the_servers(
    kernel_in_server: tuple[Any, Any],
) -> None:
    client, kc = kernel_in_server
    out = _execute(kc, _KERNEL_CODE)
    assert "FACTS" in out, out
    facts = json.loads(out.split("FACTS", 1)[1])
    assert facts["where"].startswith("the Jupyter server at http://127.0.0.1:")
    assert "from-kernel" in facts["html"] and "running" in facts["html"]
    listed = {m["id"]: m for m in client.clusters()}
    assert listed[facts["id"]]["name"] == "from-kernel"
    assert listed[facts["id"]]["status"] == "running"
    out = _execute(kc, "cluster.close(); print('LISTED', [c['id'] for c in eugo.hpc.clusters()])")

    assert "LISTED []" in out, out
    assert facts["id"] not in {m["id"] for m in client.clusters()}


def test_no_server_file_means_no_server(tmp_path: Path, runtime: Path) -> None:
    assert kernel_server({"JPY_PARENT_PID": "1"}, parent=1) is None
