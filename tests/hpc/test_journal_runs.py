"""Journaled runs on real Ray: a rerun does only what is left, a killed kernel loses only what
was in flight, a changed function starts over and says so."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import JournalWarning, MapItemError
from eugo_jupyter.hpc import Failed

from ._kernel import kernel_for


def _logged(log: str) -> Any:
    """A function that records each call (the items really run) in a file, one line each."""

    def square(x: int) -> int:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{x}\n".encode())
        finally:
            os.close(fd)
        if x in (7, 13):
            raise ValueError(f"corrupt tile {x}")
        return x * x

    return square


def _runs(log: Path) -> Counter[int]:
    return Counter(int(line) for line in log.read_text().split()) if log.exists() else Counter()


@pytest.fixture(scope="module")
def ray(ray_local: Any) -> Iterator[Any]:
    yield ray_local


def test_a_rerun_submits_only_what_has_no_result(ray: Any, tmp_path: Path) -> None:
    log, journal = tmp_path / "calls.log", tmp_path / "runs" / "squares"
    fn = _logged(str(log))
    first = eugo.hpc.map(fn, range(40), journal=journal, errors="collect", batch_size=4)
    assert [type(v) for v in first].count(Failed) == 2
    assert sum(_runs(log).values()) == 40
    again = eugo.hpc.map(fn, range(40), journal=journal, errors="collect", batch_size=4)
    assert sum(_runs(log).values()) == 40  # nothing ran: stored results and stored failures
    assert [v for v in again if not isinstance(v, Failed)] == [
        x * x for x in range(40) if x not in (7, 13)
    ]
    assert [(f.index, f.kind) for f in again.failures] == [(7, "ValueError"), (13, "ValueError")]
    assert "corrupt tile 7" in again.failures[0].traceback
    held = eugo.hpc.journal(journal)
    assert (held.done, held.failed) == (38, 2)


def test_after_a_fix_rerun_failed_runs_only_the_failed_items(ray: Any, tmp_path: Path) -> None:
    log, journal = tmp_path / "calls.log", tmp_path / "j"
    eugo.hpc.map(_logged(str(log)), range(20), journal=journal, errors="collect")
    log.unlink()

    fixed_log = str(tmp_path / "fixed.log")

    def fixed(x: int) -> int:
        with open(fixed_log, "a") as out:
            out.write(f"{x}\n")
        return x * x

    with pytest.warns(JournalWarning, match=r"changed since the journal .* keeps the 18 finished"):
        out = eugo.hpc.map(fixed, range(20), journal=journal, errors="collect", rerun_failed=True)
    assert out == [x * x for x in range(20)]
    assert sorted(_runs(Path(fixed_log))) == [7, 13]
    assert (eugo.hpc.journal(journal).done, eugo.hpc.journal(journal).failed) == (20, 0)


def test_a_changed_function_starts_a_new_generation_and_says_so(ray: Any, tmp_path: Path) -> None:
    journal = tmp_path / "j"
    assert eugo.hpc.map(lambda x: x + 1, range(10), journal=journal) == list(range(1, 11))
    with pytest.warns(JournalWarning, match=r"starts generation 2 and reuses none"):
        assert eugo.hpc.map(lambda x: x + 2, range(10), journal=journal) == list(range(2, 12))
    assert [g["id"] for g in eugo.hpc.journal(journal).generations] == [1, 2]


def test_errors_raise_journals_what_finished_and_the_partial_is_by_input_index(
    ray: Any, tmp_path: Path
) -> None:
    log, journal = tmp_path / "calls.log", tmp_path / "j"
    fn = _logged(str(log))
    with pytest.raises(MapItemError) as caught:
        eugo.hpc.map(fn, range(20), journal=journal, batch_size=1)
    assert caught.value.index == 7
    assert all(caught.value.partial[i] == i * i for i in caught.value.partial)
    held = eugo.hpc.journal(journal)
    done_before = held.done
    # What finished before the failure is journaled (exactly the partial), and the failure.
    assert done_before == len(caught.value.partial) >= 1 and held.failed == 1
    runs_before = sum(_runs(log).values())
    with pytest.raises(MapItemError) as again:  # the stored failure answers at once
        eugo.hpc.map(fn, range(20), journal=journal, batch_size=1)
    assert again.value.index == 7
    # Only the items with neither a result nor a failure ran again.
    assert sum(_runs(log).values()) - runs_before <= 20 - done_before - 1


def test_the_run_report_says_the_run_resumed(ray: Any, tmp_path: Path) -> None:
    journal = tmp_path / "j"
    eugo.hpc.map(abs, range(-10, 0), journal=journal)
    with eugo.hpc.profile() as run:
        eugo.hpc.map(abs, range(-30, 0), journal=journal)
    report = run.report()
    line = f"abs: 10 items from the journal {journal}, 20 ran"
    assert report.resumed == [line]
    assert f"Resumed from a journal:\n  {line}" in repr(report)
    assert "<h4>Resumed from a journal</h4>" in report._repr_html_()


def test_imap_with_a_journal_yields_stored_and_new_results(ray: Any, tmp_path: Path) -> None:
    journal = tmp_path / "j"
    paths = [f"tile_{i:03d}.tif" for i in range(30)]
    eugo.hpc.map(len, paths[:10], journal=journal, key=lambda p: p)
    ordered = list(eugo.hpc.imap(len, paths, journal=journal, key=lambda p: p))
    assert ordered == [len(p) for p in paths]
    unordered = dict(eugo.hpc.imap(len, paths, ordered=False, journal=journal, key=str))
    assert unordered == {i: len(p) for i, p in enumerate(paths)}
    assert eugo.hpc.journal(journal).done == 30


def test_bad_journal_keywords_name_the_fix(ray: Any, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"key= takes a function of the item"):
        eugo.hpc.map(len, ["a"], journal=tmp_path / "j", key="path")
    with pytest.raises(TypeError, match=r"key= and rerun_failed= need journal="):
        eugo.hpc.map(len, ["a"], key=len)


def test_a_kernel_killed_mid_run_loses_only_what_was_in_flight(ray: Any, tmp_path: Path) -> None:
    """A real kernel (jupyter_client) is killed with SIGKILL halfway through a journaled map;
    a fresh kernel runs the same cell: every item ran once, plus at most those in flight."""
    log, journal = tmp_path / "calls.log", tmp_path / "j"
    cell = textwrap.dedent(
        f"""
        import os, time
        def resample(x):
            time.sleep(0.02)
            fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"{{x}}\\n".encode()); os.close(fd)
            return x * 3
        out = eugo.hpc.map(resample, range(400), journal={str(journal)!r}, batch_size=5)
        """
    )
    address = eugo.hpc.cluster().address
    with kernel_for(address) as kernel:
        pid = int(kernel.value("import os; os.getpid()"))
        kernel.client.execute(cell)
        deadline = time.monotonic() + 240
        while sum(_runs(log).values()) < 150 and time.monotonic() < deadline:
            kernel.pump(0.2)
        assert sum(_runs(log).values()) >= 150, "the first run did not get going"
        os.kill(pid, signal.SIGKILL)
    ran_first = _runs(log)
    stored = eugo.hpc.journal(journal).done
    assert 0 < stored < 400
    with kernel_for(address) as kernel:
        kernel.run(cell)
        assert kernel.value("out == [x * 3 for x in range(400)]") == "True"
    total = _runs(log)
    assert set(total) == set(range(400))
    twice = sum(total.values()) - 400
    # Only items not yet written at the kill ran twice: those it had started, not more.
    assert twice <= sum(ran_first.values()) - stored


def _kernel_pid(kernel: Any) -> int:
    out = kernel.value("import os; os.getpid()")
    return int(out)
