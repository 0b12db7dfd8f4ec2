"""Sphinx configuration of the eugo_jupyter docs (built by scripts/docs.sh, warnings as errors).

MyST Markdown for the pages, myst-nb for the example notebooks (rendered with the outputs they
store: nbval already runs them in the test suite, so nothing is executed here), autodoc for the
API reference, and no intersphinx (it would fetch inventories from the network).
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

project = "eugo_jupyter"
author = "the eugo_jupyter authors"
copyright = "the eugo_jupyter authors, Apache-2.0"  # noqa: A001 (Sphinx reads this name)

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
]

# The example notebooks live in examples/ (where nbval runs them); a fresh copy lands in
# docs/examples/ (git-ignored) on every build so the docs render exactly what is committed.
_NOTEBOOKS = HERE / "examples"
shutil.rmtree(_NOTEBOOKS, ignore_errors=True)
_NOTEBOOKS.mkdir()
for notebook in sorted((ROOT / "examples").glob("*.ipynb")):
    shutil.copy2(notebook, _NOTEBOOKS / notebook.name)

nb_execution_mode = "off"
nb_merge_streams = True
# Outputs that carry widget state or an unknown mime type render as text, without a warning.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}
# Ray, NVML and ipywidgets are imported lazily by the package; nothing here starts Ray.

html_theme = "furo"
html_title = "eugo_jupyter"
html_static_path = ["_static"]

# A broken internal reference is an error (with -W); external links are not fetched.
nitpicky = False
