"""The readiness report: the verdict and checklist over a prediction, as HTML, text and data.

Pure: :mod:`.model` predicts, this module only says and shows.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict
from typing import Any

from ..._units import format_bytes
from .model import TINY_ITEM_S, WORTH_IT_SPEEDUP, Check, Measurements, Prediction, fmt_s, median

__all__ = ["ReadinessReport", "speedup_text"]


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
            ("map's cost per batch (this cluster)", f"{fmt_s(m.overhead_s)}, the first "
             f"{fmt_s(m.start_s or m.latency_s + m.overhead_s)}"),
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
