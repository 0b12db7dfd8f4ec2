"""A real IPython shell with the extension loaded, and a helper that runs a cell like a user."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Ran:
    """What the user sees after running a cell."""

    result: Any  # IPython's ExecutionResult
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()  # one shell per process, as in a kernel
    ip.reset(new_session=False)
    ip.run_line_magic("load_ext", "eugo_jupyter")
    if "eugo" not in ip.user_ns:  # loaded by an earlier module: the reset dropped its binding
        import eugo_jupyter

        eugo_jupyter.load_ipython_extension(ip)
    yield ip
    ip.reset(new_session=False)


@pytest.fixture
def run(shell: Any, capsys: pytest.CaptureFixture[str]) -> Any:
    def run_cell(code: str) -> Ran:
        capsys.readouterr()
        result = shell.run_cell(code, store_history=True)
        captured = capsys.readouterr()
        return Ran(result, _ANSI.sub("", captured.out), _ANSI.sub("", captured.err))

    return run_cell
