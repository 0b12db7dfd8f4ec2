"""``df.eugo`` and ``series.eugo``: pandas calls split into partitions on the cluster.

Each method mirrors its pandas counterpart and returns what pandas returns. Extra keywords:
``partitions`` ("auto" or a number), ``progress`` (None: a bar in notebooks after two seconds),
``shared`` (a dict of large objects every partition needs, stored once and passed to the function
as keyword arguments) and the per-call options (``num_cpus``, ``num_gpus``, ``memory``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ._plan import Plan
from ._run import Call, GroupSplit, as_from, combine, pointwise_cast, split_kwargs

__all__ = ["FrameAccessor", "GroupBy", "SeriesAccessor", "last_plan"]

_GROUPBY_ARGS = ("level", "as_index", "sort", "group_keys", "observed", "dropna")


_last_plan: Plan | None = None


def last_plan() -> Plan | None:
    """How the last ``.eugo`` call in this process ran and why (partitions, sample, fallback)."""
    return _last_plan


class _Base:
    def __init__(self, obj: Any) -> None:
        self._obj = obj

    @property
    def last_plan(self) -> Plan | None:
        """How the last ``.eugo`` call ran and why: ``print(df.eugo.last_plan)``."""
        return _last_plan

    def _finish(self, call: Call) -> None:
        global _last_plan
        _last_plan = call.plan


class FrameAccessor(_Base):
    """``df.eugo``: ``apply(fn, axis=1)``, ``map_partitions(fn)``, ``groupby(keys).apply(fn)``.

    >>> df.eugo.apply(score, axis=1, partitions="auto", num_cpus=1)      # doctest: +SKIP
    """

    def apply(
        self,
        fn: Callable[..., Any],
        axis: Any = 1,
        raw: bool = False,
        result_type: str | None = None,
        args: tuple = (),
        *,
        partitions: int | str = "auto",
        progress: bool | None = None,
        shared: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Like ``df.apply(fn, axis=1)``, with the rows split into partitions.

        Keywords that are task options (``num_cpus``, ``memory``...) go to the tasks; the others
        to ``fn``, as in pandas.

        >>> df.eugo.apply(lambda row: row.a + row.b, axis=1)               # doctest: +SKIP
        """
        if axis not in (1, "columns"):
            raise ValueError(
                "df.eugo.apply splits the rows, so it takes axis=1 (a function of each row); "
                "for a function of each column use df.apply(fn) itself."
            )
        options, fn_kwargs = split_kwargs(kwargs)
        pandas_kwargs = {"axis": 1, "raw": raw, "result_type": result_type, **fn_kwargs}
        call = Call("apply", fn, tuple(args), pandas_kwargs, partitions, progress, shared, options)
        frame = self._obj

        def local() -> Any:
            return frame.apply(fn, args=tuple(args), **pandas_kwargs, **call.shared)

        try:
            parts = call.run_rows(frame, local)
            return (
                parts
                if not isinstance(parts, list)
                else as_from(combine(parts), frame, "apply", call.same_index)
            )
        finally:
            self._finish(call)

    def map_partitions(
        self,
        fn: Callable[..., Any],
        *args: Any,
        partitions: int | str = "auto",
        progress: bool | None = None,
        shared: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """``fn(partition)`` on each partition; DataFrames and Series are joined in row order.

        A function that returns a scalar gives a Series with one value per partition.

        >>> df.eugo.map_partitions(lambda part: part.assign(c=part.a * 2))  # doctest: +SKIP
        """
        options, fn_kwargs = split_kwargs(kwargs)
        call = Call("map_partitions", fn, args, fn_kwargs, partitions, progress, shared, options)
        frame = self._obj

        def local() -> Any:
            value = fn(frame, *args, **fn_kwargs, **call.shared)
            return value if isinstance(value, (pd.Series, pd.DataFrame)) else pd.Series([value])

        try:
            parts = call.run_rows(frame, local)
            return parts if not isinstance(parts, list) else combine(parts)
        finally:
            self._finish(call)

    def groupby(
        self,
        by: Any = None,
        *,
        partitions: int | str = "auto",
        progress: bool | None = None,
        shared: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> GroupBy:
        """Like ``df.groupby(by, ...)``; ``.apply(fn)`` then runs whole groups per partition.

        pandas' own groupby arguments (``level``, ``sort``, ``dropna``, ``group_keys``,
        ``observed``, ``as_index``) are accepted here, next to the partition and task options.

        >>> df.eugo.groupby("city", sort=False).apply(lambda g: g.price.median())  # doctest: +SKIP
        """
        groupby_kwargs = {k: kwargs.pop(k) for k in _GROUPBY_ARGS if k in kwargs}
        options, unknown = split_kwargs(kwargs)
        if unknown:
            raise TypeError(
                f"df.eugo.groupby() got unexpected arguments {sorted(unknown)}; it takes pandas' "
                f"groupby arguments {list(_GROUPBY_ARGS)}, partitions=, progress=, shared= and "
                "task options such as num_cpus=."
            )
        return GroupBy(self, by, groupby_kwargs, partitions, progress, shared, options)


class SeriesAccessor(_Base):
    """``series.eugo.map(fn)``.

    >>> df["text"].eugo.map(len)                                         # doctest: +SKIP
    """

    def map(
        self,
        fn: Callable[..., Any],
        na_action: str | None = None,
        *,
        partitions: int | str = "auto",
        progress: bool | None = None,
        shared: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Like ``series.map(fn)``, with the values split into partitions.

        >>> s.eugo.map(lambda x: x ** 2, partitions=4)                       # doctest: +SKIP
        """
        options, fn_kwargs = split_kwargs(kwargs)
        pandas_kwargs = {"na_action": na_action, **fn_kwargs}
        call = Call("map", fn, (), pandas_kwargs, partitions, progress, shared, options)
        series = self._obj

        def local() -> Any:
            return series.map(fn, **pandas_kwargs, **call.shared)

        try:
            parts = call.run_rows(series, local)
            if not isinstance(parts, list):
                return parts
            return as_from(combine(parts, pointwise_cast(series)), series, "map", call.same_index)
        finally:
            self._finish(call)


class GroupBy:
    """``df.eugo.groupby(keys)``: ``.apply(fn)`` and column selection (``[...]``)."""

    def __init__(
        self,
        accessor: FrameAccessor,
        by: Any,
        groupby_kwargs: dict[str, Any],
        partitions: Any,
        progress: bool | None,
        shared: Any,
        options: dict[str, Any],
        selection: Any = None,
    ) -> None:
        self._accessor = accessor
        self._frame = accessor._obj
        self._by = by
        self._kwargs = groupby_kwargs
        self._settings = (partitions, progress, shared, options)
        self._selection = selection
        # Fail now, as pandas does, on keys that do not exist.
        self._pandas()

    def __getitem__(self, key: Any) -> GroupBy:
        return GroupBy(self._accessor, self._by, self._kwargs, *self._settings, selection=key)

    def _pandas(self) -> Any:
        """The same groupby in pandas (for the fallback)."""
        grouped = self._frame.groupby(self._by, **self._kwargs)
        return grouped if self._selection is None else grouped[self._selection]

    def _key_columns(self) -> list[Any]:
        """Columns the keys name: pandas leaves them out of the groups it passes."""
        by = self._by if isinstance(self._by, list) else [self._by]
        columns = []
        for key in by:
            if isinstance(key, pd.Grouper):
                key = key.key
            try:
                if key is not None and key in self._frame.columns:
                    columns.append(key)
            except TypeError:  # arrays, Series: not labels
                pass
        return columns

    def apply(
        self, fn: Callable[..., Any], *args: Any, include_groups: bool = False, **kwargs: Any
    ) -> Any:
        """Like pandas' ``groupby(...).apply(fn)``; a group is never split across partitions.

        >>> df.eugo.groupby("k").apply(lambda g: g.v.sum())                 # doctest: +SKIP
        """
        if include_groups:
            raise ValueError(
                "include_groups=True is no longer allowed in pandas 3; select the key columns "
                "you need in the function, or group by a copy of them."
            )
        partitions, progress, shared, options = self._settings
        call = Call("groupby.apply", fn, args, kwargs, partitions, progress, shared, options)
        selected = self._selected_data()
        proxy = self._proxy(selected)

        def local() -> Any:
            one_column = self._selection is not None and not isinstance(self._selection, list)
            extra = {} if one_column else {"include_groups": False}
            return self._pandas().apply(fn, *args, **extra, **kwargs, **call.shared)

        try:
            split = self._split(proxy, selected)
            by_code = call.run_groups(split, local)
            if not isinstance(by_code, list):
                return by_code
            return self._combine(proxy, by_code, selected, fn, args, kwargs, call.shared)
        finally:
            self._accessor._finish(call)

    # -- the steps -------------------------------------------------------------------------
    def _selected_data(self) -> Any:
        """What each group passes to the function: the selection, else the non-key columns."""
        if self._selection is not None:
            return self._frame[self._selection]
        # pandas' own exclusions: the key columns, and columns whose Series itself is a key
        # (``groupby([df.a, df.b.dt.date])`` leaves out ``a`` but keeps ``b``).
        keys = set(self._pandas().exclusions)
        return self._frame[[c for c in self._frame.columns if c not in keys]]

    def _proxy(self, selected: Any) -> Any:
        """The same groupby over a slim frame: the key columns plus one-byte stand-ins.

        pandas joins the results through it (``apply`` on the proxy hands back the values the
        workers computed), so index, order, ``group_keys`` and ``as_index`` follow pandas itself.
        """
        # The frame's own class and metadata (``_metadata``, ``attrs``): pandas builds the
        # result from the proxy, so a subclass and its attributes come back as they would.
        proxy = self._frame.iloc[:, []]
        proxy.index = self._frame.index  # the same object, as pandas' own result would carry
        for column in self._key_columns():
            proxy[column] = self._frame[column]
        names = [selected.name] if isinstance(selected, pd.Series) else list(selected.columns)
        for column in names:
            if column not in proxy.columns:
                proxy[column] = np.zeros(len(proxy), dtype=np.int8)
        self._proxy_frame = proxy
        grouped = proxy.groupby(self._by, **self._kwargs)
        return grouped if self._selection is None else grouped[self._selection]

    def _split(self, proxy: Any, selected: Any) -> GroupSplit:
        base_kwargs = {k: v for k, v in self._kwargs.items() if k != "as_index"}
        base = self._proxy_frame.groupby(self._by, **base_kwargs)
        codes = base.ngroup().to_numpy(dtype=np.float64, na_value=-1).astype(np.int64)
        sizes_all = base.size()
        observed = sizes_all[sizes_all.to_numpy() > 0]
        sizes = np.bincount(codes[codes >= 0], minlength=len(observed)).astype(np.int64)
        return GroupSplit(selected, codes, sizes, list(observed.index))

    def _combine(
        self,
        proxy: Any,
        by_code: list[Any],
        selected: Any,
        fn: Any,
        args: tuple,
        kwargs: dict,
        shared: dict[str, Any],
    ) -> Any:
        values = iter(by_code)

        def computed(group: Any) -> Any:
            if len(group) == 0:  # an unobserved category: pandas passes an empty group
                empty = selected.iloc[:0]
                object.__setattr__(empty, "name", group.name)
                return fn(empty, *args, **kwargs, **shared)
            return next(values)

        one_column = isinstance(proxy, pd.core.groupby.SeriesGroupBy)
        extra = {} if one_column else {"include_groups": False}
        result = proxy.apply(computed, **extra)
        if by_code and all(value is None for value in by_code) and result.ndim == selected.ndim:
            # Nothing returned for any group: pandas gives the data's columns with their dtypes,
            # which the proxy's one-byte stand-ins do not have.
            dtypes = selected.dtypes if selected.ndim == 2 else selected.dtype
            result = result.astype(dtypes)
        return result
