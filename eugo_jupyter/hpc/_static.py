"""What a function's code tells before it runs: the module globals it assigns.

A task or actor runs in a worker process with its own copy of every module, so assigning a
module global there changes nothing the driver or other tasks see: the answer is silently
wrong. The code object says so (a ``STORE_GLOBAL`` instruction), so it can be said at the
decorator line. A per-worker cache (``global model; if model is None: model = load()``) is a
fine use and is not reported: a global compared with ``None`` before it is assigned is read
as one.

>>> counter = 0
>>> def bump():
...     global counter
...     counter += 1
>>> global_writes(bump)
['counter']
"""

from __future__ import annotations

import dis
import types
import warnings
from typing import Any, Callable

from ..exceptions import GlobalStateWarning

__all__ = ["global_writes", "warn_global_writes"]


def _guard(instructions: list[dis.Instruction], i: int) -> bool:
    """Is the global loaded at ``i`` only tested (``is None``, truthiness), as a cache is?"""
    nxt = [x for x in instructions[i + 1 : i + 3]]
    if nxt and "JUMP" in nxt[0].opname and ("NONE" in nxt[0].opname or "IF_" in nxt[0].opname):
        return True
    return (
        len(nxt) == 2
        and nxt[0].opname == "LOAD_CONST"
        and nxt[0].argval is None
        and nxt[1].opname in ("IS_OP", "COMPARE_OP")
    )


def _code_writes(code: types.CodeType) -> list[str]:
    instructions = list(dis.get_instructions(code))
    stored = [ins.argval for ins in instructions if ins.opname == "STORE_GLOBAL"]
    guarded = {
        ins.argval
        for i, ins in enumerate(instructions)
        if ins.opname == "LOAD_GLOBAL" and _guard(instructions, i)
    }
    return [name for name in dict.fromkeys(stored) if name not in guarded]


def global_writes(target: Callable[..., Any] | type) -> list[str]:
    """Module globals a function (or any method of a class) assigns, lazy caches excepted.

    >>> def pure(x):
    ...     return x + 1
    >>> global_writes(pure)
    []
    """
    if isinstance(target, type):
        names: list[str] = []
        for value in vars(target).values():
            func = getattr(value, "__func__", value)
            if isinstance(func, types.FunctionType):
                names.extend(global_writes(func))
        return list(dict.fromkeys(names))
    code = getattr(target, "__code__", None)
    return _code_writes(code) if isinstance(code, types.CodeType) else []


def message(name: str, globals_: list[str]) -> str:
    """The sentence shared by the decorator warning and the report's finding."""
    quoted = ", ".join(f"`{g}`" for g in globals_)
    return (
        f"{name} assigns the module global {quoted}; it runs in a worker process with its own "
        "copy of the module, so the change is never seen by the notebook or by other tasks."
    )


FIX = (
    "Return the value and combine the results in the notebook, or keep shared state in an "
    "actor (@eugo.hpc.distribute on a class) and call its methods."
)


def warn_global_writes(target: Callable[..., Any] | type, stacklevel: int = 3) -> None:
    """Warn at the decorator line when ``target`` assigns module globals."""
    names = global_writes(target)
    if names:
        label = getattr(target, "__qualname__", repr(target))
        warnings.warn(f"{message(label, names)} {FIX}", GlobalStateWarning, stacklevel=stacklevel)
