"""A post-mortem on a worker's frames from a real kernel: ``%debug`` in the cell after a failed
map, and ``eugo.hpc.debug`` on a collected failure, show the worker's frames and values.

The debugger reads its commands through ``input()``; each cell feeds it a fixed list the way
a user would type them (``where``, ``list``, ``p name``, ``q``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ._kernel import Kernel, kernel_for

FEED = """
import builtins
_commands = iter({commands!r})
builtins.input = lambda prompt="": next(_commands)
"""


@pytest.fixture(scope="module")
def kernel(ray_local: Any) -> Iterator[Kernel]:
    with kernel_for(ray_local.address) as ran:  # join this module's Ray
        ran.run(
            """
            def parse(x):
                tile_name = f"tile-{x:03d}"
                header = {"x": x, "bands": 4}
                if x == 7:
                    raise ValueError(f"corrupt header in {tile_name}")
                return x
            """
        )
        yield ran


def test_percent_debug_after_a_failed_map_opens_on_the_workers_frames(kernel: Kernel) -> None:
    with pytest.raises(AssertionError, match="corrupt header in tile-007"):
        kernel.run("eugo.hpc.map(parse, range(20))")  # the cell fails, as the user sees it
    out, _ = kernel.outputs(
        FEED.format(commands=["where", "list", "p tile_name", "p header", "q"])
        + "get_ipython().run_line_magic('debug', '')\n"
    )
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # the debugger's colours
    assert "'tile-007'" in out  # p tile_name: the worker's value
    assert "{'x': 7, 'bands': 4}" in out  # p header
    assert "parse" in out  # where: the worker's function
    assert 'raise ValueError(f"corrupt header in {tile_name}")' in out  # list: its source


def test_debug_opens_on_a_collected_failure(kernel: Kernel) -> None:
    kernel.run("out = eugo.hpc.map(parse, range(20), errors='collect')")
    assert kernel.value("out.failures[0].index") == "7"
    out, _ = kernel.outputs(
        FEED.format(commands=["p x", "p tile_name", "q"]) + "eugo.hpc.debug(out.failures[0])\n"
    )
    assert "'tile-007'" in out and "\n7\n" in out


def test_debug_opens_on_a_failed_calls_future(kernel: Kernel) -> None:
    kernel.run(
        """
        @eugo.hpc.distribute
        def read_scene(x):
            scene_id = f"S2-{x}"
            raise OSError(f"scene {scene_id} unreadable")
        fut = read_scene(5)
        """
    )
    out, _ = kernel.outputs(FEED.format(commands=["p scene_id", "q"]) + "eugo.hpc.debug(fut)\n")
    assert "'S2-5'" in out


def test_percent_debug_after_a_failed_get_opens_on_the_workers_frames(kernel: Kernel) -> None:
    with pytest.raises(AssertionError, match="unreadable"):
        kernel.run("eugo.hpc.get(read_scene(8))")
    out, _ = kernel.outputs(
        FEED.format(commands=["p scene_id", "q"]) + "get_ipython().run_line_magic('debug', '')\n"
    )
    assert "'S2-8'" in out
