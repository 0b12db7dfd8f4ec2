"""pandas' own shipped tests pass with the calls the accessors support routed to ``.eugo``.

Two runs of the same pandas test files, each in its own pytest process with
``tests/pandas/pandas_suite/plugin.py``: a plain one (pandas alone, noting which tests make a
call the accessors take), then a routed one of those tests, where ``DataFrame.apply(axis=1)``,
``Series.map`` and ``DataFrameGroupBy.apply`` go to ``.eugo`` with ``partitions=2`` on one local
Ray. Every routed test that passes on pandas must pass routed, except the listed in-process ones;
and every routed call must return what the plain run's call returned: the same values, dtypes,
class, metadata, index types and levels, the input's own index object where pandas gives it, and
an exception of pandas' type where pandas raised.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.pandas.pandas_suite.plugin import IN_PROCESS_ONLY

ROOT = Path(__file__).resolve().parents[2]
PANDAS = Path(pd.__file__).parent
#: pandas' test files that exercise apply(axis=1), map and groupby.apply (numba's are left out).
FILES = [
    "tests/apply/test_frame_apply.py",
    "tests/apply/test_series_apply.py",
    "tests/apply/test_invalid_arg.py",
    "tests/series/methods/test_map.py",
    "tests/frame/test_subclass.py",
    "tests/groupby/test_apply.py",
    "tests/groupby/test_groupby_subclass.py",
    "tests/groupby/test_grouping.py",
    "tests/groupby/test_groupby.py",
]


def _pytest(mode: str, report: Path, targets: list[str]) -> dict[str, dict[str, Any]]:
    """One pytest process over pandas' tests with the plugin; its per-test report."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "EUGO_CLUSTER_ADDRESS")}
    env.update(
        EUGO_PANDAS_SUITE=mode,
        EUGO_PANDAS_SUITE_REPORT=str(report),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        RAY_USAGE_STATS_ENABLED="0",
    )
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(ROOT / "tests/pandas/pandas_suite/pytest.ini"),
        f"--rootdir={PANDAS}",
        f"--confcutdir={PANDAS}",
        "-p",
        "tests.pandas.pandas_suite.plugin",
        "-q",
        "--tb=short",
        *targets,
    ]
    done = subprocess.run(
        args, cwd=report.parent, env=env, capture_output=True, text=True, check=False
    )
    assert report.exists(), f"pytest ({mode}) wrote no report:\n{done.stdout[-3000:]}"
    return json.loads(report.read_text())


def _calls(report: Path) -> dict[str, list[dict[str, Any]]]:
    with open(str(report) + ".calls", "rb") as saved:
        return pickle.load(saved)


def _difference(plain: dict[str, Any], routed: dict[str, Any]) -> str | None:
    """What a routed call returned that the plain call did not, in words (None: the same)."""
    if "raised" in plain or "raised" in routed:
        if "raised" not in plain or "raised" not in routed:
            return f"raised {routed.get('raised', ['nothing'])[0]} where pandas raised " + str(
                plain.get("raised", ["nothing"])[0]
            )
        if plain["raised"][0] not in routed["raised"]:
            return f"raised {routed['raised'][0]}, not an instance of {plain['raised'][0]}"
        return None
    for key in ("type", "same_index", "metadata"):
        if plain[key] != routed[key]:
            return f"{key}: {routed[key]!r} where pandas gives {plain[key]!r}"
    if "pickled" not in plain or "pickled" not in routed:
        return None if plain.get("repr") == routed.get("repr") else "a different repr"
    left, right = pickle.loads(routed["pickled"]), pickle.loads(plain["pickled"])
    strict = {"check_exact": True, "check_index_type": True, "check_flags": True}
    try:
        if isinstance(right, pd.DataFrame):
            pd.testing.assert_frame_equal(left, right, check_column_type=True, **strict)
        elif isinstance(right, pd.Series):
            pd.testing.assert_series_equal(left, right, **strict)
        elif repr(left) != repr(right):
            return f"{left!r} where pandas gives {right!r}"
    except AssertionError as exc:
        return str(exc).strip().replace("\n", " ")[:300]
    return None


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    assert (PANDAS / FILES[0]).exists(), (
        f"this pandas ({pd.__version__}) was installed without its tests; install the wheel "
        "from PyPI, which ships pandas/tests."
    )
    folder = tmp_path_factory.mktemp("pandas-suite")
    plain = _pytest("plain", folder / "plain.json", [str(PANDAS / f) for f in FILES])
    routed_ids = sorted(k for k, v in plain.items() if v["routed"] and v["outcome"] == "passed")
    # Only the tests that make a routed call run again: the others do the same in both runs.
    routed = _pytest("route", folder / "route.json", [str(PANDAS / t) for t in routed_ids])
    calls = (_calls(folder / "plain.json"), _calls(folder / "route.json"))
    return {"plain": plain, "ids": routed_ids, "routed": routed, "calls": calls}


def test_the_routed_tests_pass_except_the_in_process_ones(runs: dict[str, Any]) -> None:
    ids, routed = runs["ids"], runs["routed"]
    outcomes = {i: routed.get(i, {"outcome": "not run"})["outcome"] for i in ids}
    failed = {
        i: routed[i].get("message", outcomes[i])[-1500:]
        for i in ids
        if outcomes[i] != "passed" and i not in IN_PROCESS_ONLY
    }
    assert not failed, "\n\n".join(f"{i}:\n{m}" for i, m in failed.items())
    # The list names routed tests that still fail for its reason: nothing stale, nothing else.
    stale = sorted(i for i in IN_PROCESS_ONLY if outcomes.get(i) != "failed")
    assert not stale, f"listed but not failing when routed: {stale}"
    passed = sum(outcome == "passed" for outcome in outcomes.values())
    plain = runs["plain"]
    on_pandas = sum(v["outcome"] == "passed" for v in plain.values())
    print(
        f"\npandas' own tests: {len(plain)} collected, {on_pandas} pass on pandas; of those "
        f"{len(ids)} routed, {passed} pass routed, {len(IN_PROCESS_ONLY)} excepted (in-process "
        "side effects)"
    )
    assert len(ids) > 300  # the routing took effect: the counts are not vacuous


def test_every_routed_call_returns_what_pandas_returns(runs: dict[str, Any]) -> None:
    plain_calls, routed_calls = runs["calls"]
    differences = []
    compared = 0
    for test_id in runs["ids"]:
        if test_id in IN_PROCESS_ONLY:
            continue
        plain, routed = plain_calls.get(test_id, []), routed_calls.get(test_id, [])
        assert len(plain) == len(routed), f"{test_id}: {len(routed)} calls, pandas {len(plain)}"
        for number, (p, r) in enumerate(zip(plain, routed, strict=True)):
            compared += 1
            difference = _difference(p, r)
            if difference:
                differences.append(f"{test_id} call {number}: {difference}")
    assert not differences, "\n".join(differences)
    print(f"\n{compared} routed calls returned what pandas returns")
    assert compared > 400  # the calls were recorded: the comparison is not vacuous
