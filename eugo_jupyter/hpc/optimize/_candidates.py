"""What is compiled, and what its compiled version depends on (the cache key).

Candidates: the called function, and every plain Python function it reaches through its globals
that the notebook defined: a function whose globals are the caller's namespace (all cells of a
notebook share ``__main__``; cloudpickle keeps one shared namespace per pickled call), followed
transitively. Functions that are already numba dispatchers are used as they are. Everything else
it calls (library functions, ``@distribute`` functions, classes) is left to numba to type; when
numba does not know it, the explanation says so. Generators and async functions are never
candidates (numba's generators do not return what Python's do).

The key of a compiled version covers the bytecode of the function and of every candidate helper,
the values of every global they read, and their defaults and closure values: editing a helper
cell or changing a global gives a new key, so a new compile. (Numba's version cannot change in a
process, and the key must not change when numba is first imported.)
"""

from __future__ import annotations

import ast
import dis
import functools
import hashlib
import inspect
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["Candidates", "find", "fingerprint", "static_reason"]

#: Arrays up to this size are hashed by content; larger ones by shape, dtype and identity.
_HASH_BYTES_LIMIT = 8 * 2**20


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def global_names(fn: types.FunctionType) -> list[str]:
    """The global names ``fn``'s code loads (nested comprehensions included), in order."""
    return list(_code_globals(fn.__code__))


@functools.lru_cache(maxsize=1024)
def _code_globals(top: types.CodeType) -> tuple[str, ...]:
    # Read once per code object: a task call works out its key on every submission.
    names: list[str] = []
    for code in _codes(top):
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str):
                if ins.argval not in names:
                    names.append(ins.argval)
    return tuple(names)


def _is_notebook_function(value: Any, namespace: dict[str, Any], module: str | None) -> bool:
    if not isinstance(value, types.FunctionType):
        return False
    if value.__globals__ is namespace:
        return True
    return module == "__main__" and value.__module__ == "__main__"


class Candidates:
    """The function to compile and its notebook-defined helpers, by name (callees first)."""

    def __init__(self, fn: types.FunctionType) -> None:
        self.fn = fn
        self.helpers: dict[str, types.FunctionType] = {}
        self.globals_read: dict[str, Any] = {}  # name -> value, for the key and the report
        seen: set[int] = set()
        self._walk(fn, seen)

    def _walk(self, fn: types.FunctionType, seen: set[int]) -> None:
        seen.add(id(fn))
        namespace = fn.__globals__
        for name in global_names(fn):
            if name not in namespace:
                continue  # a builtin, or a name the function will fail on in Python too
            value = namespace[name]
            if _is_notebook_function(value, self.fn.__globals__, self.fn.__module__):
                if id(value) not in seen and value is not self.fn:
                    self._walk(value, seen)
                    self.helpers[name] = value
            else:
                self.globals_read.setdefault(name, value)

    @property
    def functions(self) -> list[types.FunctionType]:
        """Every function compiled: the helpers (callees first), then the called function."""
        return [*self.helpers.values(), self.fn]

    def key(self) -> str:
        """The cache key of the compiled version (see the module docstring)."""
        digest = hashlib.blake2b(digest_size=16)
        for fn in self.functions:
            digest.update(fn.__qualname__.encode())
            digest.update(_code_digest(fn.__code__))
            digest.update(fingerprint(fn.__defaults__).encode())
            cells = tuple(c.cell_contents for c in (fn.__closure__ or ()) if _filled(c))
            digest.update(fingerprint(cells).encode())
        for name in sorted(self.globals_read):
            digest.update(name.encode())
            digest.update(fingerprint(self.globals_read[name]).encode())
        return digest.hexdigest()


@functools.lru_cache(maxsize=1024)
def _code_digest(code: types.CodeType) -> bytes:
    """What ``code`` does and where it lives (nested code objects too).

    Not ``marshal.dumps``: its output changes with the reference counts of the constants (a
    compile that holds them gave the same function another key).
    """
    digest = hashlib.blake2b(digest_size=16)
    parts: list[Any] = [
        code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
        code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
        code.co_name, getattr(code, "co_qualname", ""), getattr(code, "co_exceptiontable", b""),
        code.co_filename, code.co_firstlineno, code.co_linetable,
    ]  # fmt: skip
    for part in parts:
        digest.update(repr(part).encode())
    for const in code.co_consts:
        digest.update(_const_text(const))
    return digest.digest()


def _const_text(const: Any) -> bytes:
    if isinstance(const, types.CodeType):
        return _code_digest(const)
    if isinstance(const, frozenset):  # its order follows string hashing, which varies
        return b"frozenset" + b",".join(sorted(_const_text(c) for c in const))
    if isinstance(const, tuple):
        return b"tuple(" + b",".join(_const_text(c) for c in const) + b")"
    return f"{type(const).__name__}:{const!r}".encode()


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def fingerprint(value: Any) -> str:
    """A string that changes when ``value`` changes, as far as a compiled version can see.

    >>> fingerprint(3) == fingerprint(3), fingerprint(3) == fingerprint(3.0)
    (True, False)
    """
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(fingerprint(v) for v in value)})"
    if isinstance(value, dict):
        inner = ",".join(f"{fingerprint(k)}={fingerprint(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}:{getattr(value, '__version__', '')}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.ndarray):
            head = f"ndarray:{value.dtype}:{value.shape}"
            if value.nbytes <= _HASH_BYTES_LIMIT and value.dtype != object:
                data = np.ascontiguousarray(value).tobytes()
                return head + ":" + hashlib.blake2b(data, digest_size=12).hexdigest()
            return f"{head}:id{id(value)}"
        if isinstance(value, np.generic):
            return f"{type(value).__name__}:{value!r}"
    py_func = getattr(value, "py_func", None)  # a numba dispatcher: its own Python source
    if isinstance(py_func, types.FunctionType):
        return "dispatcher:" + _code_digest(py_func.__code__).hex()
    return f"{type(value).__module__}.{type(value).__qualname__}"


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
        line = _first_line(fn, (ast.Yield, ast.YieldFrom)) or code.co_firstlineno
        return (
            "generator",
            line,
            "a generator (yield) is not compiled: fill and return a NumPy array (or a list) "
            "instead of yielding the values one by one.",
        )
    return None


def _first_line(fn: types.FunctionType, nodes: tuple[type, ...]) -> int | None:
    """The first line (in the cell's own numbering) holding one of ``nodes``, if known."""
    tree = parse(fn)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, nodes):
            return int(getattr(node, "lineno", 0)) + fn.__code__.co_firstlineno - 1
    return None


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
