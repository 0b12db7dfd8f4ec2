"""The worker side of a call's printed lines, without a notebook: a missing hub never costs the
call its value or its lines (real Ray)."""

from __future__ import annotations

import os
from typing import Any

from eugo_jupyter import _processes as processes
from eugo_jupyter.hpc._output.wrap import wrap, wrap_class


def _talk(word: str) -> str:
    print("printed", word)
    return word.upper()


def test_a_call_whose_hub_is_missing_still_returns_its_value(ray_local: Any) -> None:
    # What a function exported by a kernel that reconnected (or went away) meets: the hub it
    # names is not on this cluster. Its lines go to Ray's log stream; the value comes back.
    import ray

    remote = ray.remote(wrap(_talk, "eugo-calls-not-on-this-cluster"))
    assert ray.get(remote.remote("kept")) == "KEPT"


class _Native:
    def write(self, text: str) -> tuple[int, int]:
        os.write(1, text.encode() + b"\n")  # as C code does, past sys.stdout
        return _stdout_file()


def _stdout_file() -> tuple[int, int]:
    """The file descriptor 1 writes to, as (device, inode)."""
    info = os.fstat(1)
    return info.st_dev, info.st_ino


def test_without_a_hub_what_c_code_writes_still_reaches_rays_log_file(ray_local: Any) -> None:
    import ray

    actor = ray.remote(wrap_class(_Native, "eugo-calls-not-on-this-cluster")).remote()
    pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))
    log = processes.descriptor(pid, 1)
    assert log is not None
    log_file = (os.stat(log).st_dev, os.stat(log).st_ino)
    during = ray.get(actor.write.remote("straight to the descriptor, no hub"))
    after = ray.get(actor.__ray_call__.remote(lambda self: _stdout_file()))
    assert during != log_file  # while the call ran, descriptor 1 was the call's own file
    assert after == log_file  # and is Ray's log file again once it returned
    with open(log, encoding="utf-8", errors="replace") as f:
        assert "straight to the descriptor, no hub" in f.read()
