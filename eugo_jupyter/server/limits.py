"""Bounds on what a REST request may carry: body size and nesting (node sizes: requests.py).

A request body is read by :func:`parse_body`, which refuses an oversized body, one nested deeper
than any launch request needs, and anything the JSON parser raises, always as
:class:`~eugo_jupyter.exceptions.OptionsError` (HTTP 400 with a sentence), never a 500.

>>> parse_body(b'{"kind": "local"}')
{'kind': 'local'}
>>> parse_body(b"[" * 1_000)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
eugo_jupyter.exceptions.OptionsError: The request body is nested deeper than 16 levels; ...
"""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import OptionsError

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "parse_body",
]

#: A launch body with 32 workers is about 4 KiB; 64 KiB leaves room and refuses floods.
MAX_BODY_BYTES = 64 * 1024
#: The deepest real body (slurm.extra inside a launch) is 3 levels.
MAX_DEPTH = 16


def _depth(text: str) -> int:
    """The deepest bracket nesting outside strings (JSON's only nesting)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_body(body: bytes | None) -> Any:
    """The JSON value of a request body (None when empty); bad bodies raise OptionsError."""
    if not body:
        return None
    if len(body) > MAX_BODY_BYTES:
        raise OptionsError(
            f"The request body is {len(body):,} bytes; at most {MAX_BODY_BYTES:,} are accepted. "
            "Send one launch or connect request at a time."
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise OptionsError("The request body is not UTF-8 text; send JSON.") from None
    # Checked before parsing: the parser recurses, and deep input makes it raise RecursionError.
    if _depth(text) > MAX_DEPTH:
        raise OptionsError(
            f"The request body is nested deeper than {MAX_DEPTH} levels; no request needs that. "
            'Send a body such as {"kind": "local", "head": {"num_cpus": 2}}.'
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise OptionsError(f"The request body is not JSON: {exc}.") from None
