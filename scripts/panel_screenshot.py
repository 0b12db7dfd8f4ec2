"""Takes docs/_static/panel.png, the picture of the EugoHPC Manager on the front page and in the
docs: a real `jupyter lab` (started as the browser tests start it), a one-CPU local cluster
launched through the REST API, and the system Chromium driven by Playwright.

Run from the repository root, after `pip install -e ".[test]"`:

    python scripts/panel_screenshot.py

It starts Ray for the cluster (shut down again at the end) and needs `chromium` on PATH or
$EUGO_CHROMIUM. Rerun it when the panel's look changes; commit the PNG.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.ui.conftest import CHROMIUM, running_lab  # noqa: E402 (after the path is set)

OUT = ROOT / "docs" / "_static" / "panel.png"


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, running_lab(Path(folder)) as lab:
        status, model = lab.api(
            "POST", "eugo/clusters", {"kind": "local", "name": "dev", "head": {"num_cpus": 1}}
        )
        assert status == 201, (status, model)
        deadline = time.monotonic() + 180
        while model["status"] != "running" and time.monotonic() < deadline:
            time.sleep(1)
            _, model = lab.api("GET", f"eugo/clusters/{model['id']}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(120_000)
            page.goto(f"{lab.url}lab/workspaces/screenshot?reset&token={lab.token}")
            page.wait_for_selector("#jp-main-dock-panel", state="visible")
            page.locator('.jp-SideBar.jp-mod-left [data-id="eugo-hpc-manager"]').click()
            panel = page.locator("#eugo-hpc-manager")
            panel.wait_for(state="visible")
            panel.locator(".eugo-Card").first.wait_for()
            time.sleep(3)  # one more poll: the node table and the bars filled in
            OUT.parent.mkdir(parents=True, exist_ok=True)
            panel.screenshot(path=str(OUT))
            browser.close()
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
