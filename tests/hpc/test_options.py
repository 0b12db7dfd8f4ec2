"""Call-site options: every bad value raises before submission with a sentence naming the fix."""

from __future__ import annotations

import math

import pytest

from eugo_jupyter.exceptions import OptionsError
from eugo_jupyter.hpc._options import (
    RAY_ACTOR_OPTIONS,
    RAY_TASK_OPTIONS,
    format_options,
    parse_memory,
    request_of,
    validate_options,
)


def test_option_tables_match_the_installed_ray() -> None:
    from ray._common import ray_option_utils

    assert RAY_TASK_OPTIONS == set(ray_option_utils.task_options)
    assert RAY_ACTOR_OPTIONS == set(ray_option_utils.actor_options)


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"num_cpus": 4, "num_gpus": 1}, {"num_cpus": 4, "num_gpus": 1}),
        ({"num_gpus": 0.25}, {"num_gpus": 0.25}),
        ({"num_gpus": 2.0}, {"num_gpus": 2}),
        ({"num_cpus": 0.5}, {"num_cpus": 0.5}),
        ({"memory": "512MiB"}, {"memory": 512 * 2**20}),
        ({"memory": "4GB"}, {"memory": 4 * 10**9}),
        ({"memory": "1.5 GiB"}, {"memory": int(1.5 * 2**30)}),
        ({"memory": 1024}, {"memory": 1024}),
        ({"resources": {"TPU": 1}}, {"resources": {"TPU": 1.0}}),
        (
            {"max_retries": -1, "retry_exceptions": [ValueError]},
            {"max_retries": -1, "retry_exceptions": [ValueError]},
        ),
        (
            {"name": "step", "accelerator_type": "A100"},
            {"name": "step", "accelerator_type": "A100"},
        ),
        ({"runtime_env": {"env_vars": {"A": "1"}}}, {"runtime_env": {"env_vars": {"A": "1"}}}),
        ({"num_returns": 2, "num_gpus": None}, {"num_returns": 2}),
    ],
)
def test_valid_options_become_rays(options: dict, expected: dict) -> None:
    assert validate_options(options) == expected


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"num_gpus": 1.5}, "Use num_gpus=1 or num_gpus=2"),
        ({"num_gpus": -0.25}, "fraction between 0 and 1"),
        ({"num_gpus": math.nan}, "fraction between 0 and 1"),
        ({"num_gpus": math.inf}, "fraction between 0 and 1"),
        ({"num_gpus": "1"}, "num_gpus='1' is not allowed"),
        ({"num_gpus": True}, "num_gpus=True is not allowed"),
        ({"num_gpus": 0.00001}, "steps of 0.0001"),
        ({"num_cpus": -1}, "num_cpus must be a number of CPUs, 0 or more"),
        ({"num_cpus": "four"}, "num_cpus must be a number of CPUs"),
        ({"memory": "4 parsecs"}, 'a string such as "512MiB", "4GB"'),
        ({"memory": -5}, "memory must be an int of bytes"),
        ({"memory": 1.5}, "memory must be an int of bytes"),
        ({"resources": {"GPU": 1}}, "use the num_gpus= option"),
        ({"resources": {"TPU": -1}}, "resources['TPU']=-1 is not allowed"),
        ({"resources": ["TPU"]}, "must be a dict of custom resource names"),
        ({"max_retries": 1.5}, "max_retries must be a whole number"),
        ({"retry_exceptions": "yes"}, "retry_exceptions must be True, False, or a list"),
        ({"runtime_env": "pip install x"}, "runtime_env must be a dict"),
        ({"num_cpu": 2}, "Did you mean num_cpus=?"),
        ({"gpus": 1}, "is not an option for a task"),
    ],
)
def test_bad_options_name_the_allowed_values(options: dict, says: str) -> None:
    with pytest.raises(OptionsError) as caught:
        validate_options(options)
    assert says in str(caught.value)
    assert isinstance(caught.value, ValueError)  # a plain `except ValueError` also catches it


def test_actor_only_options_are_refused_for_tasks_and_accepted_for_actors() -> None:
    with pytest.raises(OptionsError, match="max_concurrency= is not an option for a task"):
        validate_options({"max_concurrency": 4})
    assert validate_options({"max_concurrency": 4}, "actor") == {"max_concurrency": 4}


def test_parse_memory_units() -> None:
    assert parse_memory("1KiB") == 1024
    assert parse_memory("1kb") == 1000
    assert parse_memory("2TiB") == 2 * 2**40
    assert parse_memory("100") == 100


def test_request_defaults_to_one_cpu_and_no_gpu_for_tasks() -> None:
    assert request_of({}) == {"CPU": 1.0}
    assert request_of({"num_gpus": 0.25}) == {"CPU": 1.0, "GPU": 0.25}
    assert request_of({"num_cpus": 0, "resources": {"TPU": 2}}) == {"TPU": 2.0}
    assert request_of({}, "actor") == {}


def test_format_options_is_the_code_a_user_types() -> None:
    assert (
        format_options({"num_cpus": 4, "num_gpus": 0.25}) == ".options(num_cpus=4, num_gpus=0.25)"
    )
