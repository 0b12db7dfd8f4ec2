"""How to help it when the compiled answer differs: the usual causes, with the line.

:func:`explain_difference` names what it can recognise in the function's code (and its
helpers'): random numbers (numba has its own generator: the numbers can never match), a float
stored into an unsigned integer array (negative or too large values wrap differently), an
integer beyond 64 bits or a float or complex value that overflows, a result of another dtype
(NumPy 2 keeps ``int16 + 1`` in int16, numba promotes it).
"""

from __future__ import annotations

import ast
import types
from typing import Any

from . import _candidates
from ._explain import Help, _help
from ._verify import Difference

__all__ = ["explain_difference"]

_RANDOM_FIX = (
    "code that draws random numbers can never give the same numbers compiled (numba keeps its "
    "own generator): seed it and compare distributions (means, histograms) rather than values, "
    "or pass optimize=False for this function."
)
_UNSIGNED_FIX = (
    "a float stored into an unsigned integer array wraps differently when compiled (a negative "
    "or too large value): cast to float first and clip to the range before storing "
    "(min(max(v, 0.0), 65535.0)), or keep a float array and call .astype() outside the "
    "function."
)
_INT_FIX = (
    "Python's integers grow without bound, numba's are 64 bits and wrap: compute in float "
    "(r = 1.0), or keep Python (optimize=False) where exact big integers matter."
)
_OVERFLOW_FIX = (
    "a value overflows (reaches inf or nan) in one version only: numba computes complex "
    "products and abs near the limit differently; scale the values (divide by the largest, or "
    "work with logarithms) so they stay well under 1e308."
)
_DTYPE_FIX = (
    "numba promotes small integer and float32 types where NumPy 2 keeps them: say the type "
    "(a + np.int16(1), np.empty(n, dtype=a.dtype)), or convert the result (.astype(a.dtype))."
)


def explain_difference(cands: _candidates.Candidates | None, fn: types.FunctionType,
                       found: Difference) -> Help | None:  # fmt: skip
    """The likely cause of ``found`` in ``fn`` (or a helper), with its line; None if unknown."""
    functions = list(cands.functions) if cands is not None else [fn]
    for owner in functions:
        line = _find(owner, _is_random)
        if line is not None:
            return _help(owner, line, "random numbers", _RANDOM_FIX)
    if "types differ" in found.why or "dtypes differ" in found.why:
        owner, line = _first(functions, _is_binop)
        return _help(owner, line, "another dtype", _DTYPE_FIX)
    if "integer overflow" in found.why:
        owner, line = _first(functions, _is_product)
        return _help(owner, line, "integer overflow", _INT_FIX)
    for owner in functions:
        line = _unsigned_store(owner)
        if line is not None:
            return _help(owner, line, "float into unsigned integer", _UNSIGNED_FIX)
    if _overflowed(found.plain) != _overflowed(found.compiled):
        owner, line = _first(functions, _is_product)
        return _help(owner, line, "float or complex overflow", _OVERFLOW_FIX)
    return None


def _find(fn: types.FunctionType, test: Any) -> int | None:
    """The smallest line holding a node that passes ``test``."""
    return min((line for node, line in _candidates.nodes(fn) if test(node)), default=None)


def _first(functions: list[types.FunctionType], test: Any) -> tuple[types.FunctionType, int]:
    for fn in functions:
        line = _find(fn, test)
        if line is not None:
            return fn, line
    return functions[0], functions[0].__code__.co_firstlineno


def _is_random(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "random") or (
        isinstance(node, ast.Name) and node.id == "random"
    )


def _is_binop(node: ast.AST) -> bool:
    return isinstance(node, (ast.BinOp, ast.AugAssign))


def _is_product(node: ast.AST) -> bool:
    op = getattr(node, "op", None)
    return isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(
        op, (ast.Mult, ast.Pow, ast.LShift)
    )


def _unsigned_store(fn: types.FunctionType) -> int | None:
    """The first store into an array made with an unsigned dtype (``dtype=np.uint16``)."""
    unsigned: set[str] = set()
    stores: list[tuple[str, int]] = []
    for node, line in _candidates.nodes(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if any("uint" in ast.unparse(k.value) for k in node.value.keywords):
                unsigned |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    stores.append((target.value.id, line))
    lines = [line for name, line in stores if name in unsigned]
    return min(lines) if lines else None


def _overflowed(text: str) -> bool:
    return "inf" in text or "nan" in text
