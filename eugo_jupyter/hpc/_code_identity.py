"""A function's identity: what its code does and what it reads, as a key.

The key covers the bytecode of the function and of every helper it reaches through its globals
that the notebook defined (a function whose globals are the caller's namespace: all cells of a
notebook share ``__main__``; cloudpickle keeps one shared namespace per pickled call), followed
transitively, the values of every global they read, and their defaults and closure values:
editing a helper cell or changing a global gives a new key. :meth:`CodeIdentity.key` is the
key in one process (cheap: worked out on every task call). :meth:`CodeIdentity.portable_key`
is the same in every process and later kernels: it leaves out where the code lives (a kernel
names its cell files after its process id) and hashes every array by content.

Two features key on it: the journal (``_journal_files.identity_of``: a changed function starts
a new generation) and the optimizer (``optimize._candidates``: a compiled version's cache key).
"""

from __future__ import annotations

import dis
import enum
import functools
import hashlib
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["CodeIdentity", "codes", "fingerprint", "global_names"]

#: Arrays up to this size are hashed by content; larger ones by shape, dtype and identity.
_HASH_BYTES_LIMIT = 8 * 2**20


def codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code objects nested in it (functions, lambdas, comprehensions), each
    before the ones nested in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from codes(const)


def global_names(fn: types.FunctionType) -> list[str]:
    """The global names ``fn``'s code loads (nested comprehensions included), in order."""
    return list(_code_globals(fn.__code__))


@functools.lru_cache(maxsize=1024)
def _code_globals(top: types.CodeType) -> tuple[str, ...]:
    # Read once per code object: a task call works out its key on every submission.
    names: list[str] = []
    for code in codes(top):
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


class CodeIdentity:
    """A function and the notebook-defined helpers it calls, by name (callees first), with the
    globals they read: what its code does, as a key."""

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
        """Every function: the helpers (callees first), then the called one."""
        return [*self.helpers.values(), self.fn]

    def key(self) -> str:
        """What the functions do and read, in this process (where the code lives included)."""
        return self.digest(portable=False)

    def portable_key(self) -> str:
        """What the functions do and read, the same in every process and kernel when it can be
        (a journal matches its generation by it), else :meth:`key`."""
        return self.portable_digest() or self.key()

    def portable_digest(self, extra: tuple[str, ...] = ()) -> str | None:
        """The key, after the ``extra`` texts, the same in every process and kernel; None when a
        value the functions read can only be told apart by its identity (an object array)."""
        try:
            return self.digest(portable=True, extra=extra)
        except (_NotPortable, RecursionError):  # RecursionError: dispatchers reading each other
            return None

    def digest(self, portable: bool, extra: tuple[str, ...] = ()) -> str:
        """The key, after the ``extra`` texts; ``portable``: the same in every process, or
        ``_NotPortable`` raised for a value only its identity tells apart."""
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
            return "dispatcher:" + CodeIdentity(py_func).digest(portable=True)
        return "dispatcher:" + _code_digest(py_func.__code__, False).hex()
    return f"{type(value).__module__}.{type(value).__qualname__}"
