"""When a cluster's task counts are read again: soon after its work stops, seldom while it rests.

Counting tasks makes the GCS copy every task record it keeps (up to 100,000 by default: most of
a second of the head's CPU), whatever the query asks for; everything else the card shows
(nodes, resources, what waits, whether a driver has tasks in flight) costs the head about a
millisecond, and the observer reads it every ``probe_every`` seconds. Each such probe says
whether work is ``moving`` and gives a ``mark`` that changes whenever a driver submits tasks
(:func:`.monitor.read`), and :class:`CountsPace` says when the counts are due:

- while work moves: every ``busy_every`` seconds, counted from when it started moving (a run
  shorter than that gets only its final read, which would otherwise queue behind one made
  as it started), and never more often than keeps the GCS a third of its time on them (a
  read that took 2 s, on a loaded head, is repeated after 6 s at the soonest);
- when it stops (quiet after moving, or quiet with a new mark: a run that started and ended
  between two probes): ``settle`` seconds later, time for the last task events to reach the
  GCS (workers and drivers report them every 0.25 s on a cluster the Manager launched, every
  second on others: a count read that still shows tasks in flight is repeated once after
  ``report_every``); a read under way then (begun while the work moved) is not waited for by
  the probes, and the final one starts the moment it ends (:meth:`CountsPace.defer`);
- while nothing moves: every ``quiet_every`` seconds only, for work none of the signals shows
  (zero-CPU tasks that a worker, not a driver, submits);
- after a pause in the probes (nobody polled): as after moving, since work may have come and
  gone unseen.

>>> pace = CountsPace(busy_every=2.0, settle=0.3, quiet_every=60.0)
>>> pace.due(0.0, moving=False, mark="a", unsettled=False)        # never read: at once
0.0
>>> pace.began(0.0, moving=False)
>>> pace.due(1.0, moving=True, mark="b", unsettled=False) is None  # moving, read 1 s ago
True
>>> pace.due(2.5, moving=False, mark="b", unsettled=False)        # it stopped: soon
0.3
>>> pace.began(2.8, moving=False)
>>> pace.due(3.3, moving=False, mark="b", unsettled=False) is None  # at rest: not for a minute
True
>>> pace.due(3.8, moving=False, mark="c", unsettled=False)        # a run came and went
0.3
"""

from __future__ import annotations

__all__ = ["CountsPace"]


class CountsPace:
    """One cluster's schedule of task-count reads (pure: the caller gives the time).

    The observer calls :meth:`due` at each probe, :meth:`began` when a count read starts and
    :meth:`took` when it ends.
    """

    def __init__(
        self,
        busy_every: float = 2.0,
        settle: float = 0.3,
        quiet_every: float = 60.0,
        report_every: float = 1.0,
    ) -> None:
        self.busy_every = busy_every  # between count reads while work moves
        self.settle = settle  # from the first quiet probe to the final count read
        self.quiet_every = quiet_every  # between count reads while nothing moves
        self.report_every = report_every  # Ray's own task-event report interval (1 s)
        self.read_at: float | None = None  # when the last count read started
        self.cost = 0.0  # seconds the last count read took
        self.probed_at: float | None = None  # the last probe
        self.mark: str | None = None  # the drivers' activity mark at the last probe
        self.moved = False  # work moved since the last count read started (or as it started)
        self.moving_since: float | None = None  # the first probe of the current movement
        self.final = False  # the last count read was the final one after the work stopped
        self.moving = False  # what the last probe saw
        self.wanted_at: float | None = None  # a read booked while another was under way

    def due(self, now: float, *, moving: bool, mark: str, unsettled: bool) -> float | None:
        """Seconds to wait before reading the counts (0: now), or None: not at this probe.

        ``moving``: the probe saw work in flight; ``mark``: the drivers' activity mark it read;
        ``unsettled``: the last counts have tasks pending or running.
        """
        pause = self.probed_at is None or now - self.probed_at > 3 * self.busy_every
        changed = mark != self.mark
        self.probed_at, self.mark, self.moving = now, mark, moving
        if self.read_at is None:
            self.moving_since = now if moving else None
            return 0.0
        if moving or pause or changed:
            self.moved = True
        if moving:
            since = now if self.moving_since is None else self.moving_since
            self.moving_since = since
            every = max(self.busy_every, 3 * self.cost)
            return 0.0 if now - max(self.read_at, since) >= every else None
        self.moving_since = None
        age = now - self.read_at
        if self.moved:
            return self.settle  # quiet after moving: the final counts once the reports are in
        if unsettled and self.final:
            # The final read still saw tasks in flight: their last events were not in yet
            # (a cluster that reports every second). Once more when they must be.
            self.final = False
            return max(0.0, self.report_every - age)
        if unsettled:
            return 0.0 if age >= max(self.busy_every, 3 * self.cost) else None
        return 0.0 if age >= self.quiet_every else None

    def began(self, now: float, *, moving: bool) -> None:
        """A count read starts now; ``moving``: as the probe that called for it saw the work.

        A read while work moves leaves ``moved`` set, so the first quiet probe after it still
        calls for the final read.
        """
        self.final = self.moved and not moving
        self.read_at, self.moved = now, moving

    def took(self, seconds: float) -> None:
        """The count read that began last took ``seconds`` (it paces the next ones)."""
        self.cost = seconds

    def defer(self, at: float) -> None:
        """A count read fell due (to start at ``at``) while another was under way: it starts
        as soon as that one ends (:meth:`after`), not at the next probe after it."""
        self.wanted_at = at if self.wanted_at is None else min(self.wanted_at, at)

    def after(self, now: float, *, unsettled: bool) -> float | None:
        """The count read that began last ended at ``now``: seconds until the next one starts,
        or None. ``unsettled``: it saw tasks in flight with no work moving.

        A read booked meanwhile (:meth:`defer`) starts when it was due, or at once; a final
        read that still saw tasks in flight is repeated once, a report interval after it began.
        """
        if self.wanted_at is not None:
            wait, self.wanted_at = max(0.0, self.wanted_at - now), None
            return wait
        if unsettled and self.final and self.read_at is not None:
            self.final = False
            return max(0.0, self.report_every - (now - self.read_at))
        return None
