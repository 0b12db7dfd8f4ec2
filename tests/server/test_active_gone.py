"""A kernel started after its active cluster died outside the manager says so, once.

The cluster is launched and activated through REST, then its processes are stopped directly
(as a `kill` in a terminal would), not through the manager. A real kernel started afterwards
must run on the embedded local Ray and say, once, that the active cluster is gone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from eugo_jupyter.server.backends import local as launcher
from tests.fixtures.jupyter import poll_model

CODE = """
import eugo_jupyter as eugo

@eugo.hpc.distribute
def one():
    return 1

print("result", eugo.hpc.get(one()), eugo.hpc.cluster().source)
"""


def _run(client: Any, code: str) -> tuple[dict[str, Any], str]:
    texts: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            texts.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            texts.append("\n".join(msg["content"]["traceback"]))

    reply = client.execute_interactive(code, output_hook=hook, timeout=300)
    return reply["content"], "".join(texts)


async def test_a_kernel_says_once_that_its_active_cluster_is_gone(jp_fetch: Any) -> None:
    from jupyter_client.manager import AsyncKernelManager

    body = {"kind": "local", "name": "doomed", "head": {"num_cpus": 1}, "lifetime": "persistent"}
    response = await jp_fetch("eugo", "clusters", method="POST", body=json.dumps(body))
    cluster_id = json.loads(response.body)["id"]
    model = await poll_model(jp_fetch, cluster_id, lambda m: m["status"] == "running")
    await jp_fetch("eugo", "clusters", cluster_id, "activate", method="POST", body="")
    runtime = Path(os.environ["JUPYTER_RUNTIME_DIR"]) / "eugo"
    record = json.loads((runtime / "clusters" / f"{cluster_id}.json").read_text())

    # Killed outside the manager: the manager notices on its next look and marks it stopped.
    assert launcher.stop(record["pgids"], record["temp_dir"]) == []
    model = await poll_model(jp_fetch, cluster_id, lambda m: m["status"] == "stopped")
    assert "processes are gone" in model["error"]

    kernel = AsyncKernelManager(kernel_name="python3")
    await kernel.start_kernel(env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    client = kernel.blocking_client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        reply, text = _run(client, CODE)
        assert reply["status"] == "ok", text
        assert "result 1 embedded" in text
        assert text.count("The active cluster 'doomed'") == 1, text
        assert "is gone: The cluster's processes are gone" in text
        assert "uses an embedded local Ray instead" in text
        # Once: a new connection in the same kernel does not say it again.
        reply, text = _run(client, "eugo.hpc.shutdown()\n" + CODE)
        assert reply["status"] == "ok", text
        assert "result 1 embedded" in text and "The active cluster" not in text
    finally:
        client.stop_channels()
        await kernel.shutdown_kernel(now=True)
    await jp_fetch("eugo", "clusters", cluster_id, method="DELETE")
    assert not (runtime / "active.json").exists()  # removing the card forgets the marker too
