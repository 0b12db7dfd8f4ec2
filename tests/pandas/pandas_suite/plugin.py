"""A pytest plugin that runs pandas' own shipped tests through the ``.eugo`` accessors.

With ``EUGO_PANDAS_SUITE=route`` (the default), every ``DataFrame.apply(fn, axis=1)``,
``Series.map(fn)`` and ``DataFrameGroupBy.apply(fn)`` that a test makes with a function the
accessors take goes to ``df.eugo.apply``, ``series.eugo.map`` or ``df.eugo.groupby(...).apply``
with a forced split (``partitions=2``), on one local Ray started once for the whole run; every
other call, and the calls the accessors make themselves, stay in pandas. With
``EUGO_PANDAS_SUITE=plain`` nothing is routed, but the calls that would have been are counted,
so the two runs can be compared test by test.

``EUGO_PANDAS_SUITE_REPORT`` names a JSON file that receives, per test id, its outcome and how
many calls were routed (or would have been); beside it, ``<report>.calls`` holds what each of
those calls returned or raised (pickled, with its class, metadata and whether its index is the
input's own object). ``tests/pandas/test_pandas_suite.py`` runs both and compares them;
:data:`IN_PROCESS_ONLY` lists the tests that cannot hold once the function runs on workers,
and why.
"""

from __future__ import annotations

import inspect
import json
import os
import pickle
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

_APPENDS = "appends what the function saw to a list in the test process"
_COUNTS = "counts the function's calls in the test process"
_PRINTS = "counts the lines the function printed in the test process (capsys)"
_STORES = "keeps the groups the function stored in a dict in the test process"

#: Tests that check what the function did in the test process itself (rows it appended to a
#: list there, how often it was called there): on the workers it does so in their processes.
IN_PROCESS_ONLY: dict[str, str] = {
    "tests/apply/test_frame_apply.py::test_apply_function_runs_once": _APPENDS,
    "tests/apply/test_frame_apply.py::test_apply_raw_function_runs_once[python]": _APPENDS,
    **{
        f"tests/apply/test_series_apply.py::test_map_apply_masked_element_types[{dtype}-map]": (
            _APPENDS
        )
        for dtype in ("Int32", "Int64", "Float64", "boolean")
    },
    "tests/series/methods/test_map.py::test_map_datetime_series_passes_scalar_timestamps": (
        _APPENDS
    ),
    "tests/groupby/test_apply.py::test_apply_func_that_appends_group_to_list_without_copy": (
        _APPENDS
    ),
    **{
        f"tests/groupby/test_apply.py::test_group_apply_once_per_group[{case}]": _COUNTS
        for case in (
            "GH2936",
            "GH7739 & GH10519",
            "GH10519",
            "GH2656",
            "GH12155",
            "GH20084",
            "GH21417",
        )
    },
    "tests/groupby/test_apply.py::test_group_apply_once_per_group2": _PRINTS,
    "tests/groupby/test_apply.py::test_groupby_apply_store_copy": _STORES,
    "tests/groupby/test_groupby.py::test_group_name_available_in_inference_pass": _APPENDS,
}

_MODE = os.environ.get("EUGO_PANDAS_SUITE", "route")
_ROUTE = _MODE == "route"
# The accessors' own keywords and the task options: a function keyword of that name stays with
# pandas (the accessor would take it for itself).
_RESERVED: set[str] = set()
_state = {"depth": 0, "routed": 0}
_results: dict[str, dict[str, Any]] = {}
# Per test, what each routed call returned (or raised), to compare the two runs call by call.
_calls: dict[str, list[dict[str, Any]]] = {}
_current: list[list[dict[str, Any]]] = [[]]


def _record(outcome: Any, raised: BaseException | None, source: Any) -> None:
    if raised is not None:
        entry = {"raised": [k.__name__ for k in type(raised).__mro__]}
    else:
        index = getattr(outcome, "index", None)
        entry = {
            "type": type(outcome).__qualname__,
            "same_index": index is not None and index is source.index,
            "metadata": {k: repr(getattr(outcome, k, None)) for k in _metadata_of(outcome)},
        }
        try:  # pickled now: the test may change the result in place afterwards
            entry["pickled"] = pickle.dumps(outcome)
        except Exception:  # noqa: BLE001 - a result that cannot be stored is compared by repr
            entry["repr"] = repr(outcome)
    _current[0].append(entry)


def _metadata_of(value: Any) -> list[str]:
    names = list(getattr(type(value), "_metadata", []))
    return [n for n in names if n not in ("_name", "name")] + (["attrs"] if names else [])


def _is_function(func: Any) -> bool:
    return callable(func) and not isinstance(func, (str, list, dict, tuple, Mapping, type))


def _own(kwargs: Mapping[str, Any]) -> bool:
    return not (set(kwargs) & _RESERVED)


