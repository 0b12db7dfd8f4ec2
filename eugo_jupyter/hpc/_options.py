"""Per-call resource options: validation at the call site and translation into Ray's options.

Every rule here raises :class:`~eugo_jupyter.exceptions.OptionsError` with a sentence that names
the allowed values, *before* anything is submitted. The same rules serve the API, the magics and
the options widget. :func:`validate_options` is pure (it never asks the cluster);
:func:`resolve_options` adds the one rule that must: ``gpu_memory`` sized into ``num_gpus`` on
the cluster's GPUs, through the sizer that ``gpu`` registers in :mod:`eugo_jupyter._hooks`.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Mapping
from typing import Any

from .. import _hooks
from .._units import parse_memory
from ..exceptions import OptionsError

__all__ = [
    "OPTIMIZE_VALUES",
    "check_optimize",
    "check_optimize_request",
    "format_options",
    "parse_memory",
    "request_of",
    "resolve_options",
    "optimize_mode",
    "split_optimize",
    "validate_options",
]

#: The values ``optimize=`` takes (False is the default: the plain function runs).
OPTIMIZE_VALUES = (False, True, "cpu", "gpu")

#: The options this project documents; anything else Ray's ``.options()`` takes is passed through.
DOCUMENTED = (
    "num_cpus",
    "num_gpus",
    "memory",
    "resources",
    "max_retries",
    "retry_exceptions",
    "accelerator_type",
    "runtime_env",
    "name",
)

# Ray's own option tables (``ray._common.ray_option_utils``), copied as names so that validating
# an option never imports Ray. ``tests/hpc/test_options.py`` checks they still match Ray's.
RAY_TASK_OPTIONS = frozenset(
    {
        "_generator_backpressure_num_objects", "_labels", "_num_objects_per_yield",
        "accelerator_type", "enable_task_events", "fallback_strategy", "label_selector",
        "max_calls", "max_retries", "memory", "name", "num_cpus", "num_gpus", "num_returns",
        "object_store_memory", "placement_group", "placement_group_bundle_index",
        "placement_group_capture_child_tasks", "resources", "retry_exceptions", "runtime_env",
        "scheduling_strategy",
    }
)  # fmt: skip
RAY_ACTOR_OPTIONS = frozenset(
    {
        "_actor_generator_backpressure_num_objects", "_labels", "accelerator_type",
        "allow_out_of_order_execution", "concurrency_groups", "enable_task_events",
        "enable_tensor_transport", "fallback_strategy", "get_if_exists", "label_selector",
        "lifetime", "max_concurrency", "max_pending_calls", "max_restarts", "max_task_retries",
        "memory", "name", "namespace", "num_cpus", "num_gpus", "object_store_memory",
        "placement_group", "placement_group_bundle_index", "placement_group_capture_child_tasks",
        "resources", "runtime_env", "scheduling_strategy",
    }
)  # fmt: skip

# Ray keeps resource quantities in units of 1/10000.
_RESOURCE_PRECISION = 1e-4


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _quantity(key: str, value: Any, what: str) -> float:
    """A finite, non-negative real number, or an OptionsError naming ``what`` is allowed."""
    if not _is_real(value):
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be {what}.")
    number = float(value)
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be {what}.")
    if number and number < _RESOURCE_PRECISION:
        raise OptionsError(
            f"{key}={value!r} is too small: Ray counts resources in steps of 0.0001; "
            f"{key} must be {what}."
        )
    return number


def _check_num_gpus(value: Any) -> float | int:
    what = "a fraction between 0 and 1 (such as 0.25 or 0.5) or a whole number (0, 1, 2, ...)"
    number = _quantity("num_gpus", value, what)
    if number > 1 and not number.is_integer():
        raise OptionsError(
            f"num_gpus={value!r} is not allowed: a task can share one GPU (a fraction below 1, "
            f"such as 0.25) or hold whole GPUs (1, 2, ...), never part of a second one. "
            f"Use num_gpus={math.floor(number)} or num_gpus={math.ceil(number)}."
        )
    return int(number) if number.is_integer() else number


def _check_num_cpus(value: Any) -> float | int:
    number = _quantity("num_cpus", value, "a number of CPUs, 0 or more (such as 1, 4 or 0.5)")
    return int(number) if number.is_integer() else number


def _check_resources(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise OptionsError(
            f"resources={value!r} is not allowed: resources must be a dict of custom resource "
            'names to amounts, such as {"TPU": 1} or {"special_disk": 0.5}.'
        )
    checked: dict[str, float] = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not name:
            raise OptionsError(f"resources: {name!r} is not a resource name; use a string.")
        if name in ("CPU", "GPU", "memory"):
            fix = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}[name]
            raise OptionsError(
                f'resources={{"{name}": ...}} is not allowed: use the {fix}= option for {name}.'
            )
        checked[name] = _quantity(f"resources[{name!r}]", amount, "a number, 0 or more")
    return checked


def _check_retry_exceptions(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, type) and issubclass(v, BaseException) for v in value
    ):
        return list(value)
    raise OptionsError(
        f"retry_exceptions={value!r} is not allowed: retry_exceptions must be True, False, or "
        "a list of exception classes such as [ConnectionError]."
    )


def _check_str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be a non-empty string.")
    return value


def _check_count(key: str, value: Any, least: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be {what}.")
    return int(value)


def _check_num_returns(value: Any) -> Any:
    if value in ("dynamic", "streaming"):
        return value
    return _check_count(
        "num_returns", value, 0, 'a whole number, 0 or more, or "streaming" (a generator)'
    )


def _check_lifetime(value: Any) -> str:
    if value in ("detached", "non_detached"):
        return str(value)
    raise OptionsError(
        f'lifetime={value!r} is not allowed: lifetime must be "detached" (the actor outlives '
        'this kernel; stop it with eugo.hpc.kill) or "non_detached" (the default).'
    )


def _check_flag(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be True or False.")
    return value


def _check_runtime_env(value: Any) -> Any:
    if value is None or isinstance(value, Mapping):
        return value
    # Ray also accepts its RuntimeEnv class, which is a dict subclass; anything else is a mistake.
    raise OptionsError(
        f"runtime_env={value!r} is not allowed: runtime_env must be a dict such as "
        '{"pip": ["requests"], "env_vars": {"KEY": "value"}}.'
    )


def check_optimize(value: Any) -> bool | str:
    """``optimize=``: False, True, "cpu" or "gpu"; anything else names the allowed ones.

    >>> check_optimize("cpu")
    'cpu'
    """
    if isinstance(value, bool) or (isinstance(value, str) and value in ("cpu", "gpu")):
        return value
    raise OptionsError(
        f"optimize={value!r} is not allowed: optimize must be False (the default), True "
        '(compile on CPU, and offload to a GPU the call holds when it pays), "cpu" or "gpu".'
    )


def check_optimize_request(options: Mapping[str, Any]) -> None:
    """``optimize="gpu"`` needs a call that holds a GPU.

    >>> check_optimize_request({"optimize": "gpu", "num_gpus": 1})
    """
    if options.get("optimize") == "gpu" and not options.get("num_gpus"):
        raise OptionsError(
            'optimize="gpu" needs a GPU for the call: request one with num_gpus=1 (or a '
            "fraction such as num_gpus=0.25), or use optimize=True to compile on the CPU."
        )


def split_optimize(options: Mapping[str, Any]) -> tuple[dict[str, Any], bool | str | None]:
    """Ray's options, and the call's ``optimize=`` (None when it does not say).

    >>> split_optimize({"num_cpus": 2, "optimize": True})
    ({'num_cpus': 2}, True)
    """
    if "optimize" not in options:
        return dict(options), None
    rest = {k: v for k, v in options.items() if k != "optimize"}
    return rest, options["optimize"]


def optimize_mode(options: Mapping[str, Any]) -> tuple[dict[str, Any], bool | str]:
    """Ray's options and the ``optimize=`` that applies: the call's, else the notebook's.

    >>> optimize_mode({"num_cpus": 1})
    ({'num_cpus': 1}, False)
    """
    check_optimize_request(options)
    rest, mode = split_optimize(options)
    return rest, _hooks.optimize_default if mode is None else mode


_CHECKS = {
    "num_cpus": _check_num_cpus,
    "num_gpus": _check_num_gpus,
    "memory": parse_memory,
    "object_store_memory": lambda v: parse_memory(v, "object_store_memory"),
    "gpu_memory": lambda v: parse_memory(v, "gpu_memory"),
    "resources": _check_resources,
    "max_retries": lambda v: _check_count(
        "max_retries", v, -1, "a whole number, 0 or more, or -1 to retry forever"
    ),
    "retry_exceptions": _check_retry_exceptions,
    "accelerator_type": lambda v: _check_str("accelerator_type", v),
    "name": lambda v: _check_str("name", v),
    "runtime_env": _check_runtime_env,
    "optimize": check_optimize,
    "num_returns": _check_num_returns,
    # An actor's own options, checked as Ray checks them when it creates the actor.
    "max_concurrency": lambda v: _check_count("max_concurrency", v, 1, "a whole number, 1 or more"),
    "max_restarts": lambda v: _check_count(
        "max_restarts", v, -1, "a whole number, 0 or more, or -1 to restart forever"
    ),
    "max_task_retries": lambda v: _check_count(
        "max_task_retries", v, -1, "a whole number, 0 or more, or -1 to retry forever"
    ),
    "max_pending_calls": lambda v: _check_count(
        "max_pending_calls", v, -1, "a whole number, 1 or more, or -1 for no limit"
    ),
    "lifetime": _check_lifetime,
    "namespace": lambda v: _check_str("namespace", v),
    "get_if_exists": lambda v: _check_flag("get_if_exists", v),
}

#: What a bare ``@distribute(...)`` may take before it knows whether it decorates a function or
#: a class; the decorated target is then checked as a task's or an actor's.
_EITHER = RAY_TASK_OPTIONS | RAY_ACTOR_OPTIONS


def validate_options(options: Mapping[str, Any], kind: str = "task") -> dict[str, Any]:
    """Check call-site options and return them in the form Ray's ``.options()`` takes.

    ``kind`` is ``"task"`` or ``"actor"`` (actors accept a different set of Ray options), or
    ``"either"`` for a decorator that has not seen its function or class yet.
    Memory strings become bytes; ``None`` values are dropped (they mean "the default"). Pure: a
    ``gpu_memory`` is checked for its form and kept; :func:`resolve_options` sizes it.

    >>> validate_options({"num_cpus": 4, "num_gpus": 0.25, "memory": "1GiB"})
    {'num_cpus': 4, 'num_gpus': 0.25, 'memory': 1073741824}
    >>> validate_options({"gpu_memory": "6GB"})
    {'gpu_memory': 6000000000}
    >>> validate_options({"max_restarts": 4, "max_concurrency": 2}, "actor")
    {'max_restarts': 4, 'max_concurrency': 2}
    """
    allowed = {"actor": RAY_ACTOR_OPTIONS, "either": _EITHER}.get(kind, RAY_TASK_OPTIONS)
    if kind == "actor" and options.get("optimize") not in (None, False):
        raise OptionsError(
            "optimize= is not an option for an actor: it compiles functions. Call an "
            "optimized function from the actor's method instead (eugo.hpc.optimize(fn, ...) "
            "shows what it does), or pass optimize= to the tasks and maps it runs."
        )
    checked: dict[str, Any] = {}
    for key, value in options.items():
        if key == "optimize" and kind == "actor":
            continue  # optimize=False on an actor: nothing to do
        if key not in allowed and key not in ("gpu_memory", "optimize"):
            raise OptionsError(_unknown_key_message(key, allowed, kind))
        if value is None:
            continue
        check = _CHECKS.get(key)
        checked[key] = check(value) if check else value
    return checked


def resolve_options(options: Mapping[str, Any], kind: str = "task") -> dict[str, Any]:
    """:func:`validate_options`, then ``gpu_memory`` sized into ``num_gpus`` on this cluster.

    What a call site uses before submitting. Without ``gpu_memory`` it asks nothing of the
    cluster.

    >>> resolve_options({"num_cpus": 2})
    {'num_cpus': 2}
    """
    checked = validate_options(options, kind)  # a malformed value fails before the cluster is asked
    if checked.get("gpu_memory") is None:
        return checked
    return validate_options(_hooks.size_gpu_memory(options), kind)


def _unknown_key_message(key: Any, allowed: frozenset[str], kind: str) -> str:
    public = sorted(k for k in allowed if not k.startswith("_"))
    close = difflib.get_close_matches(str(key), public, n=1)
    hint = f" Did you mean {close[0]}=?" if close else ""
    what = {"actor": "an actor", "either": "a task or an actor"}.get(kind, "a task")
    return (
        f"{key}= is not an option for {what}.{hint} The usual ones are "
        f"{', '.join(k for k in DOCUMENTED if k in allowed)}; Ray also takes "
        f"{', '.join(k for k in public if k not in DOCUMENTED)}."
    )


def request_of(options: Mapping[str, Any], kind: str = "task") -> dict[str, float]:
    """The resources one call asks the scheduler for, as Ray counts them.

    A task without ``num_cpus`` asks for one CPU; an actor asks for none while it lives (Ray's
    default, so that idle actors do not hold cores).

    >>> request_of({"num_gpus": 0.25})
    {'CPU': 1.0, 'GPU': 0.25}
    """
    default_cpus = 1.0 if kind == "task" else 0.0
    request: dict[str, float] = {}
    cpus = float(options.get("num_cpus", default_cpus))
    if cpus:
        request["CPU"] = cpus
    gpus = float(options.get("num_gpus", 0) or 0)
    if gpus:
        request["GPU"] = gpus
    if options.get("memory"):
        request["memory"] = float(options["memory"])
    for name, amount in (options.get("resources") or {}).items():
        if amount:
            request[name] = float(amount)
    return request


def format_options(options: Mapping[str, Any]) -> str:
    """The call-site code for these options, as a user would type it.

    >>> format_options({"num_cpus": 4, "num_gpus": 0.25})
    '.options(num_cpus=4, num_gpus=0.25)'
    """
    return ".options(" + ", ".join(f"{k}={v!r}" for k, v in options.items()) + ")"
