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

    from ._accessor import FrameAccessor, SeriesAccessor

    pd.api.extensions.register_dataframe_accessor("eugo")(FrameAccessor)
    pd.api.extensions.register_series_accessor("eugo")(SeriesAccessor)
    _registered = True


def last_plan() -> object:
    """How the last ``.eugo`` call ran and why (None before the first); ``print()`` it.

    >>> from eugo_jupyter.pandas import last_plan
    >>> print(last_plan())                                       # doctest: +SKIP
    6 partitions of about 333,334 rows on 2 slot(s): a sample took 21 µs per row, ...
    """
    import sys

    accessor = sys.modules.get(__name__ + "._accessor")
    return accessor.last_plan() if accessor is not None else None
