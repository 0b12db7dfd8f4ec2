"""What the live panes keep in the browser: the page's JavaScript heap after an hour of updates.

A real `jupyter lab` (as the browser tests start it) in the system Chromium with all five live
panes open on one active cluster. The cluster list and the panes' replies are synthetic, served
inside the browser (Playwright routes) on a virtual clock: each task-stream reply advances the
server's clock by a minute and carries 3,000 new tasks over 24 workers (50 tasks a second), the
node, GPU, progress and failure replies change each time. So one hour of a busy cluster's updates
(180,000 tasks) passes in 60 replies, and the heap measures what the panes keep, not Ray.

Reported, after a forced garbage collection: the heap with the panes open before any update,
after 5 minutes' worth (the task stream's window full), and after an hour's worth; the ratio
hour / 5 minutes (target about 1: old data is dropped, the heap does not grow with time).

Run: ``python benchmarks/bench_pane_memory.py`` (a few minutes). Prints a table.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ui.conftest import CHROMIUM, running_lab  # noqa: E402 (after the path is set)

WORKERS = 24
TASKS_PER_REPLY = 3000  # one virtual minute at 50 tasks a second
MINUTE = 60.0
COMMANDS = ["Task Stream", "Progress", "Nodes", "GPUs", "Failures"]


class Replies:
    """The synthetic server: a virtual clock that the task stream's replies advance."""

    def __init__(self) -> None:
        self.now = 1.8e9
        self.serial = 0
        self.task_replies = 0

    def cluster(self) -> list[dict[str, Any]]:
        return [{
            "id": "bench", "name": "bench", "kind": "local", "status": "running",
            "active": True, "address": "127.0.0.1:6379", "dashboard_url": None, "nodes": [],
            "tasks": {"pending": 0, "running": WORKERS, "finished": 0, "failed": 0},
            "waiting": [], "resources": {}, "facts": None,
        }]  # fmt: skip

    def tasks(self) -> dict[str, Any]:
        start = self.now
        self.now += MINUTE
        self.task_replies += 1
        rows = []
        for i in range(TASKS_PER_REPLY):
            self.serial += 1
            t = start + i * MINUTE / TASKS_PER_REPLY
            rows.append({
                "task_id": f"t{self.serial}", "func": f"f{self.serial % 7}", "name": "",
                "state": "FAILED" if self.serial % 500 == 0 else "FINISHED",
                "node_id": f"node{i % 4}", "node": f"10.0.0.{i % 4}",
                "worker_id": f"{i % WORKERS:08x}", "start": t, "end": t + 0.4,
                "error": None,
            })  # fmt: skip
        return {"cursor": str(self.serial), "tasks": rows, "truncated": False}

    def reply(self, url: str) -> Any:
        base = {"cluster": "bench", "status": "running", "now": self.now, "message": None}
        view = url.split("/live/")[-1].split("?")[0] if "/live/" in url else ""
        if view == "tasks":
            return {**base, **self.tasks()}
        if view == "progress":
            groups = [{"key": f"function:j:f{i}", "label": f"f{i}", "kind": "function",
                       "done": self.serial // 7, "running": 3, "waiting": 0, "failed": 1}
                      for i in range(7)]  # fmt: skip
            return {**base, "groups": groups, "waiting": []}
        if view == "nodes":
            nodes = [{"node_id": f"node{i}", "node": f"10.0.0.{i}", "alive": True,
                      "cpu_percent": (self.serial + 10 * i) % 100, "cpus": 6,
                      "mem_used": 2**30 * (1 + i), "mem_total": 2**33,
                      "object_store_used": 2**28, "object_store_total": 2**30}
                     for i in range(4)]  # fmt: skip
            return {**base, "nodes": nodes}
        if view == "gpus":
            gpus = [{"node_id": f"node{i}", "node": f"10.0.0.{i}", "index": g, "name": "GPU",
                     "utilization": (self.serial + g) % 100, "memory_used": 2**33,
                     "memory_total": 2**36, "tasks": [{"pid": 100 + g, "func": None}]}
                    for i in range(4) for g in range(2)]  # fmt: skip
            return {**base, "gpus": gpus}
        if view == "failures":
            rows = [{"task_id": f"x{self.serial - k}", "func": "f0", "node": "10.0.0.1",
                     "error": "ValueError: boom", "traceback": "Traceback ...\n" * 20,
                     "end": self.now - k} for k in range(100)]  # fmt: skip
            return {**base, "failures": rows, "truncated": True}
        return self.cluster()


def heap_mb(cdp: Any) -> float:
    cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return float(metrics["JSHeapUsedSize"]) / 2**20


def main() -> None:
    from playwright.sync_api import sync_playwright

    replies = Replies()

    def handle(route: Any) -> None:
        url = route.request.url
        if "/eugo/clusters" not in url:
            route.continue_()
            return
        body = json.dumps(replies.reply(url))
        route.fulfill(status=200, body=body, content_type="application/json")

    with tempfile.TemporaryDirectory() as folder, running_lab(Path(folder)) as lab:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(120_000)
            page.route("**/eugo/**", handle)
            page.goto(f"{lab.url}lab/workspaces/bench?reset&token={lab.token}")
            page.wait_for_selector("#jp-main-dock-panel", state="visible")
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            before = heap_mb(cdp)
            for label in COMMANDS:
                page.keyboard.press("Control+Shift+C")
                page.locator("#modal-command-palette input").first.fill(f"Open {label} (EugoHPC)")
                page.locator(".lm-CommandPalette-item", has_text=label).first.click()
            # Task stream and progress side by side, the others as tabs: show each in turn so
            # every pane polls (a hidden pane asks nothing), the task stream in sight throughout.
            seen: dict[int, float] = {}
            tabs = ["Nodes", "GPUs", "Failures"]
            while replies.task_replies < 60:
                page.locator(".lm-TabBar-tab", has_text=tabs[replies.task_replies % 3]).click()
                page.wait_for_timeout(1000)  # a task-stream poll interval: the virtual minute
                minutes = replies.task_replies
                if minutes >= 5 and 5 not in seen:
                    seen[5] = heap_mb(cdp)
            seen[60] = heap_mb(cdp)
            kept = page.locator("#eugo-live-tasks .eugo-Live-status").inner_text()
            browser.close()
    rows = [
        ("JS heap, JupyterLab before the panes", before, ""),
        ("JS heap, five panes, 5 min of updates", seen[5], ""),
        ("JS heap, five panes, 60 min of updates", seen[60], "hour / 5 min = "
         f"{seen[60] / seen[5]:.2f} (target about 1)"),
    ]  # fmt: skip
    print(f"{'what':<44} {'MiB':>8}  note")
    for what, mb, note in rows:
        print(f"{what:<44} {mb:>8.1f}  {note}")
    print(f"task stream's line at the end: {kept}")


if __name__ == "__main__":
    main()
