"""Parallel pandas: the ``.eugo`` accessors run a dataframe workload in partitions on the cluster.

>>> import eugo_jupyter as eugo
>>> import pandas as pd
>>> df = pd.DataFrame({"a": range(1000), "b": 1.5})
>>> df.eugo.apply(lambda row: row.a * row.b, axis=1)                # doctest: +SKIP
>>> df.eugo.map_partitions(len)                                      # doctest: +SKIP
>>> df["a"].eugo.map(lambda x: x * 2)                                # doctest: +SKIP
>>> df.eugo.groupby("a").apply(lambda g: g.b.sum())                  # doctest: +SKIP

Results equal what pandas itself returns (index, order, columns, dtypes, name). With
``partitions="auto"`` a timed sample decides whether splitting pays and how many partitions to
use; when it does not pay the call runs in pandas here and says so with a
:class:`~eugo_jupyter.exceptions.PandasFallbackWarning`. This package never imports pandas when
``eugo_jupyter`` is imported: see :mod:`._hook`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["last_plan", "register"]

_registered = False


def register() -> None:
    """Register ``DataFrame.eugo`` and ``Series.eugo`` (imports pandas). Idempotent.

    >>> from eugo_jupyter.pandas import register
    >>> register()
    """
    global _registered
    if _registered:
        return
    import pandas as pd

    pd.api.extensions.register_dataframe_accessor("eugo")(_frame_accessor)
    pd.api.extensions.register_series_accessor("eugo")(_series_accessor)
    _registered = True


# The accessors are built on first use, not at registration: registration runs inside pandas'
# own import (see ._hook), which may itself be inside the import of one of our modules, and
# importing ._accessor there would meet that module half-initialized.


def _frame_accessor(obj: Any) -> Any:
    """``df.eugo``: apply, map_partitions and groupby on the cluster (see ._accessor)."""
    from ._accessor import FrameAccessor

    return FrameAccessor(obj)


def _series_accessor(obj: Any) -> Any:
    """``series.eugo``: map on the cluster (see ._accessor)."""
    from ._accessor import SeriesAccessor

    return SeriesAccessor(obj)


def last_plan() -> object:
    """How the last ``.eugo`` call ran and why (None before the first); ``print()`` it.

    >>> from eugo_jupyter.pandas import last_plan
    >>> print(last_plan())                                       # doctest: +SKIP
    6 partitions of about 333,334 rows on 2 slot(s): a sample took 21 µs per row, ...
    """
    import sys

    accessor = sys.modules.get(__name__ + "._accessor")
    return accessor.last_plan() if accessor is not None else None
