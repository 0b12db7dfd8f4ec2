"""``partitions="auto"``: time a sample, then decide whether to split and into how many partitions.

The rule, in the issue's words: at least two or three partitions per free slot, each running
tens of milliseconds or more, none larger than about 100 MB; and when splitting would cost more
than it saves, run in pandas here and say so with the numbers. Groups are never split; they are
packed into partitions largest first (a huge group gets a partition of its own).

The sample runs in this process: a worker round trip alone costs more than a small frame takes in
pandas, and the fallback must stay within a few percent of pandas. It takes rows spread over the
frame, doubling until it has run a few milliseconds (never more than 5% of the rows), or until
one round alone shows the work too small to split; and its output comes from real rows, so
nothing is guessed from fake data. The partitions' own times, measured on the workers, are in
:attr:`Plan.measured` after the run.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._units import format_seconds as fmt_s

__all__ = ["Plan", "pack_groups", "plan", "runs_here_below", "sample_cost"]

#: Each partition should run at least this long, so the fixed cost per task stays small.
MIN_PART_S = 0.05
#: Partitions per slot (how many run at once): enough that a slow one does not leave others idle.
PARTS_PER_SLOT = 3
#: No partition above this size.
MAX_PART_BYTES = 100_000_000
#: The sample stops once it has run this long...
SAMPLE_S = 0.005
#: ...or covers this share of the rows.
SAMPLE_SHARE = 0.05
#: What splitting costs at the least on a busy machine: storing the frame, submitting and
#: gathering the partitions, joining the results; plus moving the bytes at BYTES_PER_S.
FIXED_COST_S = 0.1
BYTES_PER_S = 500e6
#: A split must finish within this share of the serial time (save 40% at least): a marginal
#: split loses to pandas as soon as the machine is busy, and the fallback must not.
SPLIT_WITHIN = 0.6


def split_cost_s(nbytes: int) -> float:
    """What splitting a frame of ``nbytes`` bytes costs at the least, in seconds."""
    return FIXED_COST_S + nbytes / BYTES_PER_S


@dataclass
class Plan:
    """How a call was run and why; ``str(plan)`` says it in a sentence."""

    rows: int
    per_row_s: float | None  # None when no sample ran (partitions given, or GPUs requested)
    nbytes: int
    slots: int
    partitions: int
    distribute: bool
    unit: str = "rows"
    sizes: list[int] = field(default_factory=list)  # rows per partition, in submission order
    measured: list[float] = field(default_factory=list)  # seconds per partition, on the workers

    @property
    def serial_s(self) -> float | None:
        return None if self.per_row_s is None else self.per_row_s * self.rows

    @property
    def cost_s(self) -> float:
        return split_cost_s(self.nbytes)

    def fallback_message(self, method: str) -> str:
        return (
            f"{method} ran in pandas here: {self.rows:,} {self.unit} x "
            f"{fmt_s(self.per_row_s or 0.0)} = {fmt_s(self.serial_s or 0.0)}; splitting "
            f"would cost about {fmt_s(self.cost_s)}"
            + (f" on {self.slots} slot{'s' if self.slots > 1 else ''}" if self.slots else "")
            + ", more than it saves. Pass partitions=N to split anyway."
        )

    def __str__(self) -> str:
        if not self.distribute:
            return self.fallback_message("the call")
        size = math.ceil(self.rows / max(self.partitions, 1))
        slots = f"{self.slots} slot{'s' if self.slots != 1 else ''}"
        text = f"{self.partitions} partitions of about {size:,} {self.unit} on {slots}"
        if self.per_row_s is not None:
            text += (
                f": a sample took {fmt_s(self.per_row_s)} per row, about "
                f"{fmt_s(self.serial_s or 0.0)} in all; aiming for {PARTS_PER_SLOT} per slot, "
                f"each {fmt_s(MIN_PART_S)} or more, none over {MAX_PART_BYTES // 1_000_000} MB"
            )
        if self.measured:
            text += (
                f". On the workers they took {fmt_s(min(self.measured))} to "
                f"{fmt_s(max(self.measured))}"
            )
        return text


def runs_here_below(rows: int, nbytes: int) -> float:
    """Seconds per row under which ``plan`` runs ``rows`` rows in pandas here, on any cluster.

    >>> round(runs_here_below(10_000, 0) * 1e6, 1)    # 10,000 rows: under 16.7 µs a row
    16.7
    """
    return split_cost_s(nbytes) / (SPLIT_WITHIN * max(rows, 1))


def sample_cost(
    run: Callable[[int], int],
    rows: int,
    clock: Callable[[], float] = time.perf_counter,
    settled_below: float = 0.0,
) -> float:
    """Seconds per row: ``run(k)`` runs the function on about k sample rows (returns rows done).

    Rounds double from 8 rows until the sample has run ``SAMPLE_S`` (two rounds at least) or
    covers ``SAMPLE_SHARE`` of the rows. The cost per row is the slope between the smallest
    and the largest round, so the fixed cost of one pandas call (a millisecond or more on a busy
    machine) is not mistaken for row work. A round slower than a later, larger one was paying
    for a cold start (the process's first pandas call, its first use of the function): it is
    dropped, and the rounds go on until two warm ones remain.

    ``settled_below``: the rounds stop as soon as one round's average is under it. An average
    only overstates the row cost (it carries the call's fixed cost and any preemption), so the
    caller's answer below that figure (run here, on a small frame) is already certain, and the
    sample's milliseconds would be most of what the fallback adds to pandas.

    >>> sample_cost(lambda k: k, 100_000) < 1e-3     # a "function" that costs nothing
    True
    """
    limit = max(1, int(rows * SAMPLE_SHARE))
    k, done = min(8, limit), 0
    rounds: list[tuple[int, float]] = []
    while True:
        began = clock()
        got = run(k)
        seconds = clock() - began
        done += got
        if got:
            rounds = [r for r in rounds if r[1] < seconds]  # more rows took less time: cold
            rounds.append((got, seconds))
        k *= 2
        spent = sum(r[1] for r in rounds)  # warm rounds only
        settled = bool(got) and seconds / got < settled_below
        # Two rounds at least: one round alone cannot tell row work from fixed cost.
        if not got or settled or (spent >= SAMPLE_S and len(rounds) >= 2) or done + k > limit:
            break
    if not rounds:
        return 0.0
    small, big = min(rounds), max(rounds)
    # A busy machine only ever adds time (a round preempted for a few ms), so the least
    # disturbed round's average is the bound; the largest round alone could be the slow one.
    average = min(seconds / got for got, seconds in rounds)
    slope = (big[1] - small[1]) / (big[0] - small[0]) if big[0] > small[0] else 0.0
    if slope <= 0:  # noise larger than the row work: the least disturbed average bounds it
        return average
    return max(min(slope, average), average / 4)


def plan(
    rows: int, per_row_s: float | None, nbytes: int, count_slots: Callable[[], int], partitions: Any
) -> Plan:
    """Choose the partition count (``partitions`` is "auto" or a number).

    ``count_slots`` asks the cluster how many calls can run at once; it is not asked when the
    work is too small to split on any number of slots (asking costs a round trip).
    """
    if per_row_s is not None and partitions == "auto":
        if rows < 2 or per_row_s < runs_here_below(rows, nbytes):
            return Plan(rows, per_row_s, nbytes, 0, 1, distribute=False)
    slots = count_slots()
    if partitions != "auto":
        count = max(1, min(int(partitions), rows))
        return Plan(rows, per_row_s, nbytes, slots, count, distribute=rows > 0)
    if per_row_s is None:  # no sample: what the request asked for may not exist here
        wanted = max(PARTS_PER_SLOT * slots, math.ceil(nbytes / MAX_PART_BYTES))
        count = max(1, min(rows, wanted))
        return Plan(rows, None, nbytes, slots, count, distribute=rows > 0)
    result = Plan(rows, per_row_s, nbytes, slots, 1, distribute=False)
    serial = per_row_s * rows
    # Split when the split run (serial / slots + cost) finishes within SPLIT_WITHIN of serial.
    if rows < 2 or slots < 2 or serial / slots + result.cost_s > SPLIT_WITHIN * serial:
        return result
    by_time = int(serial / MIN_PART_S + 1e-9)  # + 1e-9: 0.5 // 0.05 is 9 in floats
    count = min(PARTS_PER_SLOT * slots, by_time)
    count = max(count, 2, math.ceil(nbytes / MAX_PART_BYTES))
    result.partitions = min(count, rows)
    result.distribute = True
    return result


def pack_groups(sizes: list[int], partitions: int) -> list[list[int]]:
    """Group numbers per partition, balanced by size, largest first; each list sorted.

    >>> pack_groups([100, 1, 1, 1, 1], 2)
    [[0], [1, 2, 3, 4]]
    """
    partitions = max(1, min(partitions, len(sizes)))
    bins: list[tuple[int, int]] = [(0, p) for p in range(partitions)]
    members: list[list[int]] = [[] for _ in range(partitions)]
    for code in sorted(range(len(sizes)), key=lambda c: -sizes[c]):
        load, p = heapq.heappop(bins)
        members[p].append(code)
        heapq.heappush(bins, (load + sizes[code] + 1, p))  # +1: each group has a fixed cost
    # Heaviest partition first: the longest task should start first.
    loads = [sum(sizes[c] for c in m) for m in members]
    order = sorted(range(partitions), key=lambda p: -loads[p])
    return [sorted(members[p]) for p in order if members[p]]
