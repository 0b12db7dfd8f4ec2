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
cell or changing a global gives a new key, so a new compile. :meth:`Candidates.key` is the key
in one process (cheap: the notebook works it out on every task call). :meth:`Candidates.node_key`
is the key of the cache on each node (:mod:`._nodecache`), read by other processes and later
kernels: it leaves out where the code lives (a kernel names its cell files after its process id),
hashes every array by content, and adds the versions of Python, numba, llvmlite and NumPy and
the kind of compile. A value told apart only by its identity (an object array) gives no node key.
"""

from __future__ import annotations

import ast
import dis
import enum
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
        self._node_keys: dict[bool, str | None] = {}
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
        """The cache key of the compiled version in this process (see the module docstring)."""
        return self._digest(portable=False)

    def portable_key(self) -> str:
        """What the function does, the same in every process and kernel: the node cache's key
        without the engine versions (a run's journal matches its generation by it)."""
        try:
            return self._digest(portable=True)
        except (_NotPortable, RecursionError):
            return self._digest(portable=False)

    def node_key(self, parallel: bool) -> str | None:
        """The key of the node-wide cache for a ``parallel`` or serial compile; None when a
        value the compiled code reads can only be told apart by its identity. Worked out once
        (it hashes every array it reads)."""
        if parallel not in self._node_keys:
            extra = (*engine_versions(), f"parallel={parallel}")
            try:
                self._node_keys[parallel] = self._digest(portable=True, extra=extra)
            except (_NotPortable, RecursionError):  # RecursionError: dispatchers reading each other
                self._node_keys[parallel] = None
        return self._node_keys[parallel]

    def _digest(self, portable: bool, extra: tuple[str, ...] = ()) -> str:
        digest = hashlib.blake2b(digest_size=16)
        for text in extra:
            digest.update(text.encode())
        for fn in self.functions:
            digest.update(fn.__qualname__.encode())
            digest.update(_code_digest(fn.__code__, portable))
            digest.update(fingerprint(fn.__defaults__, portable).encode())
            cells = tuple(c.cell_contents for c in (fn.__closure__ or ()) if _filled(c))
            digest.update(fingerprint(cells, portable).encode())
        for name in sorted(self.globals_read):
            digest.update(name.encode())
            digest.update(fingerprint(self.globals_read[name], portable).encode())
        return digest.hexdigest()


class _NotPortable(Exception):
    """A value that only its identity in this process tells apart."""


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


@functools.lru_cache(maxsize=1024)
def _code_digest(code: types.CodeType, portable: bool) -> bytes:
    """What ``code`` does (nested code objects too); with where it lives unless ``portable``.

    Not ``marshal.dumps``: its output changes with the reference counts of the constants (a
    compile that holds them gave the same function another key).
    """
    digest = hashlib.blake2b(digest_size=16)
    parts: list[Any] = [
        code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
        code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
        code.co_name, getattr(code, "co_qualname", ""), getattr(code, "co_exceptiontable", b""),
    ]  # fmt: skip
    if not portable:
        parts += [code.co_filename, code.co_firstlineno, code.co_linetable]
    for part in parts:
        digest.update(repr(part).encode())
    for const in code.co_consts:
        digest.update(_const_text(const, portable))
    return digest.digest()


def _const_text(const: Any, portable: bool) -> bytes:
    if isinstance(const, types.CodeType):
        return _code_digest(const, portable)
    if isinstance(const, frozenset):  # its order follows string hashing, which varies
        return b"frozenset" + b",".join(sorted(_const_text(c, portable) for c in const))
    if isinstance(const, tuple):
        return b"tuple(" + b",".join(_const_text(c, portable) for c in const) + b")"
    return f"{type(const).__name__}:{const!r}".encode()


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def fingerprint(value: Any, portable: bool = False) -> str:
    """A string that changes when ``value`` changes, as far as a compiled version can see.

    ``portable``: the same in every process (arrays by content whatever their size); raises
    ``_NotPortable`` for what only its identity tells apart.

    >>> fingerprint(3) == fingerprint(3), fingerprint(3) == fingerprint(3.0)
    (True, False)
    """
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, enum.Enum)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(fingerprint(v, portable) for v in value)})"
    if isinstance(value, dict):
        inner = ",".join(
            f"{fingerprint(k, portable)}={fingerprint(v, portable)}" for k, v in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}:{getattr(value, '__version__', '')}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.ndarray):
            head = f"ndarray:{value.dtype}:{value.shape}"
            by_content = value.nbytes <= _HASH_BYTES_LIMIT or portable
            if by_content and value.dtype != object:
                data = np.ascontiguousarray(value).tobytes()
                return head + ":" + hashlib.blake2b(data, digest_size=12).hexdigest()
            if portable:
                raise _NotPortable(head)
            return f"{head}:id{id(value)}"
        if isinstance(value, np.generic):
            return f"{type(value).__name__}:{value!r}"
    py_func = getattr(value, "py_func", None)  # a numba dispatcher: its own Python source
    if isinstance(py_func, types.FunctionType):
        if portable:  # and what it reads, as for a helper of ours
            return "dispatcher:" + Candidates(py_func)._digest(portable=True)
        return "dispatcher:" + _code_digest(py_func.__code__, False).hex()
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
