"""The task ledger behind the live panes, read after read (pure: the reads are given as data, the
way the GCS's task events come; the real reads are in ``test_live.py``)."""

from __future__ import annotations

from eugo_jupyter._raystate import TaskEvent
from eugo_jupyter.server.live_tasks import Reading, TaskLedger, group_of


def _event(
    n: int, state: str, end: float | None, name: str = "square", func: str = "square"
) -> TaskEvent:
    return TaskEvent(
        task_id=f"{n:04x}", attempt=0, job_id="01000000", name=name, func=func,
        kind="NORMAL_TASK", state=state, node_id="aa", worker_id="bb", worker_pid=100 + n,
        submitted=0.0, start=(end or 100.0) - 0.5, end=end,
        error="User exception:\n\x1b[36mray::square()\x1b[39m\nValueError: boom"
        if state == "FAILED" else None, error_type=None,
    )  # fmt: skip


def test_a_cursor_gives_only_what_changed_and_a_task_comes_again_when_it_ends() -> None:
    ledger = TaskLedger()
    ledger.take_reading(Reading([], [_event(1, "RUNNING", None)], None), now=100.0)
    rows, seq, cut = ledger.rows_since(None, 100, now=100.0)
    assert [(r["task_id"], r["state"]) for r in rows] == [("0001", "RUNNING")] and not cut
    ledger.take_reading(Reading([_event(1, "FINISHED", 101.0)], [], None), now=101.0)
    ledger.take_reading(Reading([_event(1, "FINISHED", 101.0)], [], None), now=102.0)
    rows, seq2, _ = ledger.rows_since(seq, 100, now=102.0)
    assert [(r["task_id"], r["state"], r["end"]) for r in rows] == [("0001", "FINISHED", 101.0)]
    assert ledger.rows_since(seq2, 100, now=102.0)[0] == []


def test_done_counts_each_task_once_across_reads_and_old_ones_leave_the_window() -> None:
    ledger = TaskLedger(keep_s=60.0)
    first = [_event(n, "FINISHED", 10.0 + n) for n in range(5)]
    ledger.take_reading(Reading(first, [_event(9, "FAILED", 12.0)], None), now=20.0)
    # The GCS gives the latest to finish again and again: counted once.
    for now in (21.0, 22.0):
        ledger.take_reading(Reading(first, [_event(9, "FAILED", 12.0)], None), now=now)
    (group,) = ledger.group_models()
    assert (group["label"], group["done"], group["failed"]) == ("square", 5, 1)
    # Long after, they have left the window, and a read that still lists them counts nothing.
    ledger.take_reading(Reading(first, [], None), now=200.0)
    assert ledger.rows == {} and ledger.group_models()[0]["done"] == 5
    (failure,) = ledger._failures([_event(9, "FAILED", 12.0)])
    assert failure["error"] == "ValueError: boom" and "\x1b" not in failure["traceback"]


def test_a_task_that_ends_between_a_reads_queries_is_shown_finished_not_running() -> None:
    # A read asks for the running attempts before the finished ones (the finished last, so the
    # stream is as fresh as it can be): one that ends in between is in both lists.
    ledger = TaskLedger()
    ledger.take_reading(Reading([], [_event(1, "RUNNING", None)], None), now=100.0)
    _, seq, _ = ledger.rows_since(None, 100, now=100.0)
    # The waiting ones are asked for first: one that started since is counted running only.
    waiting = [
        _event(1, "PENDING_NODE_ASSIGNMENT", None),
        _event(2, "PENDING_NODE_ASSIGNMENT", None),
    ]
    both = Reading(
        [_event(1, "FINISHED", 101.0)],
        [_event(1, "RUNNING", None), _event(2, "RUNNING", None)],
        waiting,
    )
    ledger.take_reading(both, now=101.0)
    rows, _, _ = ledger.rows_since(seq, 100, now=101.0)
    assert sorted((r["task_id"], r["state"]) for r in rows) == [
        ("0001", "FINISHED"),
        ("0002", "RUNNING"),
    ]
    (group,) = ledger.group_models()
    assert (group["waiting"], group["running"], group["done"]) == (0, 1, 1)
    assert ledger.pids == {("0002", 0): 102}


def test_the_window_and_a_reply_stay_bounded() -> None:
    ledger = TaskLedger(max_rows=1000)
    many = [_event(n, "FINISHED", 50.0) for n in range(3000)]
    ledger.take_reading(Reading(many, [], None), now=50.0)
    assert len(ledger.rows) == 1000
    rows, seq, cut = ledger.rows_since(None, 200, now=50.0)
    assert len(rows) == 200 and cut
    rows, last, cut = ledger.rows_since(0, 200, now=50.0)
    assert len(rows) == 200 and cut and last < ledger.seq
    assert ledger.parse_cursor(f"{ledger.epoch}-{last}") == last  # as a reply's cursor
    assert ledger.parse_cursor("elsewhere-12") is None  # another window's cursor: a first call


def test_map_runs_and_cells_are_groups_of_their_own() -> None:
    batch = _event(
        1, "FINISHED", 1.0, name="map(square)", func="eugo_jupyter.hpc._batching._execute"
    )
    cell = _event(2, "FINISHED", 1.0, name="%%distribute In[3]", func="notebook_cell")
    assert group_of(batch)[1:] == ("map(square)", "map", "square")
    assert group_of(cell)[1:] == ("%%distribute In[3]", "cell", "%%distribute In[3]")
    assert group_of(_event(3, "FINISHED", 1.0))[1:] == ("square", "function", "square")
