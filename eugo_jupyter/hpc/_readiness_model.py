"""The readiness prediction and report: pure functions over measured numbers, no Ray.

:mod:`._readiness` measures (per-item time on a worker, sizes after serialization, this
cluster's overhead per task and cost per byte shipped); this module turns the measurements into
a predicted ``eugo.hpc.map`` run, a one-sentence verdict and a checklist, and renders them.

The prediction replays ``map``'s own batching (:func:`._map.auto_batch_size` and
:func:`._map.final_batch_size`) on a small event simulation: the notebook submits batches one
after another (each costs the measured overhead per task plus its bytes at the measured cost per
byte), at most ``IN_FLIGHT_PER_SLOT`` batches per slot are in flight, and each batch occupies
one slot for ``items x per-item time``. The first batch is map's probe: one item, alone.
"""

from __future__ import annotations

import heapq
import html
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .._units import format_bytes
from ._map import IN_FLIGHT_PER_SLOT, auto_batch_size, batch_target, final_batch_size

__all__ = ["Check", "Measurements", "Prediction", "ReadinessReport", "plan_batches", "predict"]

#: Below this predicted speedup distributing is not worth the trouble.
WORTH_IT_SPEEDUP = 1.5
#: Per-item time under which a task per item is dominated by overhead (Ray's rule of thumb).
TINY_ITEM_S = 0.010
#: An argument this large, shipped with every call, belongs in the object store once.
LARGE_ARG_BYTES = 1 << 20


@dataclass
class Measurements:
    """What :mod:`._readiness` measured; every time in seconds, every size in bytes."""

    function: str
    items: int  # how many items the map would run
    sampled: int  # how many of them ran on a worker
    per_item_s: list[float]  # each sampled item's time, measured on the worker
    arg_bytes: float  # median serialized size of one item (plus its share of nothing else)
    result_bytes: float  # median serialized size of one result
    overhead_s: float  # the cluster's cost per task, seen from the notebook (fan-out of no-ops)
    latency_s: float  # one call's round trip (submit, run nothing, get)
    per_byte_s: float  # cost per byte shipped to and from a task, fan-out measured
    slots: int  # calls with this request the cluster runs at once
    request: dict[str, float]
    batch_size: int | str  # "auto" or the fixed size asked for
    node: str  # the node the sample ran on
    node_memory: float = 0.0  # bytes of memory (Ray's "memory" resource) of the busiest node
    node_slots: int = 1  # calls with this request that node runs at once
    peak_item_bytes: float = 0.0  # extra memory one item needed while it ran (tracemalloc)


