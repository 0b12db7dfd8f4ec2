"""Tearing the test bed down leaves nothing behind (a module of its own: one bed at a time)."""

from __future__ import annotations

import subprocess

import pytest

from eugo_jupyter import _processes as processes
from tests.testbed import BRIDGE, TestBed, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


def test_teardown_leaves_no_interface_namespace_or_sshd() -> None:
    with TestBed(1) as bed:
        pid = bed.hosts[0].sshd.pid  # type: ignore[union-attr]
    links = subprocess.run(
        ["ip", "-br", "link"], capture_output=True, text=True, check=False
    ).stdout
    assert BRIDGE not in links and "eugotbv" not in links
    assert (
        "eugo-h1"
        not in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, check=False
        ).stdout
    )
    assert processes.start_time(pid) is None  # gone (a zombie counts as gone)
