"""The docs stay in step with the code: every finding kind the run report can emit has its
anchor in the run-report guide (the report and the panel link there), every `finding(...)` call
names a registered kind, and the README's links resolve. Pure: parses files, runs no Sphinx."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from eugo_jupyter.hpc._insights import KINDS, doc_url
from eugo_jupyter.hpc._insights._base import finding

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN_REPORT = DOCS / "guides" / "run-report.md"
# The public sites the README may link to; anything else absolute is a mistake.
PUBLIC_HOSTS = {
    "eugo-jupyter.readthedocs.io",
    "docs.ray.io",
    "jupyterlab.readthedocs.io",
    "pandas.pydata.org",
    "numba.readthedocs.io",
    "university.eugo.io",
}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _labels(page: Path) -> set[str]:
    """MyST targets, ``(name)=``, and the GitHub-style slugs of the page's headings."""
    text = page.read_text()
    labels = set(re.findall(r"^\(([\w-]+)\)=\s*$", text, re.M))
    for heading in re.findall(r"^#{1,6} (.+)$", _outside_fences(text), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-")
        labels.add(slug)
    return labels


def _outside_fences(text: str) -> str:
    kept, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            kept.append(line)
    return "\n".join(kept)


def test_every_finding_kind_has_its_anchor_in_the_run_report_guide() -> None:
    labels = _labels(RUN_REPORT)
    missing = [kind for kind in KINDS if f"finding-{kind}" not in labels]
    assert not missing, f"add a `(finding-<kind>)=` section to {RUN_REPORT.name} for {missing}"


def test_every_finding_call_names_a_registered_kind() -> None:
    used: dict[str, str] = {}
    for source in (ROOT / "eugo_jupyter").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "finding"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                used[node.args[0].value] = str(source.relative_to(ROOT))
    assert used, "no finding(...) call found: has the helper been renamed?"
    unknown = {kind: where for kind, where in used.items() if kind not in KINDS}
    assert not unknown, f"kinds missing from KINDS (and from the docs): {unknown}"


def test_finding_refuses_an_unknown_kind() -> None:
    assert finding("straggler", "f", "m", "x")["kind"] == "straggler"
    with pytest.raises(ValueError, match="unknown finding kind"):
        finding("not_a_kind", "f", "m", "x")


def test_a_finding_links_to_its_anchor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EUGO_DOCS_URL", raising=False)
    assert doc_url("long_tail").endswith("/guides/run-report.html#finding-long-tail")
    monkeypatch.setenv("EUGO_DOCS_URL", "http://127.0.0.1:8000/")
    assert doc_url("tiny_tasks") == (
        "http://127.0.0.1:8000/guides/run-report.html#finding-tiny-tasks"
    )


def _readme_links() -> list[str]:
    return LINK.findall(_outside_fences((ROOT / "README.md").read_text()))


def test_the_readme_links_resolve() -> None:
    links = _readme_links()
    assert len(links) >= 10, "the front page links to the docs"
    broken = []
    for target in links:
        parts = urlsplit(target)
        if parts.scheme:
            if parts.scheme != "https" or parts.hostname not in PUBLIC_HOSTS:
                broken.append(f"{target}: not a known public site")
            continue
        path = ROOT / parts.path if parts.path else ROOT / "README.md"
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif parts.fragment and path.suffix == ".md" and parts.fragment not in _labels(path):
            broken.append(f"{target}: no anchor #{parts.fragment} in {parts.path}")
    assert not broken, "\n".join(broken)


def test_every_guide_is_in_the_docs_index() -> None:
    index = (DOCS / "index.md").read_text()
    missing = [p.stem for p in (DOCS / "guides").glob("*.md") if f"guides/{p.stem}" not in index]
    assert not missing, missing


def test_the_panel_links_findings_to_the_same_docs() -> None:
    from eugo_jupyter.hpc._insights._base import DOCS_URL

    panel = (ROOT / "labextension" / "src" / "panel" / "findings.tsx").read_text()
    assert f"export const DOCS_URL = '{DOCS_URL}';" in panel
    assert "guides/run-report.html#finding-" in panel


def test_the_report_links_its_findings_in_html_and_names_the_page_in_text() -> None:
    from eugo_jupyter.hpc._insights import analyze
    from eugo_jupyter.hpc._profile.report import Report

    model: Any = {"duration": 1.0, "cluster": {}, "memory": {}, "tasks": [], "gets": []}
    analysis = analyze(model)
    analysis["findings"] = [finding("tiny_tasks", "f", "Each call took 1 ms.", "Batch them.")]
    report = Report(model, analysis)
    assert f"href='{doc_url('tiny_tasks')}'" in report._repr_html_()
    assert repr(report).endswith(
        "What each [kind] means, at more length: " + doc_url("tiny_tasks").split("#")[0]
    )
