"""A task's prints stay under the cell that made the call, in JupyterLab (issue 22).

What a user does: the first cell starts a task that prints a line every half second and
returns at once; the second cell then waits for the task. JupyterLab drops (or misplaces) stream
messages whose cell has finished; eugo's lines go to an output area the first cell owns, so
every line shows there, live while the second cell runs, none under the second cell, and the
saved notebook holds them as plain text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.conftest import Lab, running_lab

pytestmark = pytest.mark.ui

FIRST = (
    "import time\nimport eugo_jupyter as eugo\n"
    "@eugo.hpc.distribute\ndef ticker(n):\n    for i in range(n):\n"
    "        print('tick', i, flush=True)\n        time.sleep(0.5)\n    return n\n"
    "fut = ticker(8)"
)
SECOND = "done, _ = eugo.hpc.wait([fut])\nprint('second cell done')"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, ray_local: Any) -> Iterator[Lab]:
    """JupyterLab whose kernels join this module's Ray."""
    root = tmp_path_factory.mktemp("lab")
    with running_lab(root, env_extra={"EUGO_CLUSTER_ADDRESS": ray_local.address}) as server:
        yield server


def _notebook(lab: Lab, name: str) -> None:
    cells = [
        {"cell_type": "code", "source": src, "metadata": {}, "outputs": [], "execution_count": None}
        for src in (FIRST, SECOND)
    ]
    content = {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    status, _ = lab.api("PUT", f"api/contents/{name}", {"type": "notebook", "content": content})
    assert status in (200, 201)


def test_lines_printed_while_the_next_cell_runs_show_under_the_calling_cell(
    page: Any, lab: Lab, artifacts: Path
) -> None:
    _notebook(lab, "ticks.ipynb")
    page.goto(f"{lab.url}lab/tree/ticks.ipynb?token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-CodeCell")
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=180_000)
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('Idle')", timeout=180_000)
    cells.nth(0).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # runs the first cell, selects the second
    cells.nth(0).locator(".jp-InputPrompt:has-text('[1]')").wait_for(timeout=180_000)
    cells.nth(1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")

    def output(index: int) -> str:
        return str(cells.nth(index).locator(".jp-Cell-outputArea").inner_text())

    def second_running() -> bool:
        return "[*]" in str(cells.nth(1).locator(".jp-InputPrompt").inner_text())

    seen_live = False
    deadline = time.monotonic() + 240  # bounds a broken run only
    while "second cell done" not in output(1) and time.monotonic() < deadline:
        if second_running() and "tick" in output(0):
            seen_live = True
        page.wait_for_timeout(200)
    # The last line may come after the second cell's wait returned: read on, bounded.
    while "tick 7" not in output(0) and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    page.screenshot(path=str(artifacts / "call-output-two-cells.png"))
    first = output(0)
    assert all(f"[ticker] tick {i}" in first for i in range(8)), first
    assert seen_live, "no line of the first cell's task showed while the second cell ran"
    assert "tick" not in output(1) and "second cell done" in output(1)

    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 60
    saved: dict[str, Any] = {}
    while time.monotonic() < deadline:
        _, model = lab.api("GET", "api/contents/ticks.ipynb")
        saved = model["content"]
        if "tick 7" in json.dumps(saved["cells"][0]["outputs"]):
            break
        page.wait_for_timeout(300)
    text = json.dumps(saved["cells"][0]["outputs"])
    assert "[ticker] tick 7" in text and "\\u001b" not in text
    assert "tick" not in json.dumps(saved["cells"][1]["outputs"])