@dataclass
class Check:
    """One checklist line: ``ok`` is True (passes), False (fails) or None (not applicable)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


@dataclass
class Prediction:
    """A predicted map run, serial baseline included, and where the time beyond ideal goes."""

    batches: list[int]
    serial_s: float
    parallel_s: float
    speedup: float
    efficiency: float
    ideal_s: float  # serial_s / slots: perfect scaling
    overhead_s: float  # the notebook's submission cost, all batches together
    transfer_s: float  # bytes shipped, all batches together
    serial_part_s: float  # the probe batch, run alone before the rest
    extra: dict[str, float] = field(default_factory=dict)


def median(values: list[float]) -> float:
    """The median of a non-empty list.

    >>> median([3.0, 1.0, 2.0])
    2.0
    """
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def plan_batches(items: int, per_item_s: float, slots: int, batch_size: int | str) -> list[int]:
    """The batch sizes ``eugo.hpc.map`` would submit, in order, for ``items`` items.

    >>> plan_batches(10, 0.1, 2, 1)
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    >>> plan_batches(100, 0.001, 2, "auto")[:4]
    [1, 4, 16, 20]
    """
    sizes: list[int] = []
    left, last = items, 0
    while left > 0:
        if batch_size != "auto":
            size = int(batch_size)
        else:
            measured = None if not sizes else per_item_s
            size = auto_batch_size(measured, last, batch_target(measured, items, slots))
            # map reads size x (slots + 1) items ahead; when that reaches the end it shrinks
            if sizes and left < size * (slots + 1):
                size = final_batch_size(size, per_item_s, left, slots)
        size = min(size, left)
        sizes.append(size)
        left -= size
        last = size
    return sizes


def predict(m: Measurements) -> Prediction:
    """Replay map's batches on ``m.slots`` slots with the measured costs.

    >>> m = Measurements("f", 100, 5, [0.1] * 5, 100, 100, 0.001, 0.002, 0.0, 4, {"CPU": 1},
    ...                  "auto", "n1")
    >>> p = predict(m)
    >>> round(p.serial_s, 3), p.parallel_s < p.serial_s, 3.0 < p.speedup <= 4.0
    (10.0, True, True)
    """
    # the mean, not the median: with skewed items the total is what the slow ones make it
    per_item = sum(m.per_item_s) / len(m.per_item_s) if m.per_item_s else 0.0
    batches = plan_batches(m.items, per_item, m.slots, m.batch_size)
    per_batch_bytes = [b * (m.arg_bytes + m.result_bytes) for b in batches]
    serial = m.items * per_item
    slots = max(1, m.slots)
    limit = max(2, IN_FLIGHT_PER_SLOT * slots)
    free = [0.0] * slots  # when each slot is next free
    heapq.heapify(free)
    ends: list[float] = []  # end times of batches in flight, to respect map's in-flight limit
    clock = 0.0  # the notebook's own time: submissions are serial there
    finish = 0.0
    probe = 0.0
    for number, (size, nbytes) in enumerate(zip(batches, per_batch_bytes)):
        clock += m.overhead_s + nbytes * m.per_byte_s
        if len(ends) >= limit:  # map waits for one batch to finish before submitting more
            clock = max(clock, heapq.heappop(ends))
        start = max(clock, heapq.heappop(free))
        end = start + size * per_item
        heapq.heappush(free, end)
        heapq.heappush(ends, end)
        finish = max(finish, end)
        if number == 0 and m.batch_size == "auto" and len(batches) > 1:
            # the probe: map collects it before submitting anything else
            probe = m.latency_s + size * per_item
            clock = max(clock, end) + m.latency_s
            free = [max(f, clock) for f in free]
            heapq.heapify(free)
    parallel = max(finish + m.latency_s, m.latency_s)
    speedup = serial / parallel if parallel > 0 else 0.0
    return Prediction(
        batches=batches,
        serial_s=serial,
        parallel_s=parallel,
        speedup=speedup,
        efficiency=speedup / slots,
        ideal_s=serial / slots,
        overhead_s=len(batches) * m.overhead_s,
        transfer_s=sum(per_batch_bytes) * m.per_byte_s,
        serial_part_s=probe,
    )


def fmt_s(seconds: float) -> str:
    """A duration for people: µs, ms or s.

    >>> fmt_s(4e-5), fmt_s(0.25), fmt_s(12.5)
    ('40 µs', '250.0 ms', '12.50 s')
    """
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"



def timing_checks(m: Measurements, p: Prediction) -> list[Check]:
    """The checklist lines that follow from the numbers: items too small, arguments too large,
    memory per item times items in flight against the node's memory."""
    per_item = median(m.per_item_s) if m.per_item_s else 0.0
    out = []
    tiny = per_item < TINY_ITEM_S
    if tiny and m.batch_size != "auto" and int(m.batch_size) * per_item < TINY_ITEM_S:
        out.append(
            Check(
                "items large enough",
                False,
                f"each item takes {fmt_s(per_item)} and each task carries {m.batch_size} "
                f"item(s), while a task costs about {fmt_s(m.overhead_s)} of overhead",
                'let map batch them (batch_size="auto", the default) or run it here',
            )
        )
    else:
        detail = f"each item takes {fmt_s(per_item)}"
        if tiny:
            detail += f"; map batches them {max(p.batches)} to a task so overhead stays small"
        out.append(Check("items large enough", True, detail))
    if m.arg_bytes >= LARGE_ARG_BYTES:
        out.append(
            Check(
                "arguments small enough to ship per call",
                False,
                f"each item is {format_bytes(m.arg_bytes)} after serialization; shipping all "
                f"{m.items} costs about {fmt_s(p.transfer_s)}",
                "send a path on storage every node mounts, or pass what every call shares once "
                "(shared={...} or eugo.hpc.put) and keep the items small",
            )
        )
    else:
        out.append(
            Check(
                "arguments small enough to ship per call",
                True,
                f"an item is {format_bytes(m.arg_bytes)}, a result {format_bytes(m.result_bytes)}",
            )
        )
    if m.node_memory > 0 and m.peak_item_bytes > 0:
        in_flight = m.node_slots * (m.peak_item_bytes + max(p.batches) * m.result_bytes)
        ok = in_flight <= m.node_memory
        out.append(
            Check(
                "memory per item x items in flight fits a node",
                ok,
                f"an item needs about {format_bytes(m.peak_item_bytes)} while it runs; "
                f"{m.node_slots} at once on a node need {format_bytes(in_flight)} of "
                f"{format_bytes(m.node_memory)}",
                ""
                if ok
                else f"ask for memory per call (memory=\"{format_bytes(m.peak_item_bytes * 1.5)}\") "
                "so fewer run at once, or process each item in pieces",
            )
        )
    return out


