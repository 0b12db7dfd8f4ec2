"""A real notebook kernel for tests, and what a notebook front end would show under each cell.

Every IOPub message is kept, whatever cell it belongs to: a display made by one cell and updated
(by its ``display_id``) while another cell runs, or while the kernel is idle, is shown under the
cell that made it, as JupyterLab routes it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any


class Kernel:
    """A running kernel: run cells, and read what the user sees under each one."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.owner: dict[str, str] = {}  # display id -> the cell (msg id) that made it
        self.display: dict[str, str] = {}  # display id -> its latest text
        self.streams: dict[str, list[tuple[str, str]]] = {}  # cell -> [(name, text)]
        self.order: dict[str, list[str]] = {}  # cell -> "stream"/"display:<id>" as they came

    # -- messages -------------------------------------------------------------------------
    def _take(self, msg: dict[str, Any]) -> None:
        kind = msg["msg_type"]
        cell = msg["parent_header"].get("msg_id", "")
        content = msg["content"]
        if kind == "stream":
            self.streams.setdefault(cell, []).append((content["name"], content["text"]))
            self.order.setdefault(cell, []).append("stream:" + content["text"])
        elif kind in ("display_data", "update_display_data", "execute_result"):
            # Without a display id, the message's own id (an object's id() is reused once freed).
            display_id = (
                content.get("transient", {}).get("display_id")
                or f"{kind}:{msg['header']['msg_id']}"
            )
            if kind != "update_display_data":
                self.owner.setdefault(display_id, cell)
            self.display[display_id] = content["data"].get("text/plain", "")
            self.order.setdefault(cell, []).append("display:" + self.display[display_id])

    def pump(self, seconds: float = 0.0) -> None:
        """Read what the kernel sent, for up to ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            try:
                msg = self.client.get_iopub_msg(timeout=max(0.05, left))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return
                continue
            self._take(msg)

    def run(self, code: str, timeout: float = 300) -> str:
        """Run a cell to the end; its message id. Fails on an error in the cell."""
        msg_id = self.client.execute(textwrap.dedent(code))
        deadline = time.monotonic() + timeout
        error = None
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            self._take(msg)
            mine = msg["parent_header"].get("msg_id") == msg_id
            if mine and msg["msg_type"] == "error":
                error = "\n".join(msg["content"]["traceback"])
            if mine and msg["msg_type"] == "status":
                if msg["content"]["execution_state"] == "idle":
                    break
        else:
            raise AssertionError(f"the cell did not finish within {timeout} s: {code}")
        assert error is None, error
        return msg_id

    def until(self, test: Callable[[], bool], seconds: float = 60) -> bool:
        """Keep reading until ``test()`` holds (a bounded wait); whether it did."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if test():
                return True
            self.pump(0.2)
        return test()

    # -- what the user sees -------------------------------------------------------------
    def under(self, cell: str) -> str:
        """Everything shown under one cell: its streams and the displays it made, now."""
        text = "".join(t for _, t in self.streams.get(cell, []))
        for display_id, owner in self.owner.items():
            if owner == cell:
                text += self.display[display_id] + "\n"
        return text

    def outputs(self, code: str, timeout: float = 300) -> tuple[str, str]:
        """Run a cell; ``(stdout, stderr)`` as shown under it, its displays and value in stdout."""
        cell = self.run(code, timeout)
        shown = "".join(self.display[d] + "\n" for d, owner in self.owner.items() if owner == cell)
        return self.stream(cell) + shown, self.stream(cell, "stderr")

    def value(self, code: str) -> str:
        """What a cell shows as its result (its last expression), stripped."""
        return self.outputs(code)[0].strip()

    def stream(self, cell: str, name: str = "stdout") -> str:
        return "".join(t for n, t in self.streams.get(cell, []) if n == name)


@contextlib.contextmanager
def kernel_for(address: str, **env: str) -> Iterator[Kernel]:
    """A plain Python 3 kernel joined to the Ray cluster at ``address``, ``eugo`` imported."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env={**os.environ, "EUGO_CLUSTER_ADDRESS": address, **env})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        kernel = Kernel(client)
        kernel.run("import eugo_jupyter as eugo\n%load_ext eugo_jupyter\n")
        yield kernel
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)
