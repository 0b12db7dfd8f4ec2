"""A task's prints stay under the cell that made the call, in JupyterLab and Notebook 7 (issue 22).

What a user does: the first cell starts a task that prints a line every half second and
returns at once; the second cell then waits for the task. JupyterLab drops (or misplaces) stream
messages whose cell has finished; eugo's lines go to an output area the first cell owns, so
every line shows there, live while the second cell runs, none under the second cell, and the
saved notebook holds them as plain text. Notebook 7 is built from JupyterLab's parts and served
by the same server (the ``notebook`` package's extension): the same cells run in its page.
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


def _kernel_idle(lab: Lab, name: str) -> bool:
    """The notebook's kernel has started and is idle (asked of the server, whatever page)."""
    _, sessions = lab.api("GET", "api/sessions")
    return any(
        session["path"] == name and session["kernel"]["execution_state"] == "idle"
        for session in sessions or []
    )


def _two_cells(page: Any, lab: Lab, artifacts: Path, name: str, url: str) -> None:
    """Open ``url`` (a page showing notebook ``name``), run both cells as a user does, and
    check what each cell shows, live and once saved."""
    _notebook(lab, name)
    page.goto(f"{lab.url}{url}?token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-CodeCell")
    deadline = time.monotonic() + 180  # bounds a broken start only
    while not _kernel_idle(lab, name) and time.monotonic() < deadline:
        page.wait_for_timeout(300)
    assert _kernel_idle(lab, name), f"the kernel of {name} did not start:\n{lab.log_tail()}"
    cells = page.locator(".jp-Notebook .jp-CodeCell")
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
    page.screenshot(path=str(artifacts / f"call-output-two-cells-{Path(name).stem}.png"))
    first = output(0)
    assert all(f"[ticker] tick {i}" in first for i in range(8)), first
    assert seen_live, "no line of the first cell's task showed while the second cell ran"
    assert "tick" not in output(1) and "second cell done" in output(1)

    page.keyboard.press("Control+s")
    # The saved file as on disk. (Not through GET /api/contents: a GET that meets the save's
    # temporary file "recovers" it and the save fails with a 404, a race of jupyter_server's.)
    # Saves replace the file whole, so a read sees the old one or the new one.
    deadline = time.monotonic() + 60
    saved: dict[str, Any] = {"cells": [{"outputs": []}, {"outputs": []}]}
    while time.monotonic() < deadline:
        try:
            saved = json.loads((lab.notebooks / name).read_text())
        except (OSError, ValueError):
            pass
        if "tick 7" in json.dumps(saved["cells"][0]["outputs"]):
            break
        page.wait_for_timeout(300)
    text = json.dumps(saved["cells"][0]["outputs"])
    assert "[ticker] tick 7" in text and "\\u001b" not in text
    assert "tick" not in json.dumps(saved["cells"][1]["outputs"])


def test_lines_printed_while_the_next_cell_runs_show_under_the_calling_cell(
    page: Any, lab: Lab, artifacts: Path
) -> None:
    _two_cells(page, lab, artifacts, "ticks.ipynb", "lab/tree/ticks.ipynb")


def test_in_notebook_7_too(page: Any, lab: Lab, artifacts: Path) -> None:
    _two_cells(page, lab, artifacts, "ticks-nb7.ipynb", "notebooks/ticks-nb7.ipynb")
    # Notebook 7's own page (it marks its body), not JupyterLab's.
    assert page.locator("body[data-notebook='notebooks']").count() == 1
    assert page.locator("#jp-main-dock-panel").count() == 0