class ReadinessReport:
    """Is it worth distributing? Measurements, the predicted map, a verdict and a checklist.

    Shows as HTML in notebooks and as text elsewhere; :meth:`as_dict` gives plain data.

    >>> report = eugo.hpc.readiness(resample, tiles)       # doctest: +SKIP
    >>> report.verdict                                      # doctest: +SKIP
    'worth it: about 7.4x faster on 8 slots'
    """

    def __init__(
        self,
        measurements: Measurements | None,
        prediction: Prediction | None,
        checks: list[Check],
        blocking: str | None = None,
    ) -> None:
        self.measurements = measurements
        self.prediction = prediction
        self.checks = checks
        self._blocking = blocking

    @property
    def ok(self) -> bool:
        """True when the verdict is "worth it" and no check fails."""
        return self.verdict.startswith("worth it") and not self.failing

    @property
    def failing(self) -> list[Check]:
        """The checks that fail, each with its fix."""
        return [c for c in self.checks if c.ok is False]

    @property
    def verdict(self) -> str:
        """One sentence: worth it (and how much), not worth it (and why), or not ready."""
        if self._blocking:
            return f"not ready: {self._blocking}"
        m, p = self.measurements, self.prediction
        assert m is not None and p is not None
        blockers = [c for c in self.failing if c.name in _BLOCKERS]
        if blockers:
            return f"not ready: {blockers[0].detail}; fix: {blockers[0].fix}"
        per_item = median(m.per_item_s)
        slots = f"{m.slots} slot{'s' if m.slots != 1 else ''}"
        if p.speedup >= WORTH_IT_SPEEDUP:
            return f"worth it: about {p.speedup:.1f}x faster on {slots}"
        if per_item < TINY_ITEM_S:
            return f"not worth it: each item takes {fmt_s(per_item)}; run it here or batch it"
        if p.transfer_s > p.ideal_s:
            return (
                f"not worth it: about {p.speedup:.1f}x on {slots}; shipping the data "
                f"({fmt_s(p.transfer_s)}) costs more than the work; send paths or use put"
            )
        return f"not worth it: about {p.speedup:.1f}x on {slots}; too few items for this cluster"

    def as_dict(self) -> dict[str, Any]:
        """Plain data: ``verdict``, ``ok``, ``measurements``, ``prediction``, ``checks``."""
        m, p = self.measurements, self.prediction
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "ok": self.ok,
            "measurements": asdict(m) if m else None,
            "prediction": None,
            "checks": [asdict(c) for c in self.checks],
        }
        if m is not None:
            per = sorted(m.per_item_s)
            out["measurements"].update(
                per_item_median_s=median(per) if per else None,
                per_item_mean_s=sum(per) / len(per) if per else None,
                per_item_spread_s=(per[-1] - per[0]) if per else None,
            )
        if p is not None:
            out["prediction"] = asdict(p)
            out["prediction"]["batch_size"] = _batch_text(p.batches)
        return out

    def _rows(self) -> list[tuple[str, str]]:
        m, p = self.measurements, self.prediction
        if m is None or p is None:
            return []
        per = sorted(m.per_item_s)
        return [
            ("per item (on the worker)", f"{fmt_s(median(per))} median, "
             f"{fmt_s(sum(per) / len(per))} mean, {fmt_s(per[0])} to {fmt_s(per[-1])} "
             f"over {m.sampled} items"),
            ("item / result after serialization", f"{format_bytes(m.arg_bytes)} / "
             f"{format_bytes(m.result_bytes)}"),
            ("overhead per task (this cluster)", fmt_s(m.overhead_s)),
            ("slots for this request", f"{m.slots} ({_request_text(m.request)} each)"),
            ("batch size map would choose", _batch_text(p.batches)),
            (f"all {m.items} items here, one after another", fmt_s(p.serial_s)),
            ("on this cluster (predicted)", fmt_s(p.parallel_s)),
            ("speedup / efficiency", f"{p.speedup:.2f}x / {p.efficiency:.0%}"),
            ("beyond perfect scaling", f"{fmt_s(max(0.0, p.parallel_s - p.ideal_s))}: overhead "
             f"{fmt_s(p.overhead_s)}, data transfer {fmt_s(p.transfer_s)}, serial part "
             f"{fmt_s(p.serial_part_s)} (overlapping)"),
        ]  # fmt: skip

    def __repr__(self) -> str:
        lines = [f"Readiness of {self.measurements.function if self.measurements else '?'}: "
                 f"{self.verdict}"]  # fmt: skip
        lines += [f"  {k}: {v}" for k, v in self._rows()]
        for c in self.checks:
            mark = {True: "ok  ", False: "FAIL", None: "n/a "}[c.ok]
            lines.append(f"  [{mark}] {c.name}: {c.detail}" + (f". Fix: {c.fix}" if c.fix else ""))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        colour = "#1a7f37" if self.ok else "#b35900"
        rows = "".join(f"<tr><th style='text-align:left'>{e(k)}</th><td style='text-align:left'>"
                       f"{e(v)}</td></tr>" for k, v in self._rows())  # fmt: skip
        checks = "".join(
            f"<li>{'✔' if c.ok else ('✘' if c.ok is False else '–')} <b>{e(c.name)}</b>: "
            f"{e(c.detail)}{(' <i>Fix: ' + e(c.fix) + '</i>') if c.fix else ''}</li>"
            for c in self.checks
        )
        return (
            f"<div class='eugo-readiness'><p style='color:{colour}'><b>{e(self.verdict)}</b></p>"
            f"<table>{rows}</table><ul>{checks}</ul></div>"
        )


#: Checks whose failure means the map cannot run as it is, whatever the numbers say.
_BLOCKERS = ("arguments can be pickled", "the request can run", "paths visible on every node")


def _batch_text(batches: list[int]) -> str:
    if not batches:
        return "-"
    if len(set(batches)) == 1:
        return f"{batches[0]} ({len(batches)} tasks)"
    return f"{batches[0]} (the probe), then up to {max(batches)} ({len(batches)} tasks)"


def _request_text(request: dict[str, float]) -> str:
    parts = [f"{v:g} {k}" for k, v in sorted(request.items()) if v]
    return ", ".join(parts) or "nothing"


def speedup_text(value: float) -> str:
    """``7.4x`` style, for tables.

    >>> speedup_text(7.44)
    '7.4x'
    """
    return f"{value:.1f}x" if math.isfinite(value) else "-"
