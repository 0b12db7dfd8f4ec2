"""What is compiled, and what its compiled version depends on (the cache key).

Candidates: the called function, and every plain Python function it reaches through its globals
that the notebook defined: a function whose globals are the caller's namespace (all cells of a
notebook share ``__main__``; cloudpickle keeps one shared namespace per pickled call), followed
transitively. Functions that are already numba dispatchers are used as they are. Everything else
it calls (library functions, ``@distribute`` functions, classes) is left to numba to type; when
numba does not know it, the explanation says so. Generators and async functions are never
candidates (numba's generators do not return what Python's do).

The key of a compiled version is the function's identity (:mod:`.._code_identity`: the
bytecode of the function and of every candidate helper, the values of every global they read,
their defaults and closure values): editing a helper cell or changing a global gives a new key,
so a new compile. :meth:`Candidates.node_key` is the key of the cache on each node
(:mod:`._nodecache`), read by other processes and later kernels: the portable identity plus the
versions of Python, numba, llvmlite and NumPy and the kind of compile. A value told apart only
by its identity (an object array) gives no node key.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from .._code_identity import CodeIdentity, global_names

__all__ = ["Candidates", "engine_versions", "find", "first_line", "global_names", "nodes",
           "parse", "static_reason"]  # fmt: skip


class Candidates(CodeIdentity):
    """The function to compile and its notebook-defined helpers, by name (callees first)."""

    def __init__(self, fn: types.FunctionType) -> None:
        super().__init__(fn)
        self._node_keys: dict[bool, str | None] = {}

    def node_key(self, parallel: bool) -> str | None:
        """The key of the node-wide cache for a ``parallel`` or serial compile; None when a
        value the compiled code reads can only be told apart by its identity. Worked out once
        (it hashes every array it reads)."""
        if parallel not in self._node_keys:
            extra = (*engine_versions(), f"parallel={parallel}")
            self._node_keys[parallel] = self.portable_digest(extra)
        return self._node_keys[parallel]


@functools.lru_cache(maxsize=1)
def engine_versions() -> tuple[str, ...]:
    """Python's, numba's, llvmlite's and NumPy's versions, read without importing numba."""
    from importlib import metadata

    found = [sys.version]
    for name in ("numba", "llvmlite", "numpy"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} missing")
    return tuple(found)


def find(fn: Any) -> Candidates | None:
    """The candidates of ``fn``, or None when it is not a plain Python function."""
    if not isinstance(fn, types.FunctionType):
        return None
    return Candidates(fn)


def static_reason(fn: types.FunctionType) -> tuple[str, int, str] | None:
    """``(kind, line, fix)`` for what numba cannot give Python's answer for, before compiling."""
    code = fn.__code__
    if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return ("async", code.co_firstlineno, "an async function is not compiled; await in "
                "Python and compile the numeric part as a plain function of its own.")  # fmt: skip
    if code.co_flags & inspect.CO_GENERATOR:
        line = first_line(fn, lambda n: isinstance(n, (ast.Yield, ast.YieldFrom)))
        line = line or code.co_firstlineno
        return (
            "generator",
            line,
            "a generator (yield) is not compiled: fill and return a NumPy array (or a list) "
            "instead of yielding the values one by one.",
        )
    return None


def nodes(fn: types.FunctionType) -> Iterator[tuple[ast.AST, int]]:
    """Each node of the function's tree that has a line, in ``ast.walk`` order, with that line
    in the cell's own numbering (none without its source)."""
    tree = parse(fn)
    if tree is None:
        return
    first = fn.__code__.co_firstlineno - 1
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line is not None:
            yield node, line + first


def first_line(fn: types.FunctionType, test: Callable[[ast.AST], bool]) -> int | None:
    """The line of the first node, in ``ast.walk`` order, that passes ``test``, if known."""
    return next((line for node, line in nodes(fn) if test(node)), None)


def parse(fn: types.FunctionType) -> ast.AST | None:
    """The function's own syntax tree (line 1 is its ``def``), or None without its source."""
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    # inspect.getsource starts at the first decorator, as co_firstlineno does.
    return tree
