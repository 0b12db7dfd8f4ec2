"""Worker side of the accessors: what one partition runs, and where it failed.

A unit's work is ``(data_box, partition, spec)``: the frame is read from the object store once
per worker process (:func:`fetch`), and a partition of rows is a slice of it (a view where pandas
allows), so no task carries its own copy of the data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._engine import Failure, fetch

__all__ = ["Op", "groups_body", "rows_body"]


class Op:
    """The user's function and the pandas call around it; pickled once per call."""

    def __init__(self, method: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.method = method  # "apply", "map", "map_partitions" or "groupby.apply"
        self.fn = fn
        self.args = args
        self.kwargs = kwargs  # pandas' own arguments (axis, raw, na_action) and the function's

    def run(self, part: Any, fn: Callable[..., Any], shared: dict[str, Any]) -> Any:
        """The pandas call on one partition, with ``fn`` standing for the user's function."""
        if self.method == "apply":
            return part.apply(fn, args=self.args, **self.kwargs, **shared)
        if self.method == "map":
            return part.map(fn, **self.kwargs, **shared)
        return fn(part, *self.args, **self.kwargs, **shared)


class _Counted:
    """The user's function, counting its calls so a failure can be traced to its row."""

    __slots__ = ("calls", "fn")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.fn(*args, **kwargs)


def _failed_label(op: Op, part: Any, calls: int) -> Any:
    """The index label of the row the ``calls``-th call was on (pandas calls rows in order)."""
    if op.method == "map_partitions":
        return None
    positions = range(len(part))
    if op.method == "map" and op.kwargs.get("na_action") == "ignore":
        positions = part.notna().to_numpy().nonzero()[0]  # NaN values are skipped, not called
    if 0 < calls <= len(positions):
        return part.index[positions[calls - 1]]
    return None


def describe(number: int, part: Any, start: int) -> str:
    """``partition 3 (rows 1,000 to 1,499)``."""
    return f"partition {number} (rows {start:,} to {start + len(part) - 1:,})"


def rows_body(op: Op, shared: dict[str, Any], unit: tuple[list[Any], int, int, int]) -> Any:
    """One partition of rows: ``[result]``, or a Failure naming the partition and row."""
    box, number, start, stop = unit
    part = fetch(box).iloc[start:stop]
    return run_rows(op, shared, part, number, start)


def run_rows(op: Op, shared: dict[str, Any], part: Any, number: int | None, start: int) -> Any:
    """``[result, pandas kept the partition's own index object]``, or a Failure."""
    counted = _Counted(op.fn)
    try:
        result = op.run(part, counted, shared)
        return [result, getattr(result, "index", None) is part.index]
    except Exception as exc:  # noqa: BLE001 - reported with the partition and row
        label = _failed_label(op, part, counted.calls)
        where = describe(number, part, start) if number is not None else "the sample run here"
        if label is not None:
            where += f", row {label!r}"
        return Failure(where, exc, index=number, label=label)


def groups_body(
    op: Op, shared: dict[str, Any], unit: tuple[list[Any], int, Any, Any, list, bool]
) -> Any:
    """One partition of whole groups: a list of the function's results in group order."""
    box, number, positions, codes, keys, in_runs = unit
    return run_groups(op, shared, fetch(box), number, positions, codes, keys, in_runs)


def _groups(data: Any, positions: Any, codes: Any, in_runs: bool) -> Any:
    """The partition's groups in code order, cut as pandas cuts them from the whole frame.

    pandas slices each group from the frame sorted by group; when the frame already is (every
    group one run of rows, ``in_runs``), the groups are slices of the frame itself and keep its
    index's kind (a RangeIndex, a DatetimeIndex's freq). Otherwise they come from a copy in
    group order, as pandas' do.
    """
    if in_runs:
        edges = np.concatenate([[0], np.flatnonzero(np.diff(codes)) + 1, [len(codes)]])
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            yield data.iloc[positions[a] : positions[b - 1] + 1]
        return
    for _, group in data.take(positions).groupby(codes, sort=True):
        yield group


def run_groups(
    op: Op,
    shared: dict[str, Any],
    data: Any,
    number: int | None,
    positions: Any,
    codes: Any,
    keys: list,
    in_runs: bool = False,
) -> Any:
    out = []
    for group, key in zip(_groups(data, positions, codes, in_runs), keys, strict=True):
        object.__setattr__(group, "name", key)  # as pandas' own apply does
        try:
            out.append(op.fn(group, *op.args, **op.kwargs, **shared))
        except Exception as exc:  # noqa: BLE001 - reported with the partition and group key
            where = f"partition {number}" if number is not None else "the sample run here"
            return Failure(f"{where}, group {key!r}", exc, index=number, label=key)
    return out
