"""The .eugo accessors return exactly what pandas returns, on a real 2-CPU Ray.

Most cases force ``partitions=3`` so the split path runs even on small frames (``"auto"`` would
rightly run them in pandas here); ``test_auto_*`` cover the automatic choice.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal
from ray import cloudpickle

import eugo_jupyter as eugo  # noqa: F401 - registers the accessors
from eugo_jupyter.exceptions import PandasFallbackWarning

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_local):  # type: ignore[no-untyped-def]
    yield


def frame(n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "a": np.arange(n),
            "b": rng.random(n),
            "s": [f"w{i % 7}" for i in range(n)],
            "c": pd.Categorical([("x", "y", "z")[i % 3] for i in range(n)]),
            "k": [("p", "q", None, "r")[i % 4] for i in range(n)],
        }
    )


def check(result, expected) -> None:  # type: ignore[no-untyped-def]
    if isinstance(expected, pd.DataFrame):
        assert_frame_equal(result, expected)
    else:
        assert_series_equal(result, expected)


# -- apply(axis=1) ---------------------------------------------------------------------------
def product(row):  # type: ignore[no-untyped-def]
    return row.a * row.b


def int_or_none(row):  # type: ignore[no-untyped-def]
    # The first partition sees only None, the others ints: pandas infers float64 over the whole.
    return None if row.a < 20 else int(row.a)


def as_series(row):  # type: ignore[no-untyped-def]
    return pd.Series({"double": row.a * 2, "label": f"{row.s}-{row.c}"})


def text(row):  # type: ignore[no-untyped-def]
    return f"{row.s}:{row.a}"


def as_list(row):  # type: ignore[no-untyped-def]
    return [row.a, row.b]


@pytest.mark.parametrize("fn", [product, int_or_none, as_series, text, lambda r: r.a > 30])
def test_apply_matches_pandas(fn) -> None:  # type: ignore[no-untyped-def]
    df = frame()
    check(df.eugo.apply(fn, axis=1, partitions=3), df.apply(fn, axis=1))


def test_apply_result_type_expand_and_raw() -> None:
    df = frame()[["a", "b"]]
    check(
        df.eugo.apply(as_list, axis=1, result_type="expand", partitions=3),
        df.apply(as_list, axis=1, result_type="expand"),
    )
    check(df.eugo.apply(np.sum, axis=1, raw=True, partitions=3), df.apply(np.sum, axis=1, raw=True))


def test_apply_keeps_datetime_and_multiindex_labels() -> None:
    df = frame(30)
    dated = df.set_index(pd.date_range("2024-01-01", periods=30, freq="h", tz="UTC"))
    check(dated.eugo.apply(product, axis=1, partitions=4), dated.apply(product, axis=1))
    multi = df.set_index(["s", "a"])
    twice = lambda r: r.b * 2  # noqa: E731
    check(multi.eugo.apply(twice, axis=1, partitions=4), multi.apply(twice, axis=1))


def test_one_row_and_empty_frames() -> None:
    one = frame(1)
    check(one.eugo.apply(product, axis=1, partitions=3), one.apply(product, axis=1))
    empty = frame(0)
    check(empty.eugo.apply(product, axis=1, partitions=3), empty.apply(product, axis=1))
    check(empty["a"].eugo.map(float, partitions=3), empty["a"].map(float))


def test_function_keywords_and_task_options_are_told_apart() -> None:
    df = frame()

    def scaled(row, factor):  # type: ignore[no-untyped-def]
        return row.a * factor

    check(
        df.eugo.apply(scaled, axis=1, factor=3, num_cpus=1, partitions=3),
        df.apply(scaled, axis=1, factor=3),
    )


# -- series.map ------------------------------------------------------------------------------
def test_map_matches_pandas() -> None:
    df = frame()
    s = df["s"].rename("words")
    check(s.eugo.map(len, partitions=3), s.map(len))
    check(s.eugo.map(str.upper, partitions=3), s.map(str.upper))
    check(df["c"].eugo.map(lambda v: v * 2, partitions=3), df["c"].map(lambda v: v * 2))
    with_nan = pd.Series([1.0, np.nan, 3.0, np.nan, 5.0, 6.0], name="x")
    check(
        with_nan.eugo.map(lambda v: v * 10, na_action="ignore", partitions=3),
        with_nan.map(lambda v: v * 10, na_action="ignore"),
    )
    dates = pd.Series(pd.date_range("2020-01-01", periods=40, freq="D"))
    check(dates.eugo.map(lambda d: d.day_name(), partitions=3), dates.map(lambda d: d.day_name()))


# -- map_partitions --------------------------------------------------------------------------
def test_map_partitions_frames_series_and_scalars() -> None:
    df = frame()
    add = lambda part: part.assign(c2=part.a * part.b)  # noqa: E731
    check(df.eugo.map_partitions(add, partitions=3), add(df))
    check(df.eugo.map_partitions(lambda p: p.b.round(2), partitions=3), df.b.round(2))
    # A scalar per partition: a Series with one value per partition.
    check(df.eugo.map_partitions(len, partitions=3), pd.Series([20, 20, 20]))


# -- groupby.apply ---------------------------------------------------------------------------
def total(g):  # type: ignore[no-untyped-def]
    return g.b.sum()


def top_two(g):  # type: ignore[no-untyped-def]
    return g.nlargest(2, "b")


def doubled(g):  # type: ignore[no-untyped-def]
    return g.assign(b=g.b * 2)


def stats(g):  # type: ignore[no-untyped-def]
    return pd.Series({"n": len(g), "mean": g.b.mean(), "who": g.name})


GROUPBY_CASES = [
    ("k", {}),
    ("k", {"dropna": False}),
    ("k", {"sort": False}),
    ("k", {"sort": False, "dropna": False}),
    ("k", {"group_keys": False}),
    (["s", "k"], {"dropna": False}),
    ("c", {"observed": True}),
    ("c", {"observed": False}),
    ("s", {"as_index": False}),
]


@pytest.mark.parametrize("fn", [total, top_two, doubled, stats])
@pytest.mark.parametrize(("by", "kwargs"), GROUPBY_CASES)
def test_groupby_apply_matches_pandas(by, kwargs, fn) -> None:  # type: ignore[no-untyped-def]
    df = frame()
    expected = df.groupby(by, **kwargs).apply(fn, include_groups=False)
    check(df.eugo.groupby(by, partitions=3, **kwargs).apply(fn), expected)


def test_groupby_by_level_series_selection_and_datetime_keys() -> None:
    df = frame()
    multi = df.set_index(["s", "a"])
    check(
        multi.eugo.groupby(level="s", partitions=3).apply(total),
        multi.groupby(level="s").apply(total, include_groups=False),
    )
    check(
        df.eugo.groupby("k", partitions=3)["b"].apply(lambda s: s.max() - s.min()),
        df.groupby("k")["b"].apply(lambda s: s.max() - s.min()),
    )
    dated = df.assign(day=pd.date_range("2024-01-01", periods=len(df), freq="6h").floor("D"))
    check(
        dated.eugo.groupby("day", partitions=3).apply(total),
        dated.groupby("day").apply(total, include_groups=False),
    )


# -- auto and fallback -----------------------------------------------------------------------
def test_auto_runs_a_small_fast_call_in_pandas_and_says_so() -> None:
    df = frame(500)
    with pytest.warns(PandasFallbackWarning, match=r"500 rows x .* splitting would cost about"):
        result = df.eugo.apply(product, axis=1)
    check(result, df.apply(product, axis=1))
    assert not eugo.pandas.last_plan().distribute


def test_the_fallback_warning_can_be_filtered() -> None:
    df = frame(50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=PandasFallbackWarning)
        check(df["a"].eugo.map(float), df["a"].map(float))


def slow(row):  # type: ignore[no-untyped-def]
    import time

    end = time.thread_time() + 4e-3
    while time.thread_time() < end:
        pass
    return row.a + 1


def test_auto_splits_a_slow_call_and_explains_the_choice() -> None:
    df = frame(1000)  # about 4 s of work
    with warnings.catch_warnings():
        warnings.simplefilter("error", PandasFallbackWarning)
        result = df.eugo.apply(slow, axis=1)
    check(result, df.apply(slow, axis=1))
    plan = eugo.pandas.last_plan()
    assert plan.distribute and 2 <= plan.partitions <= 6
    assert len(plan.measured) == plan.partitions
    assert f"{plan.partitions} partitions" in str(plan)
