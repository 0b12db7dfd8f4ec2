"""One accessor call from start to end: plan, split, run on the engine (or here), combine."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..exceptions import OptionsError, PandasFallbackWarning, PartitionError
from . import _engine
from ._ops import Op, groups_body, rows_body, run_groups, run_rows
from ._plan import SAMPLE_SHARE, Plan, pack_groups, plan, runs_here_below, sample_cost

__all__ = ["Call", "as_from", "combine", "pointwise_cast", "split_kwargs"]

OPTION_KEYS = _engine.RAY_TASK_OPTIONS | {"gpu_memory", "optimize"}


def split_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(options for the tasks, keyword arguments for the function)``; options by name."""
    options = {k: v for k, v in kwargs.items() if k in OPTION_KEYS}
    rest = {k: v for k, v in kwargs.items() if k not in OPTION_KEYS}
    return options, rest


def _label(fn: Any) -> str:
    return getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__))


def _nbytes(data: Any) -> int:
    """About how many bytes the data takes: exact for plain numpy columns (rows x item sizes, no
    pass over the data), else from a deep look at at most 1,000 rows (strings, objects,
    extension arrays)."""
    if len(data) == 0:
        return 0
    dtypes = list(data.dtypes) if hasattr(data, "columns") else [data.dtype]
    if all(isinstance(d, np.dtype) and d.kind != "O" for d in [*dtypes, data.index.dtype]):
        return len(data) * sum(d.itemsize for d in dtypes) + int(data.index.nbytes)
    head = data.iloc[:1000]
    usage = head.memory_usage(deep=True, index=True)
    per_row = float(np.sum(usage)) / len(head)
    return int(per_row * len(data))


def _spread(n: int, k: int) -> np.ndarray:
    """k row positions spread evenly over n rows."""
    return np.unique(np.linspace(0, n - 1, num=min(k, n)).astype(np.int64))


