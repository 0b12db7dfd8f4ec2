"""Bounds on what a REST request may carry: body size and nesting, node memory sizes.

A request body is read by :func:`parse_body`, which refuses an oversized body, one nested deeper
than any launch request needs, and anything the JSON parser raises, always as
:class:`~eugo_jupyter.exceptions.OptionsError` (HTTP 400 with a sentence), never a 500.

>>> parse_body(b'{"kind": "local"}')
{'kind': 'local'}
>>> parse_body(b"[" * 100_000)
Traceback (most recent call last):
...
eugo_jupyter.exceptions.OptionsError: The request body is nested deeper than 16 levels; ...
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..exceptions import OptionsError

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "MIN_OBJECT_STORE",
    "check_node_memory",
    "machine_memory",
    "parse_body",
]

#: A launch body with 32 workers is about 4 KiB; 64 KiB leaves room and refuses floods.
MAX_BODY_BYTES = 64 * 1024
#: The deepest real body (slurm.extra inside a launch) is 3 levels.
MAX_DEPTH = 16
#: Ray refuses an object store under 75 MiB (``ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES``).
MIN_OBJECT_STORE = 75 * 1024 * 1024


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


def machine_memory() -> int:
    """Bytes of memory on this machine (the most a node started here can offer)."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_node_memory(
    memory: int | None, object_store: int | None, where: str, most: int | None = None
) -> None:
    """Refuse a node ``memory``/``object_store_memory`` no node of ``most`` bytes can have.

    ``most`` defaults to this machine's memory (nodes of the local backend run here).

    >>> check_node_memory(10**30, None, "head")
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
