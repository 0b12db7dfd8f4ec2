"""When a cluster's task counts are read again (:class:`CountsPace`), on a clock the test moves.

Pure: the pace decides from what each probe saw; the real reads are in ``test_observer.py``.
"""

from __future__ import annotations

from eugo_jupyter.server.pacing import CountsPace


def _reads(pace: CountsPace, probes: list[tuple[float, bool, str, bool]]) -> list[float]:
    """Times at which count reads start, given probes (time, moving, mark, unsettled)."""
    started = []
    for now, moving, mark, unsettled in probes:
        wait = pace.due(now, moving=moving, mark=mark, unsettled=unsettled)
        if wait is not None:
            pace.began(now + wait, moving=moving)
            started.append(round(now + wait, 2))
    return started


def test_a_cluster_at_rest_is_counted_once_a_minute_not_at_every_probe() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    probes = [(t / 2, False, "m", False) for t in range(0, 250)]  # two minutes, every 0.5 s
    assert _reads(pace, probes) == [0.0, 60.0, 120.0]


def test_work_is_counted_every_busy_period_and_once_more_just_after_it_stops() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    busy = [(t / 2, True, f"m{t}", True) for t in range(0, 12)]  # 0 .. 5.5 s: work moves
    quiet = [(6.0 + t / 2, False, "m11", False) for t in range(0, 10)]
    assert _reads(pace, busy + quiet) == [0.0, 2.0, 4.0, 6.3]


def test_a_run_shorter_than_the_busy_period_gets_only_its_final_count() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    rest = [(t / 2, False, "a", False) for t in range(0, 10)]  # 0 .. 4.5 s
    run = [(5.0, True, "b", True), (5.5, True, "b", True)]  # a run of a second
    after = [(6.0 + t / 2, False, "b", False) for t in range(0, 4)]
    # (counted from the start of the run, the busy period is not over when it ends)
    assert _reads(pace, rest + run + after) == [0.0, 6.3]


def test_slow_count_reads_are_spaced_to_keep_the_head_mostly_free() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    started = []
    for t in range(0, 24):  # work moves for 12 s; each count read takes the GCS 1.5 s
        now = t / 2
        if pace.due(now, moving=True, mark=str(t), unsettled=True) is not None:
            pace.began(now, moving=True)
            pace.took(1.5)
            started.append(now)
    assert started == [0.0, 4.5, 9.0]  # a third of the time at most, not every 2 s


def test_a_run_between_two_probes_still_gets_its_final_count() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    before = [(t / 2, False, "a", False) for t in range(0, 4)]
    after = [(2.0 + t / 2, False, "b", False) for t in range(0, 4)]  # new mark, nothing moving
    assert _reads(pace, before + after) == [0.0, 2.3]


def test_a_final_count_that_still_sees_tasks_in_flight_is_read_once_more() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0, report_every=1.0)
    probes = [(0.0, True, "a", False), (0.5, False, "a", True), (1.0, False, "a", True)]
    probes += [(1.5, False, "a", True), (2.0, False, "a", False), (2.5, False, "a", False)]
    # 0.8: the final read (it saw tasks still running: their last events were not in yet);
    # 1.8: once more, a report interval after it; then at rest.
    assert _reads(pace, probes) == [0.0, 0.8, 1.8]


def test_after_a_pause_in_the_probes_the_counts_are_read_again() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    probes = [(0.0, False, "a", False), (0.5, False, "a", False), (30.0, False, "a", False)]
    assert _reads(pace, probes) == [0.0, 30.3]  # work may have come and gone unseen


def test_a_stop_seen_during_a_count_read_books_the_final_one_for_right_after_it() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    pace.due(0.0, moving=True, mark="a", unsettled=True)
    pace.began(0.0, moving=True)  # a count read of 1.5 s (100,000 records) while work moves
    # The work stops at 0.4; the probes go on during the read and book the final one.
    for now in (0.5, 1.0):
        wait = pace.due(now, moving=False, mark="a", unsettled=True)
        assert wait == 0.3
        pace.defer(now + wait)
    pace.took(1.5)
    assert pace.after(1.5, unsettled=True) == 0.0  # its settle passed during the other read
    pace.began(1.5, moving=False)
    assert pace.final
    pace.took(1.5)
    assert pace.after(3.0, unsettled=False) is None  # the counts are final: at rest now


def test_a_read_booked_for_later_than_the_end_of_the_one_under_way_waits_for_its_time() -> None:
    pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
    pace.due(0.0, moving=True, mark="a", unsettled=True)
    pace.began(0.0, moving=True)
    pace.defer(0.9)
    pace.took(0.5)
    assert pace.after(0.5, unsettled=True) == 0.4
