"""The live panes' endpoints against a real Ray cluster running real tasks.

One Ray head for the module (started in this process, which is also the driver submitting the
tasks); each test's Jupyter server connects to it. The GPU figures are the one mock: no GPU
here, so the reporter's summary is replaced by one with a GPU in it (the node's real figures
otherwise), fed through the hub's ``fetch`` seam.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.jupyter import DEADLINE_S, error_of, fetch_json

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    """A real Ray head (with its dashboard) for the module; its GCS address."""
    from eugo_jupyter._raystate import stop_failed_start

    for tries_left in (2, 1, 0):  # Ray's fixed 30 s for the raylet to register: a busy machine
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=True, logging_level="ERROR")
            break
        except Exception as exc:
            if not stop_failed_start(exc) or not tries_left:
                raise
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()


@ray.remote(num_cpus=1)
def square(x: int) -> int:
    if x < 0:
        raise ValueError(f"no square roots of {x} today")
    return x * x


async def _connect(jp_fetch: Any, address: str) -> str:
    body = json.dumps({"kind": "connect", "address": address, "name": "live"})
    response = await jp_fetch("eugo", "clusters", method="POST", body=body)
    return str(json.loads(response.body)["id"])


async def _until(jp_fetch: Any, parts: tuple[str, ...], ready: Any, what: str, **kw: Any) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = await fetch_json(jp_fetch, *parts, **kw)
        if ready(answer):
            return answer
        assert time.monotonic() < deadline, f"{what} never showed; last answer: {answer}"
        await asyncio.sleep(0.3)


async def test_a_run_shows_in_the_stream_progress_and_failures(jp_fetch: Any, head: str) -> None:
    cluster = await _connect(jp_fetch, head)
    live = ("eugo", "clusters", cluster, "live")
    first = await fetch_json(jp_fetch, *live, "tasks")
    assert first["cluster"] == cluster and first["status"] == "running"
    assert isinstance(first["now"], float) and first["truncated"] is False
    refs = [square.remote(x) for x in (1, 2, 3, 4, 5, -1)]

    seen: dict[str, dict[str, Any]] = {}
    cursor = first["cursor"]

    def all_ended(answer: dict[str, Any]) -> bool:
        nonlocal cursor
        cursor = answer["cursor"]
        for task in answer["tasks"]:
            seen[task["task_id"]] = task
        ended = [t for t in seen.values() if t["func"] == "square" and t["end"] is not None]
        return len(ended) >= 6

    await _until(
        jp_fetch, (*live, "tasks"), all_ended, "six ended squares",
        params={"since": cursor},
    )  # fmt: skip
    squares = [t for t in seen.values() if t["func"] == "square"]
    assert {t["state"] for t in squares} == {"FINISHED", "FAILED"}
    failed = [t for t in squares if t["state"] == "FAILED"]
    assert len(failed) == 1 and "ValueError: no square roots of -1 today" in failed[0]["error"]
    for task in squares:
        assert task["node"] == head.split(":")[0] and task["node_id"] and task["worker_id"]
        assert task["start"] <= task["end"]
    # Passing the cursor back gives only what changed since: nothing, once the run ended.
    again = await fetch_json(jp_fetch, *live, "tasks", params={"since": cursor})
    assert [t for t in again["tasks"] if t["func"] == "square"] == []

    progress = await _until(
        jp_fetch, (*live, "progress"),
        lambda a: any(g["label"] == "square" and g["done"] + g["failed"] >= 6 for g in a["groups"]),
        "the run's progress",
    )  # fmt: skip
    (group,) = [g for g in progress["groups"] if g["label"] == "square"]
    assert group["kind"] == "function"
    assert (group["done"], group["failed"], group["running"]) == (5, 1, 0)
    assert progress["waiting"] == []

    failures = await fetch_json(jp_fetch, *live, "failures")
    (failure,) = [f for f in failures["failures"] if f["func"] == "square"]
    assert failure["error"] == "ValueError: no square roots of -1 today"
    assert "raise ValueError" in failure["traceback"] and "test_live.py" in failure["traceback"]
    assert failure["node"] == head.split(":")[0] and failure["end"] > 0
    with pytest.raises(ray.exceptions.RayTaskError):
        await asyncio.get_running_loop().run_in_executor(None, ray.get, refs)


def double(x: int) -> int:
    return 2 * x


async def test_each_map_and_imap_run_is_a_bar_of_its_own(jp_fetch: Any, head: str) -> None:
    # Two maps of one function and an imap of it: three bars, each with its own counts, not
    # one bar counting all three runs.
    import eugo_jupyter as eugo

    cluster = await _connect(jp_fetch, head)

    def runs() -> None:
        for _ in range(2):
            assert eugo.hpc.map(double, range(40), batch_size=10) == [2 * x for x in range(40)]
        assert list(eugo.hpc.imap(double, range(30), batch_size=10)) == [2 * x for x in range(30)]

    await asyncio.get_running_loop().run_in_executor(None, runs)

    def bars(answer: dict[str, Any]) -> list[dict[str, Any]]:
        return [g for g in answer["groups"] if "(double)" in g["label"]]

    progress = await _until(
        jp_fetch, ("eugo", "clusters", cluster, "live", "progress"),
        lambda a: len(bars(a)) == 3 and all(g["done"] >= 3 for g in bars(a)), "three runs",
    )  # fmt: skip
    labels = sorted(g["label"] for g in bars(progress))
    assert [label.split(" ")[0] for label in labels] == [
        "imap(double)",
        "map(double)",
        "map(double)",
    ]
    assert len(set(labels)) == 3 and all(g["kind"] == "map" for g in bars(progress))
    assert sorted(g["done"] for g in bars(progress)) == [3, 4, 4]  # batches of 10 items
    assert all(g["running"] == 0 and g["failed"] == 0 for g in bars(progress))


async def test_nodes_show_the_reporters_figures(jp_fetch: Any, head: str) -> None:
    cluster = await _connect(jp_fetch, head)
    answer = await _until(
        jp_fetch, ("eugo", "clusters", cluster, "live", "nodes"),
        lambda a: a["nodes"] and a["nodes"][0]["mem_total"], "the node's figures",
    )  # fmt: skip
    (node,) = answer["nodes"]
    assert node["alive"] and node["node"] == head.split(":")[0] and node["cpus"] >= 1
    assert 0 < node["mem_used"] < node["mem_total"]
    assert 0 <= node["object_store_used"] <= node["object_store_total"]
    assert node["object_store_total"] > 0 and 0.0 <= node["cpu_percent"] <= 100.0 * 64


async def test_a_cluster_without_gpu_says_so(jp_fetch: Any, head: str) -> None:
    cluster = await _connect(jp_fetch, head)
    answer = await fetch_json(jp_fetch, "eugo", "clusters", cluster, "live", "gpus")
    assert answer["gpus"] == []
    assert answer["message"].startswith("This cluster has no GPU")


async def test_gpus_with_the_tasks_holding_them(
    jp_fetch: Any, head: str, jp_serverapp: Any
) -> None:
    """Mock GPU figures (no GPU on this machine): the reporter's summary gains one GPU whose
    process is the worker running a real task; the pane names that task."""
    hub = jp_serverapp.web_app.settings["eugo_live_hub"]
    real = hub.fetch

    @ray.remote(num_cpus=1)
    def holds_gpu(seconds: float) -> int:
        import os

        time.sleep(seconds)
        return os.getpid()

    pids: list[int] = []

    async def with_a_gpu(base: str, headers: dict[str, str]) -> dict[str, Any]:
        summary = await real(base, headers)
        for entry in summary["data"]["summary"]:
            entry["gpus"] = [
                {"index": 0, "name": "NVIDIA H200 (mock)", "utilizationGpu": 87,
                 "memoryUsed": 40960, "memoryTotal": 143771,
                 "processesPids": [{"pid": p, "gpuMemoryUsage": 40000} for p in pids]}
            ]  # fmt: skip
        return summary

    hub.fetch = with_a_gpu
    cluster = await _connect(jp_fetch, head)
    live = ("eugo", "clusters", cluster, "live")
    ref = holds_gpu.remote(30.0)
    running = await _until(
        jp_fetch, (*live, "tasks"),
        lambda a: any(t["func"] == "holds_gpu" and t["state"] == "RUNNING" for t in a["tasks"]),
        "the GPU task running",
    )  # fmt: skip
    (task,) = [t for t in running["tasks"] if t["func"] == "holds_gpu"]
    pids.append(hub._watches[cluster].ledger.pids[(task["task_id"], 0)])
    answer = await _until(
        jp_fetch, (*live, "gpus"),
        lambda a: a["gpus"] and a["gpus"][0]["tasks"], "the GPU's task",
    )  # fmt: skip
    (gpu,) = answer["gpus"]
    assert answer["message"] is None
    assert (gpu["name"], gpu["utilization"], gpu["index"]) == ("NVIDIA H200 (mock)", 87, 0)
    assert gpu["memory_used"] == 40960 * 2**20 and gpu["memory_total"] == 143771 * 2**20
    assert gpu["tasks"] == [{"task_id": task["task_id"], "func": "holds_gpu", "pid": pids[0]}]
    ray.cancel(ref, force=True)


async def test_the_reply_stays_bounded_with_many_tasks(jp_fetch: Any, head: str) -> None:
    cluster = await _connect(jp_fetch, head)
    live = ("eugo", "clusters", cluster, "live")
    tiny = ray.remote(num_cpus=0.5)(lambda i: i)
    refs = [tiny.remote(i) for i in range(3000)]
    await asyncio.get_running_loop().run_in_executor(None, ray.get, refs)
    answer = await _until(
        jp_fetch, (*live, "tasks"), lambda a: a["truncated"], "a cut reply",
        params={"limit": "50"},
    )  # fmt: skip
    assert len(answer["tasks"]) == 50
    # The cursor walks on through the rest, 50 at a time, never more.
    after = await fetch_json(jp_fetch, *live, "tasks", params={"limit": "50", "since": "x-0"})
    assert len(after["tasks"]) == 50  # an unknown cursor is a first call
    default = await fetch_json(jp_fetch, *live, "tasks")
    assert len(default["tasks"]) <= 2000
    assert len(json.dumps(default)) < 2000 * 1000


@pytest.mark.parametrize(
    ("view", "params", "says"),
    [
        ("tasks", {"limit": "0"}, "limit must be a whole number from 1 to 5000, not '0'"),
        ("tasks", {"limit": "many"}, "limit must be a whole number from 1 to 5000"),
        ("failures", {"limit": "501"}, "limit must be a whole number from 1 to 500"),
        ("tasks", {"since": "latest"}, "since must be the cursor of an earlier reply"),
        ("tasks", {"since": "ab-1; drop"}, "not 'ab-1; drop'"),
    ],
)
async def test_a_bad_parameter_is_400_with_the_fix(
    jp_fetch: Any, view: str, params: dict[str, str], says: str
) -> None:
    code, message = await error_of(jp_fetch, "eugo", "clusters", "c-1", "live", view, params=params)
    assert code == 400 and says in message and "leave it out" in message


@pytest.mark.parametrize("view", ["tasks", "progress", "nodes", "gpus", "failures"])
async def test_no_credentials_is_403_and_an_unknown_id_404(jp_fetch: Any, view: str) -> None:
    code, _ = await error_of(
        jp_fetch, "eugo", "clusters", "c-0", "live", view, headers={"Authorization": ""}
    )
    assert code == 403
    code, message = await error_of(jp_fetch, "eugo", "clusters", "c-0", "live", view)
    assert code == 404 and "No cluster with id 'c-0'" in message


@pytest.mark.parametrize("status", ["stopped", "starting", "error"])
def test_a_cluster_that_is_not_running_answers_its_status_and_a_sentence(status: str) -> None:
    """What a pane gets for a card that is not running (the hub as the route calls it)."""
    from eugo_jupyter.server.live import LiveHub, LiveTarget

    hub = LiveHub()
    target = LiveTarget("c-1", {"status": status, "address": "127.0.0.1:1", "nodes": []})

    async def every_view() -> list[dict[str, Any]]:
        return [
            await hub.tasks(target, None, 10), await hub.progress(target),
            await hub.nodes(target), await hub.gpus(target), await hub.failures(target, 10),
        ]  # fmt: skip

    for reply, data in zip(
        asyncio.run(every_view()), ("tasks", "groups", "nodes", "gpus", "failures"), strict=True
    ):
        assert reply["cluster"] == "c-1" and reply["status"] == status
        assert reply[data] == [] and f"The cluster is {status}" in reply["message"]
