"""Takes docs/_static/live-panes.png, the picture of the live panes in the Manager guide: a real
`jupyter lab` (started as the browser tests start it), a four-CPU local cluster made active
through the REST API, a short run of a few functions (one task fails), and the task stream and
progress panes docked side by side in the system Chromium.

Run from the repository root, after `pip install -e ".[test]"`:

    python scripts/live_screenshot.py

It starts Ray for the cluster (shut down again at the end) and needs `chromium` on PATH or
$EUGO_CHROMIUM. Rerun it when the panes' look changes; commit the PNG. (The browser test
tests/ui/test_live_panes.py saves the same view of its own run as tests/artifacts/live-docked.png.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ui.conftest import CHROMIUM, running_lab  # noqa: E402 (after the path is set)

OUT = ROOT / "docs" / "_static" / "live-panes.png"

RUN = textwrap.dedent(
    """
    import random, sys, time, ray
    ray.init(address=sys.argv[1], logging_level="ERROR")

    @ray.remote(num_cpus=1)
    def load(i):
        time.sleep(random.uniform(0.2, 1.2))
        return i

    @ray.remote(num_cpus=1)
    def transform(i):
        time.sleep(random.uniform(0.5, 2.5))
        return i

    @ray.remote(num_cpus=1, max_retries=0)
    def validate(i):
        time.sleep(0.3)
        if i == 7:
            raise ValueError(f"row {i} has no timestamp")
        return i

    refs = [load.remote(i) for i in range(40)] + [transform.remote(i) for i in range(24)]
    refs += [validate.remote(i) for i in range(12)]
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    """
)


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, running_lab(Path(folder)) as lab:
        status, model = lab.api(
            "POST", "eugo/clusters", {"kind": "local", "name": "dev", "head": {"num_cpus": 4}}
        )
        assert status == 201, (status, model)
        deadline = time.monotonic() + 180
        while model["status"] != "running" and time.monotonic() < deadline:
            time.sleep(1)
            _, model = lab.api("GET", f"eugo/clusters/{model['id']}")
        status, model = lab.api("POST", f"eugo/clusters/{model['id']}/activate")
        assert status == 200, (status, model)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 760})
            page.set_default_timeout(120_000)
            page.goto(f"{lab.url}lab/workspaces/live-screenshot?reset&token={lab.token}")
            page.wait_for_selector("#jp-main-dock-panel", state="visible")
            for label in ("Open Task Stream (EugoHPC)", "Open Progress (EugoHPC)"):
                page.keyboard.press("Control+Shift+C")
                page.locator("#modal-command-palette input").first.fill(label)
                page.locator(".lm-CommandPalette-item", has_text=label).first.click()
            page.locator("#eugo-live-progress .eugo-Live-status").wait_for()
            run = subprocess.Popen(
                [sys.executable, "-c", RUN, model["address"]],
                env={**os.environ, "RAY_AUTH_MODE": "token"},
            )
            time.sleep(6)  # mid-run: some tasks done, some running, some waiting
            page.locator("#jp-main-dock-panel").screenshot(path=str(OUT))
            run.wait(timeout=300)
            browser.close()
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