def _route(original: Callable[..., Any], routable: Callable[..., Any], run: Callable[..., Any]):
    signature = inspect.signature(original)

    def routed(*args: Any, **kwargs: Any) -> Any:
        if _state["depth"]:
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if not routable(bound.arguments):
            return original(*args, **kwargs)
        _state["routed"] += 1
        source = bound.arguments["self"]
        if not hasattr(source, "index"):
            source = source.obj  # a groupby's frame
        _state["depth"] += 1
        try:
            outcome = run(bound.arguments) if _ROUTE else original(*args, **kwargs)
        except Exception as exc:
            _record(None, exc, source)
            raise
        finally:
            _state["depth"] -= 1
        _record(outcome, None, source)
        return outcome

    # pandas points its warnings at the first frame outside pandas (find_stack_level): this
    # wrapper's frame counts as pandas', so a warning passed through still names the test.
    routed.__code__ = routed.__code__.replace(co_filename=original.__code__.co_filename)
    routed.__wrapped__ = original  # type: ignore[attr-defined]
    routed.__name__ = original.__name__
    routed.__qualname__ = original.__qualname__
    routed.__doc__ = original.__doc__
    return routed


def _frame_apply_routable(a: dict[str, Any]) -> bool:
    return (
        a["axis"] in (1, "columns")
        and _is_function(a["func"])
        and a["by_row"] == "compat"
        and a["engine"] in (None, "python")
        and a["engine_kwargs"] is None
        and _own(a["kwargs"])
    )


def _frame_apply(a: dict[str, Any]) -> Any:
    return a["self"].eugo.apply(
        a["func"],
        axis=1,
        raw=a["raw"],
        result_type=a["result_type"],
        args=a["args"],
        partitions=2,
        **a["kwargs"],
    )


def _series_map_routable(a: dict[str, Any]) -> bool:
    return (
        _is_function(a["func"])
        and a["engine"] is None
        and "arg" not in a["kwargs"]
        and _own(a["kwargs"])
    )


def _series_map(a: dict[str, Any]) -> Any:
    return a["self"].eugo.map(a["func"], na_action=a["na_action"], partitions=2, **a["kwargs"])


def _groupby_apply_routable(a: dict[str, Any]) -> bool:
    gb = a["self"]
    return (
        _is_function(a["func"])
        and not a["include_groups"]
        and _own(a["kwargs"])
        and (gb._selection is None or isinstance(gb._selection, list))
    )


def _groupby_apply(a: dict[str, Any]) -> Any:
    gb = a["self"]
    grouped = gb.obj.eugo.groupby(
        gb.keys,
        level=gb.level,
        as_index=gb.as_index,
        sort=gb.sort,
        group_keys=gb.group_keys,
        observed=gb.observed,
        dropna=gb.dropna,
        partitions=2,
    )
    if gb._selection is not None:
        grouped = grouped[gb._selection]
    return grouped.apply(a["func"], *a["args"], **a["kwargs"])


def pytest_configure(config: pytest.Config) -> None:
    import pandas as pd
    from pandas.core.groupby.generic import DataFrameGroupBy

    import eugo_jupyter.pandas
    from eugo_jupyter.pandas._run import OPTION_KEYS

    eugo_jupyter.pandas.register()
    _RESERVED.update(OPTION_KEYS | {"partitions", "progress", "shared"})
    pd.DataFrame.apply = _route(pd.DataFrame.apply, _frame_apply_routable, _frame_apply)
    pd.Series.map = _route(pd.Series.map, _series_map_routable, _series_map)
    DataFrameGroupBy.apply = _route(DataFrameGroupBy.apply, _groupby_apply_routable, _groupby_apply)
    if _ROUTE:
        import eugo_jupyter as eugo

        for key in ("RAY_ADDRESS", "EUGO_CLUSTER_ADDRESS"):
            os.environ.pop(key, None)
        eugo.hpc.init(num_cpus=2)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _ROUTE:
        import eugo_jupyter as eugo

        eugo.hpc.shutdown()
    path = os.environ.get("EUGO_PANDAS_SUITE_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(_results, out, indent=1, sort_keys=True)
        with open(path + ".calls", "wb") as calls:
            pickle.dump(_calls, calls)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    _state["routed"] = 0
    _results[item.nodeid] = {"outcome": "passed", "routed": 0}
    _current[0] = _calls.setdefault(item.nodeid, [])
    try:
        return (yield)
    finally:
        _results[item.nodeid]["routed"] = _state["routed"]
        if not _calls[item.nodeid]:
            del _calls[item.nodeid]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "routed": 0})
    if hasattr(report, "wasxfail"):
        entry["outcome"] = "xfailed" if report.skipped else "xpassed"
    elif report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["message"] = str(report.longrepr)[-3000:]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