class Call:
    """One ``.eugo`` call: its function, options and data, and the steps that run it."""

    def __init__(
        self,
        method: str,
        fn: Callable[..., Any],
        args: tuple,
        kwargs: dict[str, Any],
        partitions: Any,
        progress: bool | None,
        shared: Any,
        options: dict[str, Any],
    ) -> None:
        if not callable(fn):
            raise TypeError(
                f"{method} needs a function as its first argument, not {type(fn).__name__}."
            )
        whole = isinstance(partitions, (int, np.integer)) and not isinstance(partitions, bool)
        if partitions != "auto" and (not whole or partitions < 1):
            raise OptionsError(
                f'partitions={partitions!r} is not allowed: use "auto" or a whole number, '
                "1 or more."
            )
        if shared is not None and not isinstance(shared, dict):
            raise TypeError(
                "shared= takes a dict of keyword arguments every partition needs, stored once, "
                "such as shared={'model': model}; the function is then called with model=model."
            )
        self.method = method
        self.label = _label(fn)
        self.name = f"{method}({self.label})"
        self.options, mode = _engine.optimize_mode(_engine.resolve_options(options, "task"))
        if mode:
            fn = _engine.optimized(fn, mode, self.options)
        self.op = Op(method, fn, args, kwargs)
        self.partitions = partitions
        self.progress = progress
        self.shared = dict(shared or {})
        self.plan: Plan | None = None
        self.same_index = False

    # -- shared steps ----------------------------------------------------------------------
    def _sample_here(self) -> bool:
        """Sample in this process unless the call asks for GPUs or custom resources."""
        request = _engine.request_of(self.options, "task")
        return not any(k not in ("CPU", "memory") for k in request)

    def _slots(self) -> int:
        _engine.ensure()
        # The cluster's capacity, not what is free this instant: Ray's view of free resources
        # lags finished tasks, and a busy moment would make a one-slot plan that never splits.
        return _engine.slots(_engine.request_of(self.options, "task"))

    def _raise(self, failure: _engine.Failure) -> None:
        raise self._error(failure) from failure.error

    def _error(self, failure: _engine.Failure, unit: Any = None) -> BaseException:
        what = "group key" if self.method == "groupby.apply" else "row label"
        # An instance of the original exception's type too, so `except KeyError:` still works.
        return PartitionError.raised(
            f"{self.name} raised {failure.kind} in {failure.where}: {failure.text}\n"
            f"({what}: {failure.label!r}.) Reproduce it here by calling {self.label} on that "
            f"{'group' if self.method == 'groupby.apply' else 'row'}. Worker traceback:\n"
            f"{failure.trace}",
            failure.index,
            failure.label,
            failure.error,
        )

    def _lost(self, exc: BaseException, unit: Any) -> BaseException:
        return PartitionError(
            f"{self.name} lost partition {unit.key}: {type(exc).__name__}: {exc}", unit.key, None
        )

    def _fallback(self, local: Callable[[], Any]) -> Any:
        assert self.plan is not None
        warnings.warn(self.plan.fallback_message(self.name), PandasFallbackWarning, stacklevel=4)
        return local()

    def _engine(self, body: Any, total: int, unit_name: str) -> Any:
        engine = _engine.Engine(
            self.name, body, self.op, self.shared, self.options, self.progress, total, unit_name
        )
        engine.check(stacklevel=4)
        return engine

    # -- rows: apply, map, map_partitions ----------------------------------------------------
    def run_rows(self, data: Any, local: Callable[[], Any]) -> Any:
        n = len(data)
        if n == 0:
            return local()
        per_row = None
        nbytes = _nbytes(data)
        if self.partitions == "auto" and self._sample_here():

            def sample(k: int) -> int:
                part = data.iloc[_spread(n, k)]
                out = run_rows(self.op, self.shared, part, None, 0)
                if isinstance(out, _engine.Failure):
                    self._raise(out)
                return len(part)

            per_row = sample_cost(sample, n, settled_below=runs_here_below(n, nbytes))
        self.plan = plan(n, per_row, nbytes, self._slots, self.partitions)
        if not self.plan.distribute:
            return self._fallback(local)
        engine = self._engine(rows_body, n, "row")
        box = engine.store(data)
        bounds = np.linspace(0, n, self.plan.partitions + 1).astype(np.int64)
        units = [
            _engine.Unit(p, int(stop - start), (box, p, int(start), int(stop)))
            for p, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
        ]
        self.plan.sizes = [u.size for u in units]
        results = engine.run(_FixedPlanner(units, self.plan), self._error, self._lost)
        # pandas hands the input's own index object to some results (a Series of scalars) and
        # not others (frames): where it did so on every partition, it would on the whole.
        self.same_index = all(results[p][1] for p in range(len(units)))
        return [results[p][0] for p in range(len(units))]

    # -- groups ----------------------------------------------------------------------------
    def run_groups(self, split: GroupSplit, local: Callable[[], Any]) -> list[Any]:
        sizes = split.sizes
        n_rows = int(sizes.sum())
        if len(sizes) == 0:
            return local()
        per_row = None
        nbytes = _nbytes(split.data)
        if self.partitions == "auto" and self._sample_here():
            per_row = self._sample_groups(split, runs_here_below(n_rows, nbytes))
        self.plan = plan(n_rows, per_row, nbytes, self._slots, self.partitions)
        self.plan.partitions = min(self.plan.partitions, len(sizes))
        if not self.plan.distribute:
            return self._fallback(local)
        members = pack_groups(sizes.tolist(), self.plan.partitions)
        self.plan.partitions = len(members)
        part_of_code = np.empty(len(sizes), dtype=np.int64)
        for p, codes in enumerate(members):
            part_of_code[codes] = p
        valid = split.codes >= 0
        part_of_row = np.full(len(split.codes), -1, dtype=np.int64)
        part_of_row[valid] = part_of_code[split.codes[valid]]
        engine = self._engine(groups_body, n_rows, "row")
        box = engine.store(split.data)
        units = []
        for p, codes in enumerate(members):
            positions = np.flatnonzero(part_of_row == p)
            keys = [split.keys[c] for c in codes]
            work = (box, p, positions, split.codes[positions], keys, split.in_runs)
            units.append(_engine.Unit(p, int(sizes[codes].sum()), work))
        self.plan.sizes = [u.size for u in units]
        results = engine.run(_FixedPlanner(units, self.plan), self._error, self._lost)
        by_code: list[Any] = [None] * len(sizes)
        for p, codes in enumerate(members):
            for code, value in zip(codes, results[p], strict=True):
                by_code[code] = value
        return by_code

    def _sample_groups(self, split: GroupSplit, settled_below: float) -> float | None:
        """Seconds per row over a sample of whole groups, none of them a large share; the
        sample stops early once a round is under ``settled_below`` (see ``sample_cost``)."""
        sizes = split.sizes
        budget = max(1, int(sizes.sum() * SAMPLE_SHARE))
        candidates = [int(c) for c in _spread(len(sizes), 64) if sizes[c] <= budget]
        if not candidates:  # only huge groups: no cheap sample exists
            return None
        in_sample = np.flatnonzero(np.isin(split.codes, candidates))  # one pass over the rows
        sample_codes = split.codes[in_sample]
        queue = list(reversed(candidates))

        def sample(k: int) -> int:
            """Run the next groups (in code order, as the worker does) until about k rows ran."""
            chosen: list[int] = []
            rows = 0
            while queue and (rows < k or not chosen):
                chosen.append(queue.pop())
                rows += int(sizes[chosen[-1]])
            if not chosen:
                return 0
            mask = np.isin(sample_codes, chosen)
            out = run_groups(
                self.op,
                self.shared,
                split.data,
                None,
                in_sample[mask],
                sample_codes[mask],
                [split.keys[c] for c in chosen],
                split.in_runs,
            )
            if isinstance(out, _engine.Failure):
                self._raise(out)
            return rows

        return sample_cost(sample, int(sizes.sum()), settled_below=settled_below)


