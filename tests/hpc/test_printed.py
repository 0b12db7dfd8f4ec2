"""The worker side of a call's printed lines, without a notebook: a missing hub never costs the
call its value (real Ray)."""

from __future__ import annotations

from typing import Any

from eugo_jupyter.hpc._printed import wrap


def _talk(word: str) -> str:
    print("printed", word)
    return word.upper()


def test_a_call_whose_hub_is_missing_still_returns_its_value(ray_local: Any) -> None:
    # What a function exported by a kernel that reconnected (or went away) meets: the hub it
    # names is not on this cluster. Its lines go to Ray's log stream; the value comes back.
    import ray

    remote = ray.remote(wrap(_talk, "eugo-calls-not-on-this-cluster"))
    assert ray.get(remote.remote("kept")) == "KEPT"
