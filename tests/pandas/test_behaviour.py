"""What a user sees around the results: errors naming the row or group, shared objects, the
profile report, bad input, and the accessors appearing without eugo_jupyter importing pandas."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from ray import cloudpickle

import eugo_jupyter as eugo
from eugo_jupyter.exceptions import OptionsError, PartitionError

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_local):  # type: ignore[no-untyped-def]
    yield


def frame(n: int = 90) -> pd.DataFrame:
    return pd.DataFrame(
        {"a": np.arange(n), "b": np.linspace(0, 1, n), "k": [f"g{i % 5}" for i in range(n)]},
        index=[f"r{i}" for i in range(n)],
    )


def breaks_on_r70(row):  # type: ignore[no-untyped-def]
    if row.name == "r70":
        raise ValueError("bad row")
    return row.a


def test_a_failing_row_names_its_partition_and_label() -> None:
    with pytest.raises(PartitionError) as info:
        frame().eugo.apply(breaks_on_r70, axis=1, partitions=3)
    error = info.value
    assert error.partition == 2 and error.label == "r70"
    assert "partition 2 (rows 60 to 89), row 'r70'" in str(error)
    assert "bad row" in str(error) and "Traceback" in str(error)
    assert isinstance(error.__cause__, ValueError)


def test_a_failing_value_in_map_names_its_label() -> None:
    s = pd.Series([1.0, np.nan, 0.0, 4.0], index=list("wxyz"))
    with pytest.raises(PartitionError) as info:
        s.eugo.map(lambda v: 1 / v, na_action="ignore", partitions=2)
    assert info.value.label == "y"
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_a_failing_group_names_its_key() -> None:
    def fails_for_g3(g):  # type: ignore[no-untyped-def]
        if g.name == "g3":
            raise KeyError("no g3 here")
        return len(g)

    with pytest.raises(PartitionError) as info:
        frame().eugo.groupby("k", partitions=2).apply(fails_for_g3)
    assert info.value.label == "g3"
    assert "group 'g3'" in str(info.value)


def test_a_failure_in_the_sample_run_here_names_the_row() -> None:
    df = frame(5)
    with pytest.raises(PartitionError, match="sample run here, row 'r0'"):
        df.eugo.apply(lambda row: 1 / 0, axis=1)


def where(row, lookup):  # type: ignore[no-untyped-def]
    return os.getpid(), id(lookup), float(lookup[int(row.a)])


def test_shared_objects_are_stored_once_and_reach_the_function() -> None:
    lookup = np.arange(1_000_000, dtype=np.float64)  # 8 MB
    df = frame(300)
    with eugo.hpc.profile() as run:
        out = df.eugo.apply(where, axis=1, partitions=6, shared={"lookup": lookup})
    assert [v for _, _, v in out] == [float(a) for a in df.a]
    # Every partition run by one worker process saw the very same deserialized object...
    by_pid: dict[int, set[int]] = {}
    for pid, ident, _ in out:
        by_pid.setdefault(pid, set()).add(ident)
    assert all(len(idents) == 1 for idents in by_pid.values())
    # ...and no task carried the array (or the frame) among its arguments.
    report = run.report()
    (row,) = report.functions
    assert row["function"] == "apply(where)"
    assert row["tasks"] == 6
    assert row["arg_bytes_max"] < 100_000


def total(g):  # type: ignore[no-untyped-def]
    return g.b.sum()


def test_profile_records_each_partition_as_a_task() -> None:
    df = frame(200)
    with eugo.hpc.profile() as run:
        df.eugo.groupby("k", partitions=3).apply(total)
    model = run.model()
    tasks = [t for t in model["tasks"] if t["function"] == "groupby.apply(total)"]
    assert len(tasks) == 3
    assert all(t["status"] == "finished" and t["end"] >= t["start"] for t in tasks)


def test_a_huge_group_gets_a_partition_of_its_own() -> None:
    df = pd.DataFrame({"k": ["big"] * 900 + [f"s{i}" for i in range(100)], "v": 1.0})
    result = df.eugo.groupby("k", partitions=4).apply(lambda g: g.v.sum())
    expected = df.groupby("k").apply(lambda g: g.v.sum(), include_groups=False)
    pd.testing.assert_series_equal(result, expected)
    plan = eugo.pandas.last_plan()
    # The big group is alone in the first partition (the longest starts first); the 100 small
    # groups are spread evenly over the other three.
    assert plan.sizes == [900, 34, 33, 33]


def test_bad_input_is_refused_with_the_fix() -> None:
    df = frame()
    with pytest.raises(OptionsError, match="partitions"):
        df.eugo.apply(len, axis=1, partitions=0)
    with pytest.raises(ValueError, match="axis=1"):
        df.eugo.apply(len, axis=0)
    with pytest.raises(OptionsError, match="num_gpus"):
        df.eugo.apply(len, axis=1, num_gpus=1.5)
    with pytest.raises(TypeError, match="shared="):
        df.eugo.map_partitions(len, shared=[1])
    with pytest.raises(TypeError, match="unexpected arguments"):
        df.eugo.groupby("k", bogus=1)
    with pytest.raises(KeyError):
        df.eugo.groupby("nope")
    with pytest.raises(ValueError, match="include_groups=True"):
        df.eugo.groupby("k").apply(len, include_groups=True)


def test_import_does_not_load_pandas_and_the_accessor_appears_when_pandas_does() -> None:
    code = (
        "import sys, eugo_jupyter\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
        "import pandas as pd\n"
        "print(hasattr(pd.DataFrame, 'eugo'), hasattr(pd.Series, 'eugo'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
    code = "import pandas as pd, eugo_jupyter\nprint(hasattr(pd.DataFrame, 'eugo'))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("module", ["_accessor", "_run", "_plan", "_ops"])
def test_the_accessor_appears_whichever_of_our_modules_imports_pandas_first(module: str) -> None:
    # Before: a module of ours that imports pandas first (here _run or _accessor) met the import
    # hook halfway through its own import, the registration failed on the cycle with a warning,
    # and the notebook had no .eugo at all.
    code = (
        "import importlib, warnings, eugo_jupyter\n"
        "warnings.simplefilter('error')\n"
        f"importlib.import_module('eugo_jupyter.pandas.{module}')\n"
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2]})\n"
        "print(type(df.eugo).__name__, type(df['a'].eugo).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["FrameAccessor", "SeriesAccessor"]
