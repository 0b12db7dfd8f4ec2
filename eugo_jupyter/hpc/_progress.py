"""A progress bar for long waits: a widget in a notebook, text on stderr elsewhere when asked."""

from __future__ import annotations

from typing import Any

__all__ = ["PROGRESS_AFTER", "in_notebook", "make_bar"]

#: A bar appears only once a wait has lasted this long (seconds): get, map.
PROGRESS_AFTER = 2.0


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where a widget bar renders), False in scripts and terminals."""
    import sys

    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def make_bar(total: int, initial: int, description: str) -> Any:
    """A tqdm bar: the notebook widget when in a notebook, else the text bar."""
    if in_notebook():
        try:
            from tqdm.notebook import tqdm as bar_class
        except ImportError:  # ipywidgets missing: fall back to text
            from tqdm import tqdm as bar_class
    else:
        from tqdm import tqdm as bar_class
    return bar_class(total=total, initial=initial, desc=description, unit="task", leave=False)
