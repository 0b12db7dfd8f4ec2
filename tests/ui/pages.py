"""How a user drives the Lab page in the browser tests: the sidebar, the launch form, the
shutdown dialog, a notebook and its cells, the theme. Shared by the tests in ``tests/ui/``.
"""

from __future__ import annotations

import re
from typing import Any

SIDEBAR = "#eugo-hpc-manager"
# Launching starts `ray start` processes: allow for a loaded machine.
CLUSTER_TIMEOUT_MS = 300_000


def open_sidebar(page: Any) -> Any:
    tab = page.locator('.jp-SideBar.jp-mod-left [data-id="eugo-hpc-manager"]')
    tab.wait_for(state="visible")
    tab.click()
    panel = page.locator(SIDEBAR)
    panel.wait_for(state="visible")
    return panel


def launch_from_form(panel: Any, name: str) -> Any:
    form = panel.locator(".eugo-LaunchForm")
    form.get_by_label("Cluster name").fill(name)
    form.get_by_label("Head CPUs").fill("1")
    form.get_by_label("Head GPUs").fill("0")
    form.get_by_role("button", name="Add worker node").click()
    form.get_by_label("Worker 1 CPUs").fill("1")
    form.get_by_label("Worker 1 GPUs").fill("0")
    form.get_by_role("button", name="Launch", exact=True).click()
    card = panel.locator(f'.eugo-Card[aria-label="Cluster {name}"]')
    card.wait_for(state="visible")
    return card


def kind_form(panel: Any, label: str, kind: str, fields: dict[str, str]) -> Any:
    """Pick ``label`` in the form's kind switch and fill ``fields`` (label -> text)."""
    panel.locator(".eugo-KindSwitch-option", has_text=label).click()
    form = panel.locator(f'.eugo-BatchForm[data-kind="{kind}"]')
    form.wait_for(state="visible")
    fill(form, fields)
    return form


def fill(form: Any, fields: dict[str, str]) -> None:
    """Type each text into the field of that label."""
    for name, text in fields.items():
        form.get_by_label(name, exact=True).fill(text)


def preview(form: Any, script: str) -> tuple[str, str]:
    """Press Preview: the text of the previewed ``script`` (as submitted), and the summary."""
    form.get_by_role("button", name="Preview").click()
    shown = form.locator(f'.eugo-Plan-text[data-script="{script}"]')
    shown.wait_for(state="attached")
    return str(shown.text_content()), str(form.locator(".eugo-Plan-summary").inner_text())


def launch_until_running(page: Any, panel: Any, form: Any, name: str, tag: str) -> Any:
    """Press Launch; the new card (tagged ``tag``) once it says running."""
    form.get_by_role("button", name="Launch", exact=True).click()
    card = panel.locator(f'.eugo-Card[aria-label="Cluster {name}"]')
    card.wait_for()
    assert card.locator(".eugo-Tag").first.inner_text() == tag
    page.wait_for_selector(
        f'{SIDEBAR} .eugo-Card[aria-label="Cluster {name}"][data-status="running"]',
        timeout=CLUSTER_TIMEOUT_MS,
    )
    return card


def shut_down_through_dialog(page: Any, card: Any, says: str) -> None:
    """Shut the card's cluster down as a user does: the button, a dialog that ``says`` what will
    happen, accept; returns once the card is gone."""
    card.get_by_role("button", name="Shut down").click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(state="visible")
    assert says in dialog.inner_text()
    dialog.locator(".jp-mod-accept").click()
    card.wait_for(state="detached", timeout=CLUSTER_TIMEOUT_MS)


def shut_down_leaving_nothing(page: Any, lab: Any, card: Any, says: str) -> None:
    """:func:`shut_down_through_dialog`; then the Manager lists no cluster and the page logged
    no error of ours."""
    shut_down_through_dialog(page, card, says)
    _, clusters = lab.api("GET", "eugo/clusters")
    assert clusters == []
    assert not [e for e in page.console_errors if "eugo" in e.lower()], page.console_errors


def new_notebook(page: Any) -> None:
    """A notebook with the default Python kernel, from the Launcher's Notebook card."""
    page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    page.locator(".jp-NotebookPanel:visible .jp-CodeCell").first.wait_for()
    # Shift+Enter while the kernel is "Initializing" runs nothing: wait for the status bar to
    # say it is idle (the toolbar's indicator already reads idle before the kernel connects).
    page.locator("#jp-main-statusbar").get_by_text(re.compile(r"\| Idle$")).wait_for(
        timeout=CLUSTER_TIMEOUT_MS
    )


def run_new_cell(page: Any, source: str) -> Any:
    """Type ``source`` into the notebook's last cell, run it, return the cell."""
    cells = page.locator(".jp-NotebookPanel:visible .jp-CodeCell")
    # Pin the index: running the last cell adds a new one, and `.last` would follow it.
    cell = cells.nth(cells.count() - 1)
    cell.locator(".cm-content").click()
    # insert_text puts the whole source in at once, so the editor's auto-indent stays out of it.
    page.keyboard.insert_text(source)
    # CodeMirror moves typed DOM text into its document on a later frame; a Shift+Enter that
    # came first would run the still-empty cell. Wait for the text, then for two frames.
    last_line = source.strip().splitlines()[-1]
    cell.locator(".cm-line", has_text=last_line).wait_for()
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.keyboard.press("Shift+Enter")
    cell.locator(".jp-InputPrompt", has_text=re.compile(r"\[[*0-9]+\]")).wait_for()
    return cell


def switch_theme(page: Any, theme: str) -> None:
    before = page.evaluate(
        "getComputedStyle(document.body).getPropertyValue('--jp-layout-color1').trim()"
    )
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(theme)}$")).click()
    page.wait_for_selector(f'body[data-jp-theme-name="{theme}"]', state="attached")
    # The theme's stylesheet loads after the attribute flips: wait until its variables apply.
    page.wait_for_function(
        "(before) => getComputedStyle(document.body).getPropertyValue('--jp-layout-color1')"
        ".trim() !== before",
        arg=before,
    )
    page.locator("#jupyterlab-splash").wait_for(state="detached")  # the theme-change splash
