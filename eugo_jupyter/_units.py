"""Byte sizes and durations: parsing what users type ("4GB", "512MiB") and the one way sizes
and durations are shown.

Parsing follows the usual convention: KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers
of 1024. Sizes are always shown in powers of 1024 with one decimal (dropped when it is zero),
so the same amount reads the same in the panel, a report, a warning and a widget.

>>> parse_memory("1.5GiB")
1610612736
>>> format_bytes(1610612736)
'1.5 GiB'
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

from .exceptions import OptionsError

__all__ = ["format_bytes", "format_seconds", "parse_memory"]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
_MEMORY_HELP = (
    'an int of bytes or a string such as "512MiB", "4GB" or "1.5GiB" '
    "(KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024)"
)
_SHOWN = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def parse_memory(value: Any, key: str = "memory") -> int:
    """Bytes from an int or a string with a unit; an ``OptionsError`` naming ``key`` otherwise.

    >>> parse_memory("512MiB")
    536870912
    >>> parse_memory("4GB")
    4000000000
    >>> parse_memory("lots", "gpu_memory")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    eugo_jupyter.exceptions.OptionsError: gpu_memory='lots' is not allowed: gpu_memory must be ...
    """
    if isinstance(value, str):
        match = _MEMORY_RE.match(value)
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise OptionsError(f"{key}={value!r} is not allowed: {key} must be {_MEMORY_HELP}.")
        number = float(match.group(1)) * _UNITS[unit]
    elif _is_real(value) and float(value).is_integer():
        number = float(value)
    else:
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be {_MEMORY_HELP}.")
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise OptionsError(f"{key}={value!r} is not allowed: {key} must be {_MEMORY_HELP}.")
    return int(number)


def format_bytes(size: float) -> str:
    """A byte count as people read it: the largest power-of-1024 unit, one decimal if needed.

    >>> format_bytes(2 * 2**30), format_bytes(150754820096), format_bytes(8_000_000)
    ('2 GiB', '140.4 GiB', '7.6 MiB')
    >>> format_bytes(512), format_bytes(0)
    ('512 B', '0 B')
    """
    for unit, scale in _SHOWN:
        if abs(size) >= scale:
            text = f"{size / scale:.1f}"
            return f"{text.removesuffix('.0')} {unit}"
    return f"{size:.0f} B"


def format_seconds(seconds: float) -> str:
    """A duration for people: µs, ms or s, with one decimal below ten of the unit.

    >>> [format_seconds(s) for s in (4e-7, 4e-5, 0.0062, 0.25, 2.5, 125)]
    ['0.4 µs', '40 µs', '6.2 ms', '250 ms', '2.5 s', '125 s']
    """
    if seconds < 1e-3:
        value, unit = seconds * 1e6, "µs"
    elif seconds < 1:
        value, unit = seconds * 1e3, "ms"
    else:
        value, unit = seconds, "s"
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
