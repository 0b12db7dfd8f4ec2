"""Runs at scale on a real 2-CPU Ray: imap streaming, errors kept or raised with what finished,
retries, per-item timeouts, and the worker's frames for a post-mortem."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import ItemTimeout, MapItemError, OptionsError
from eugo_jupyter.hpc._debug import remote_exception

# Workers cannot import this test module: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def square(x: int) -> int:
    return x * x


def fails_on_multiples_of_37(x: int) -> int:
    tile = {"x": x, "name": f"tile-{x}"}
    if x % 37 == 0 and x:
        raise ValueError(f"corrupt tile {tile['name']}")
    return x


def fixed(x: int) -> int:
    return -x


def flaky(item: tuple[str, int]) -> int:
    """Fails the first time it sees an item (a marker file says it has), then succeeds."""
    folder, x = item
    marker = Path(folder) / f"{x}.seen"
    if not marker.exists():
        marker.write_text("1")
        raise OSError(f"transient failure on {x}")
    with open(Path(folder) / "returned.log", "a") as log:
        log.write(f"{x}\n")
    return x * 10


def hangs_on(x: int) -> int:
    if x in (5, 17, 29):
        time.sleep(600)
    return x


def hangs_deaf_on(x: int) -> int:
    # Blocks the timer's signal first: code that never lets the interruption in, so the
    # worker itself has to be ended and replaced.
    if x == 3:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(600)
    return os.getpid() * 0 + x


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_local):  # type: ignore[no-untyped-def]
    eugo.hpc.map(square, range(4), batch_size=1)  # start both workers before any test
    yield


def test_imap_yields_in_order_and_unordered_gives_indices() -> None:
    assert list(eugo.hpc.imap(square, range(3000))) == [x * x for x in range(3000)]
    pairs = list(eugo.hpc.imap(square, range(500), ordered=False, batch_size=7))
    assert sorted(pairs) == [(x, x * x) for x in range(500)]  # each once, none twice


def test_imap_reads_the_input_only_a_bounded_way_ahead() -> None:
    pulled = 0

    def endless():  # type: ignore[no-untyped-def]
        nonlocal pulled
        x = 0
        while True:
            pulled += 1
            yield x
            x += 1

    ahead = []
    stream = eugo.hpc.imap(square, endless(), batch_size=1)
    for seen, value in enumerate(stream, 1):
        assert value == (seen - 1) ** 2
        ahead.append(pulled - seen)
        if seen == 300:
            break
    stream.close()
    # A 2-slot cluster keeps 6 batches in flight and a slice of input ready: never the
    # whole (endless) input, and as far ahead at the end as at the start.
    assert max(ahead) <= 20, ahead


def test_raise_keeps_what_finished_in_partial() -> None:
    with pytest.raises(MapItemError) as info:
        eugo.hpc.map(fails_on_multiples_of_37, range(100), batch_size=10)
    error = info.value
    assert error.index == 37
    assert all(error.partial[i] == i for i in range(37))  # every item before it finished
    assert 37 not in error.partial
    assert isinstance(error.__cause__, ValueError)


def slow_first_batch_fails_on_37(x: int) -> int:
    if x == 5:
        time.sleep(1.5)  # the first batch is still running when item 37 fails
    return fails_on_multiples_of_37(x)


def slow_item_5_fails_too(x: int) -> int:
    if x == 5:
        time.sleep(1.5)
        raise KeyError("item 5 failed, later than item 37 did")
    return fails_on_multiples_of_37(x)


def test_raise_waits_for_the_batches_before_the_failure() -> None:
    # Batch 0 (items 0-9) runs on one worker while the other gets to item 37 and fails: the
    # error still holds items 0-9, as a loop over the items would have.
    with pytest.raises(MapItemError) as info:
        eugo.hpc.map(slow_first_batch_fails_on_37, range(100), batch_size=10)
    assert info.value.index == 37
    assert {i: info.value.partial[i] for i in range(37)} == {i: i for i in range(37)}
    # An earlier item that fails later is still the first failure in input order.
    with pytest.raises(MapItemError) as info:
        eugo.hpc.map(slow_item_5_fails_too, range(100), batch_size=10)
    assert info.value.index == 5 and isinstance(info.value.__cause__, KeyError)
    assert all(info.value.partial[i] == i for i in range(5))
    assert all(info.value.partial[i] == i for i in range(30, 37))  # what finished after it


def test_collect_goes_on_and_keeps_each_failure_in_its_slot() -> None:
    out = eugo.hpc.map(fails_on_multiples_of_37, range(200), errors="collect")
    assert isinstance(out, eugo.hpc.MapResults) and isinstance(out, list)
    bad = [37, 74, 111, 148, 185]
    for i, value in enumerate(out):
        if i in bad:
            assert isinstance(value, eugo.hpc.Failed)
            assert value.index == i and value.item == repr(i)
            assert isinstance(value.error, ValueError) and f"tile-{i}" in str(value.error)
            assert "raise ValueError" in value.traceback
            assert value.node and value.attempts == 1
        else:
            assert value == i
    assert [f.index for f in out.failures] == bad
    frame = out.failures.to_frame()
    assert list(frame["index"]) == bad and list(frame.columns[:3]) == ["index", "item", "error"]
    assert "tile-74" in out.failures._repr_html_()
    # Rerun only the failed items with a fixed function: the slots are filled in.
    again = out.rerun(fixed)
    assert again is out and out == [(-i if i in bad else i) for i in range(200)]
    assert out.failures == []


def test_rerun_without_a_fix_keeps_the_failures() -> None:
    out = eugo.hpc.map(fails_on_multiples_of_37, range(80), errors="collect")
    out.rerun()
    assert [f.index for f in out.failures] == [37, 74]


def test_imap_yields_the_failed_value_in_place() -> None:
    got = list(eugo.hpc.imap(fails_on_multiples_of_37, range(50), errors="collect"))
    assert isinstance(got[37], eugo.hpc.Failed) and got[:37] == list(range(37))


def test_retries_use_each_result_once(tmp_path: Path) -> None:
    items = [(str(tmp_path), x) for x in range(40)]
    out = eugo.hpc.map(flaky, items, retries=1, batch_size=5)
    assert out == [x * 10 for x in range(40)]
    returned = (tmp_path / "returned.log").read_text().split()
    assert sorted(map(int, returned)) == list(range(40))  # each item returned once
    # Without retries the same transient failure counts.
    for marker in tmp_path.glob("*.seen"):
        marker.unlink()
    out = eugo.hpc.map(flaky, items, errors="collect", batch_size=5)
    assert len(out.failures) == 40 and out.failures[0].attempts == 1


def test_a_hung_item_times_out_and_the_run_goes_on() -> None:
    out = eugo.hpc.map(hangs_on, range(40), timeout=1, errors="collect", batch_size=4)
    assert [f.index for f in out.failures] == [5, 17, 29]
    for failed in out.failures:
        assert isinstance(failed.error, ItemTimeout) and failed.error.index == failed.index
        assert f"item #{failed.index}" in str(failed.error)
    assert [v for v in out if not isinstance(v, eugo.hpc.Failed)] == [
        x for x in range(40) if x not in (5, 17, 29)
    ]


def test_an_item_that_does_not_interrupt_gets_its_worker_replaced() -> None:
    out = eugo.hpc.map(hangs_deaf_on, range(12), timeout=1, errors="collect", batch_size=4)
    assert [f.index for f in out.failures] == [3]
    assert isinstance(out[3].error, ItemTimeout)
    assert [v for i, v in enumerate(out) if i != 3] == [x for x in range(12) if x != 3]
    # And the cluster works on.
    assert eugo.hpc.map(square, range(10)) == [x * x for x in range(10)]


def test_a_failed_item_keeps_the_raising_frames_locals() -> None:
    out = eugo.hpc.map(fails_on_multiples_of_37, range(40), errors="collect")
    error = remote_exception(out.failures[0])
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    assert tb is not None
    assert tb.tb_frame.f_code.co_name == "fails_on_multiples_of_37"
    assert tb.tb_frame.f_locals["tile"] == {"x": 37, "name": "tile-37"}
    assert tb.tb_frame.f_locals["x"] == 37


def test_bad_policy_keywords_name_the_fix() -> None:
    with pytest.raises(OptionsError, match="errors="):
        eugo.hpc.map(square, range(3), errors="ignore")
    with pytest.raises(OptionsError, match="retries="):
        eugo.hpc.map(square, range(3), retries=-1)
    with pytest.raises(OptionsError, match="timeout="):
        eugo.hpc.imap(square, range(3), timeout=0)


def straggles_once(item: tuple[str, int]) -> tuple[int, str]:
    """Item 30's first run straggles until its copy has finished; every other run is quick."""
    folder, x = item
    time.sleep(0.02)
    if x != 30:
        return x, "only"
    first = Path(folder) / "first-started"
    if first.exists():
        (Path(folder) / "copy-done").write_text("1")
        return x, "copy"
    first.write_text("1")
    deadline = time.monotonic() + 120
    while not (Path(folder) / "copy-done").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return x, "first"


def test_backups_copy_a_straggler_and_use_the_first_result_once(tmp_path: Path) -> None:
    items = [(str(tmp_path), x) for x in range(40)]
    out = eugo.hpc.map(straggles_once, items, batch_size=1, backups=True)
    assert [x for x, _ in out] == list(range(40))  # each once, in order
    assert out[30] == (30, "copy")  # the copy's result won; the first was let go


def test_without_backups_the_straggler_is_waited_for(tmp_path: Path) -> None:
    items = [(str(tmp_path), x) for x in range(12)] + [(str(tmp_path), 30)]
    (tmp_path / "copy-done").write_text("1")  # no copy will come: let the first run end
    out = eugo.hpc.map(straggles_once, items, batch_size=1)
    assert out[-1] == (30, "first")


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_the_run_report_says_when_backups_would_have_paid() -> None:
    with eugo.hpc.profile() as run:
        eugo.hpc.map(nap, [0.05] * 20 + [2.0], batch_size=1)
    (finding,) = [f for f in run.report().findings if f["kind"] == "straggler"]
    assert finding["function"] == "map(nap)"
    assert "backups=True" in finding["fix"] and "sooner" in finding["fix"]