class _FixedPlanner:
    """Partitions decided up front: hand them out in order, note each one's time."""

    def __init__(self, units: list[Any], plan: Plan) -> None:
        self.units = list(reversed(units))
        self.plan = plan

    def next_unit(self) -> Any:
        return self.units.pop() if self.units else None

    def finished(self, unit: Any, seconds: float) -> None:
        self.plan.measured.append(seconds)

    def waiting_on_results(self) -> bool:
        return False


class GroupSplit:
    """What the driver knows about the groups: a code per row, sizes and keys per code."""

    def __init__(self, data: Any, codes: np.ndarray, sizes: np.ndarray, keys: list) -> None:
        self.data = data  # the columns each group passes to the function
        self.codes = codes  # group number per row, -1 for rows in no group (NaN keys)
        self.sizes = sizes  # rows per group number
        self.keys = keys  # the key pandas gives each group number (its ``.name``)
        # Every group one run of rows (the frame sorted by group, rows in no group first), so
        # pandas' groups are slices of the frame itself: see _ops._groups.
        self.in_runs = bool(np.all(codes[1:] >= codes[:-1]))


def combine(parts: list[Any], pointwise: Callable[[np.ndarray], Any] | None = None) -> Any:
    """Join partition results as pandas would have computed them in one piece.

    ``pointwise`` is how the input turns a whole column of results into an array (an extension
    array's own cast, for ``map``); without it the values are inferred as pandas infers a list.
    """
    if all(isinstance(p, pd.Series) for p in parts):
        result = pd.concat(parts)
        if len({str(p.dtype) for p in parts}) > 1:
            # Each partition inferred its own dtype (ints here, floats or None there, an
            # all-missing partition's null[pyarrow]); infer once over all values, as pandas
            # does over the whole column.
            values = np.concatenate([p.to_numpy(dtype=object) for p in parts])
            data = pointwise(values) if pointwise is not None else values.tolist()
            result = result._constructor(data, index=result.index, name=result.name)
        return result
    if all(isinstance(p, pd.DataFrame) for p in parts):
        result = pd.concat(parts)
        for column in result.columns:
            kinds = {str(p[column].dtype) for p in parts if column in p.columns}
            if len(kinds) > 1:
                values = result[column].astype(object).tolist()
                result[column] = pd.Series(values, index=result.index, name=column)
        return result
    if not any(isinstance(p, (pd.Series, pd.DataFrame)) for p in parts):
        return pd.Series(parts)  # a scalar per partition
    raise TypeError(
        "The function returned a DataFrame or Series for some partitions and a scalar for "
        "others; return the same kind for every partition."
    )


def as_from(result: Any, data: Any, method: str, same_index: bool) -> Any:
    """What pandas' own ``method`` hands back beyond the values: the input's own index object
    where pandas reuses it (``same_index``: it did so on every partition, ``result.index is
    df.index``) and the result's index is identical to it, and the input's metadata
    (``_metadata``, ``attrs``) through ``__finalize__``."""
    if not isinstance(result, (pd.Series, pd.DataFrame)):
        return result
    index = data.index
    if same_index and result.index is not index and len(result.index) == len(index):
        if result.index.identical(index):
            result.index = index
    return result.__finalize__(data, method=method)


def pointwise_cast(series: Any) -> Callable[[np.ndarray], Any] | None:
    """How ``series.map`` turns the function's results into an array, where its extension array
    uses the generic map (``map_array`` then ``_cast_pointwise_result``): then an
    ``int64[pyarrow]`` input gives ``int64[pyarrow]`` even where a partition was all missing.
    Numpy columns, categoricals, datetimes and sparse arrays map in their own way: None."""
    from pandas.api.extensions import ExtensionArray

    values = series._values
    if isinstance(values, ExtensionArray) and type(values).map is ExtensionArray.map:
        return values._cast_pointwise_result
    return None
