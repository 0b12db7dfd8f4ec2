"""The differences pandas' own tests found (tests/pandas/test_pandas_suite.py), each pinned here.

Every case forces a split (``partitions=2``) on a real 2-CPU Ray and compares with what pandas
itself returns for the same call: dtypes, class and metadata, the index object, the exception
type a user catches, and the index levels.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal
from ray import cloudpickle

from eugo_jupyter.exceptions import PartitionError

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_local):  # type: ignore[no-untyped-def]
    yield


def frame(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "k": [("p", "q", "r")[i % 3] for i in range(n)],
            "a": np.arange(n),
            "b": np.linspace(0, 1, n),
            "s": [f"w{i}" for i in range(n)],
        }
    )


# -- 1. a function that returns None for every group ---------------------------------------------
def nothing(group):  # type: ignore[no-untyped-def]
    return None


def test_groupby_apply_returning_none_everywhere_keeps_the_data_dtypes() -> None:
    df = frame()
    result = df.eugo.groupby("k", partitions=2).apply(nothing)
    expected = df.groupby("k").apply(nothing)
    assert list(result.dtypes) == list(expected.dtypes)  # int64, float64, str: not int8
    assert_frame_equal(result, expected)
    selected = df.eugo.groupby("k", partitions=2)[["b"]].apply(nothing)
    assert_frame_equal(selected, df.groupby("k")[["b"]].apply(nothing))


# -- 2. map(na_action="ignore") where a partition holds only missing values ----------------------
def same(value):  # type: ignore[no-untyped-def]
    return value


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("int64[pyarrow]", 1),
        ("double[pyarrow]", 1.5),
        ("string[pyarrow]", "a"),
        ("str", "a"),
        ("Int64", 1),
        ("boolean", True),
    ],
)
def test_map_keeps_the_dtype_the_whole_would_have_where_a_partition_is_all_missing(
    dtype: str, value: object
) -> None:
    s = pd.Series([pd.NA, pd.NA, value, value], dtype=dtype)  # partition 0: missing only
    result = s.eugo.map(same, na_action="ignore", partitions=2)
    expected = s.map(same, na_action="ignore")
    assert result.dtype == expected.dtype
    assert_series_equal(result, expected)


# -- 3. subclasses and their _metadata -----------------------------------------------------------
class TaggedSeries(pd.Series):
    _metadata = ["tag", "name"]

    @property
    def _constructor(self):  # type: ignore[no-untyped-def]
        return TaggedSeries

    @property
    def _constructor_expanddim(self):  # type: ignore[no-untyped-def]
        return TaggedFrame


class TaggedFrame(pd.DataFrame):
    _metadata = ["tag"]

    @property
    def _constructor(self):  # type: ignore[no-untyped-def]
        return TaggedFrame

    @property
    def _constructor_sliced(self):  # type: ignore[no-untyped-def]
        return TaggedSeries


def tagged() -> TaggedFrame:
    df = TaggedFrame(frame())
    df.tag = "kept"
    return df


def tag_of(group):  # type: ignore[no-untyped-def]
    return group.tag


def column_sums(group):  # type: ignore[no-untyped-def]
    return group[["a", "b"]].sum()


def test_groupby_apply_keeps_the_subclass_and_its_metadata() -> None:
    df = tagged()
    # pandas finalizes a frame of results with the input's metadata, a Series of scalars not.
    for fn, tag in ((tag_of, None), (column_sums, "kept")):
        result = df.eugo.groupby("k", partitions=2).apply(fn)
        expected = df.groupby("k").apply(fn)
        assert type(result) is type(expected) and type(result) in (TaggedSeries, TaggedFrame)
        assert getattr(result, "tag", None) == getattr(expected, "tag", None) == tag
        if isinstance(expected, pd.DataFrame):
            assert_frame_equal(result, expected)
        else:
            assert_series_equal(result, expected)


def double_a(row):  # type: ignore[no-untyped-def]
    return row.a * 2


def test_apply_and_map_keep_the_subclass_and_its_metadata() -> None:
    df = tagged()
    result = df.eugo.apply(double_a, axis=1, partitions=2)
    expected = df.apply(double_a, axis=1)
    assert type(result) is type(expected) is TaggedSeries
    assert result.tag == expected.tag == "kept"
    assert_series_equal(result, expected)
    s = df["a"]
    assert s.tag == "kept"
    mapped = s.eugo.map(lambda v: v + 1, partitions=2)
    assert type(mapped) is TaggedSeries and mapped.tag == "kept"
    # Values of differing dtypes per partition are inferred again: still the subclass.
    mixed = s.eugo.map(lambda v: None if v < 6 else v, partitions=2)
    assert type(mixed) is TaggedSeries and mixed.tag == "kept"
    assert_series_equal(mixed, s.map(lambda v: None if v < 6 else v))


# -- 4. the input's own Index object ---------------------------------------------------------------
def test_the_result_carries_the_inputs_own_index_object_as_pandas_does() -> None:
    df = frame().set_index("s")
    applied = df.eugo.apply(double_a, axis=1, partitions=2)
    assert df.apply(double_a, axis=1).index is df.index
    assert applied.index is df.index
    # A frame of results: pandas builds a new (equal) index, and so do the accessors.
    pair = lambda row: [row.a, row.b]  # noqa: E731
    expanded = df.eugo.apply(pair, axis=1, result_type="expand", partitions=2)
    assert df.apply(pair, axis=1, result_type="expand").index is not df.index
    assert expanded.index is not df.index and expanded.index.equals(df.index)
    s = df["a"]
    assert s.map(str).index is s.index
    assert s.eugo.map(str, partitions=2).index is s.index


# -- 5. a raising function raises its own exception type, with the partition named ---------------
def missing_key(row):  # type: ignore[no-untyped-def]
    if row.a == 9:
        return row["no such column"]
    return row.a


def test_a_raising_function_raises_its_own_type_and_a_partition_error() -> None:
    df = frame()
    try:
        df.eugo.apply(missing_key, axis=1, partitions=2)
    except KeyError as caught:  # what a user's `except KeyError:` around df.apply catches
        error = caught
    assert isinstance(error, PartitionError)
    assert error.partition == 1 and error.label == 9
    assert "partition 1 (rows 6 to 11), row 9" in str(error)
    assert "no such column" in str(error)
    assert isinstance(error.__cause__, KeyError)
    with pytest.raises(AttributeError, match="startswith") as info:
        df.eugo.groupby("k", partitions=2).apply(
            lambda g: g.a.iloc[0].startswith("x") if g.name == "p" else 0
        )
    assert isinstance(info.value, PartitionError) and info.value.label == "p"
    assert "group 'p'" in str(info.value)
    with pytest.raises(ZeroDivisionError) as zero:
        df["a"].eugo.map(lambda v: 1 / (v - 3), partitions=2)
    assert isinstance(zero.value, PartitionError) and zero.value.label == 3


class NeedsTwo(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


def raises_needs_two(value):  # type: ignore[no-untyped-def]
    raise NeedsTwo(7, "custom")


def test_a_custom_exception_is_caught_by_its_class_and_keeps_its_attributes() -> None:
    with pytest.raises(NeedsTwo) as info:
        frame()["a"].eugo.map(raises_needs_two, partitions=2)
    assert isinstance(info.value, PartitionError) and info.value.code == 7
    assert type(info.value).__name__ == "PartitionError(NeedsTwo)"


# -- 6. a MultiIndex level made from a RangeIndex --------------------------------------------------
def by_a(group):  # type: ignore[no-untyped-def]
    return group.sort_values("a")


def test_a_multiindex_level_from_a_rangeindex_stays_a_rangeindex() -> None:
    # Groups that are runs of rows: pandas slices them from the frame, so each keeps a RangeIndex
    # and the result's inner level is one; a group copied out of order would lose it.
    df = pd.DataFrame(
        {
            "k": [(0, 1)] * 3 + [(0, 4)] + [(2, 3)] * 4 + [(5,), (6,)],
            "a": [0, 8, 9, 4, 3, 3, 5, 9, 3, 6],
        }
    )
    result = df.eugo.groupby("k", partitions=2).apply(by_a)
    expected = df.groupby("k").apply(by_a)
    assert isinstance(expected.index.levels[1], pd.RangeIndex)
    assert isinstance(result.index.levels[1], pd.RangeIndex)
    assert_frame_equal(result, expected, check_index_type=True)
    # Rows in no particular group order: pandas' own groups are copies, and so are ours.
    shuffled = df.iloc[[0, 3, 1, 4, 8, 2, 5, 9, 6, 7]].reset_index(drop=True)
    assert_frame_equal(
        shuffled.eugo.groupby("k", partitions=2).apply(by_a),
        shuffled.groupby("k").apply(by_a),
        check_index_type=True,
    )
    # Row-wise calls keep the input's MultiIndex as it is.
    index = pd.MultiIndex.from_arrays([pd.RangeIndex(12), [f"x{i % 2}" for i in range(12)]])
    s = pd.Series(np.arange(12), index=index)
    assert isinstance(s.eugo.map(str, partitions=2).index.levels[0], pd.RangeIndex)


# -- and one more the suite found: a key Series that is one of the frame's own columns ------------
def test_groupby_by_column_series_leaves_out_only_the_columns_pandas_leaves_out() -> None:
    df = pd.DataFrame(
        {
            "date": pd.date_range("2010-01-01", freq="12h", periods=6),
            "vals": range(6),
            "let": list("abcdef"),
        }
    )
    keys = [df.let, df.date.dt.date]  # `let` is the frame's own column, the dates are not
    result = df.eugo.groupby(keys, group_keys=False, partitions=2).apply(lambda g: g.iloc[0:])
    expected = df.groupby(keys, group_keys=False).apply(lambda g: g.iloc[0:])
    assert list(expected.columns) == ["date", "vals"]
    assert_frame_equal(result, expected)
