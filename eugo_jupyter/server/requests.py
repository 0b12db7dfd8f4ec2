"""Checking request bodies: the shared rules every backend's spec is validated with (400s).

Each backend validates its own part of a ``POST /eugo/clusters`` body with these helpers; a
refused value raises :class:`~eugo_jupyter.exceptions.OptionsError` whose message names the field
and what is allowed, which the routes turn into a 400.

>>> count(2, "nodes", "slurm", 1, 64)
2
>>> name(None, "local")
'local'
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from ..exceptions import OptionsError

__all__ = [
    "LIFETIMES",
    "MIN_OBJECT_STORE",
    "body_kind",
    "check_node_memory",
    "count",
    "keys",
    "lifetime",
    "machine_memory",
    "mapping",
    "name",
    "text",
]

LIFETIMES = ("server", "persistent")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")
#: Ray refuses an object store under 75 MiB (``ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES``).
MIN_OBJECT_STORE = 75 * 1024 * 1024


def keys(body: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """Refuse keys outside ``allowed`` (a typo must not be silently ignored)."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise OptionsError(
            f"Unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
            f"{where}; allowed: {', '.join(allowed)}."
        )


def count(value: Any, key: str, where: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (``2.0`` is accepted, ``True`` and ``2.5`` not)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and (math.isnan(value) or not value.is_integer()))
    ):
        raise OptionsError(
            f"{where}.{key}={value!r} is not allowed: give a whole number from {low} to {high}."
        )
    if not low <= value <= high:
        raise OptionsError(
            f"{where}.{key}={value!r} is out of range: give a whole number from {low} to {high}."
        )
    return int(value)


def mapping(value: Any, where: str, example: str) -> dict[str, Any]:
    """``value`` must be a JSON object; ``example`` shows one in the message."""
    if not isinstance(value, dict):
        raise OptionsError(f"{where} must be an object such as {example}, not {value!r}.")
    return value


def text(value: Any, key: str, where: str, pattern: re.Pattern[str], allowed: str) -> str:
    """A string matching ``pattern``; ``allowed`` says in words what matches."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise OptionsError(f"{where}.{key}={value!r} is not allowed: {allowed}.")
    return value


def name(value: Any, default: str) -> str:
    """A cluster's display name: 1 to 64 plain characters."""
    if value is None:
        return default
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise OptionsError(
            f"name={value!r} is not allowed: use 1 to 64 letters, digits, spaces, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    return value


def lifetime(value: Any) -> str:
    """``"server"`` (stops with the Jupyter server, the default) or ``"persistent"``."""
    if value is None:
        return "server"
    if value not in LIFETIMES:
        raise OptionsError(
            f'lifetime={value!r} is not allowed: "server" (stops with the Jupyter server) or '
            '"persistent" (outlives it; shut it down from the panel).'
        )
    return str(value)


def body_kind(body: Any, kinds: tuple[str, ...]) -> str:
    """The ``kind`` of a launch body, checked against the backends this server has."""
    if not isinstance(body, dict):
        raise OptionsError(
            'The request body must be a JSON object such as {"kind": "local", "head": '
            '{"num_cpus": 2}} or {"kind": "connect", "address": "host:port"}.'
        )
    kind = body.get("kind")
    if kind not in kinds:
        raise OptionsError(
            f"kind={kind!r} is not allowed: use one of {', '.join(map(repr, kinds))}."
        )
    return str(kind)


def machine_memory() -> int:
    """Bytes of memory on this machine (the most a node started here can offer)."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_node_memory(
    memory: int | None, object_store: int | None, where: str, most: int | None = None
) -> None:
    """Refuse a node ``memory``/``object_store_memory`` no node of ``most`` bytes can have.

    ``most`` defaults to this machine's memory (nodes of the local backend run here).

    >>> check_node_memory(10**30, None, "head")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    eugo_jupyter.exceptions.OptionsError: head.memory=1000000000000000000000000000000 is not ...
    """
    most = machine_memory() if most is None else most
    gib = most / 2**30
    if memory is not None and not 0 < memory <= most:
        raise OptionsError(
            f"{where}.memory={memory} is not a size a node can have: give 1 to {most} bytes "
            f"(at most {gib:.1f} GiB, the node's machine memory), or leave it out to let Ray "
            "measure it."
        )
    if object_store is not None and not MIN_OBJECT_STORE <= object_store <= most:
        raise OptionsError(
            f"{where}.object_store_memory={object_store} is out of range: Ray needs at least "
            f"{MIN_OBJECT_STORE} bytes (75 MiB) and a node has at most {most} bytes "
            f"({gib:.1f} GiB); give a size between them, or leave it out."
        )
