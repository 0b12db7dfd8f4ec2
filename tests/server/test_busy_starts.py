"""Launching on a busy machine: a `ray start` that timed out during startup is tried again, with
a pause and a line for the card each time; when it gives up, the sentence names the load and what
to do; node starts asked at once run a few at a time.

The starts here are real processes: a stand-in `ray` program (a shell script of this test) that
says what Ray says when its raylet misses the 30 s registration window, since making Ray itself
miss it would need a machine overloaded on purpose.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from eugo_jupyter.exceptions import LaunchError
from eugo_jupyter.server.backends import ray_start
from eugo_jupyter.server.backends.ray_start import STARTS_AT_ONCE, retrying, run_ray_start

TIMED_OUT = "Exception: The current node timed out during startup. This could happen because"


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_start, "RETRY_DELAYS", (0.0, 0.0))


def _fake_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    ray = tmp_path / "ray"
    ray.write_text(f"#!/bin/bash\n{body}\n")
    ray.chmod(0o755)
    monkeypatch.setattr(ray_start, "ray_executable", lambda: str(ray))
    return ray


def test_a_start_that_timed_out_is_tried_again_and_each_try_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fails twice the way Ray does on a busy machine, then starts.
    count = tmp_path / "count"
    _fake_ray(tmp_path, monkeypatch, f"echo x >> {count}\n"
              f"[ $(wc -l < {count}) -ge 3 ] && exit 0\necho '{TIMED_OUT}'; exit 1")  # fmt: skip
    said: list[str | None] = []
    cleaned: list[int] = []
    pgid = retrying(lambda: run_ray_start(["--head"], 30), lambda: cleaned.append(1),
                    said.append, "The head")  # fmt: skip
    assert pgid > 0 and len(cleaned) == 2
    assert said[:2] == [
        "The head: `ray start` timed out during startup (a busy machine); try 2 of 3 in 0 s.",
        "The head: `ray start` timed out during startup (a busy machine); try 3 of 3 in 0 s.",
    ]
    assert said[-1] is None  # the card's line goes once the start went on


def test_giving_up_names_the_load_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_ray(tmp_path, monkeypatch, f"echo '{TIMED_OUT}'; exit 1")
    with pytest.raises(LaunchError) as info:
        retrying(lambda: run_ray_start(["--head"], 30), lambda: None, lambda _: None, "The head")
    text = str(info.value)
    assert "The head timed out during startup 3 times: this machine is busy (load " in text
    assert "CPUs). Launch again when it is quieter, with fewer nodes" in text


def test_another_failure_is_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = tmp_path / "count"
    _fake_ray(tmp_path, monkeypatch, f"echo x >> {count}; echo 'Error: bad --num-cpus'; exit 1")
    with pytest.raises(LaunchError, match="bad --num-cpus"):
        retrying(lambda: run_ray_start(["--head"], 30), lambda: None, lambda _: None, "The head")
    assert count.read_text().count("x") == 1


def test_starts_asked_at_once_run_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each start notes when it runs; at most STARTS_AT_ONCE are inside at any moment.
    log = tmp_path / "log"
    _fake_ray(tmp_path, monkeypatch, f"echo in >> {log}; sleep 0.3; echo out >> {log}")
    threads = [threading.Thread(target=run_ray_start, args=(["--head"], 60)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    inside, most = 0, 0
    for line in log.read_text().split():
        inside += 1 if line == "in" else -1
        most = max(most, inside)
    assert log.read_text().split().count("out") == 6
    assert 1 <= most <= STARTS_AT_ONCE  # never all six at once
