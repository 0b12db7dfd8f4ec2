"""How to help it: numba's refusal turned into the first offending line and a fix in plain words.

:func:`explain_argument` covers an argument numba cannot type (a list, a dict, a DataFrame...),
:func:`explain_error` a compile that failed (numba's ``TypingError`` and friends). The line is
the cell's own numbering (a notebook cell's code is its own file, so the numbers numba and
Python report are those of the cell). Numba's own message is kept in ``numba_message``, under
the plain one, never instead of it.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any

from . import _candidates

__all__ = ["Help", "explain_argument", "explain_error"]

_FILE_LINE = re.compile(
    r'File "(?P<file>[^"]+)", line (?P<line>\d+)|Raised from (?P<raised>\S+) \((?P<rline>\d+)\)'
)


@dataclass
class Help:
    """Why one function was not compiled, where, and what to change."""

    function: str
    line: int
    kind: str  #: a short name for the case: "list argument", "pandas object", "recursion" ...
    fix: str
    numba_message: str = ""
    source_line: str = field(default="")

    def as_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "line": self.line,
            "kind": self.kind,
            "fix": self.fix,
            "source_line": self.source_line.strip(),
            "numba_message": self.numba_message,
        }


def _source_line(fn: types.FunctionType, line: int) -> str:
    import linecache

    return linecache.getline(fn.__code__.co_filename, line)


def _help(fn: types.FunctionType, line: int, kind: str, fix: str, message: str = "") -> Help:
    return Help(fn.__qualname__, line, kind, fix, message, _source_line(fn, line))


def explain_argument(fn: types.FunctionType, name: str, value: Any, error: BaseException) -> Help:
    """An argument numba cannot type: the ``def`` line, and what to pass instead."""
    line = fn.__code__.co_firstlineno
    module = type(value).__module__ or ""
    np = sys.modules.get("numpy")
    message = f"{type(error).__name__}: {error}"
    if module.startswith("pandas"):
        kind, fix = (
            "pandas object",
            (
                f"argument {name} is a pandas {type(value).__name__}, which numba does not "
                f"know: pass {name}.to_numpy() (and the column names or index separately if "
                "you need them)."
            ),
        )
    elif isinstance(value, list) and not value:
        kind, fix = (
            "empty list",
            (
                f"argument {name} is an empty list, which has no element type: pass "
                f"np.asarray({name}, dtype=float) (an empty NumPy array has one)."
            ),
        )
    elif isinstance(value, (list, tuple, set)):
        kind, fix = (
            "list argument",
            (
                f"argument {name} is a Python {type(value).__name__} that numba cannot type "
                f"(mixed or nested items): pass np.asarray({name}) with one numeric type, "
                "or one array per kind."
            ),
        )
    elif isinstance(value, dict):
        kind, fix = (
            "dict of mixed types",
            (
                f"argument {name} is a dict: pass its values as NumPy arrays (one argument "
                "per key), "
                "or a numba.typed.Dict when every key has one type and every value another."
            ),
        )
    elif np is not None and isinstance(value, np.ndarray) and value.dtype == object:
        kind, fix = (
            "object array",
            (
                f"argument {name} is a NumPy array of Python objects (dtype=object): "
                "convert it to a "
                f"number type first ({name}.astype(float)), or pass its numeric columns."
            ),
        )
    elif value is None:
        kind, fix = (
            "None argument",
            (
                f"argument {name} is None: pass a number or an array, and handle the missing case "
                "in Python before the call."
            ),
        )
    else:
        kind, fix = (
            "unknown argument type",
            (
                f"argument {name} is a {type(value).__qualname__}, which numba cannot type: "
                "pass the "
                "numbers or arrays it holds instead of the object."
            ),
        )
    return _help(fn, line, kind, fix, message)


def explain_error(cands: _candidates.Candidates, error: BaseException) -> Help:
    """A failed compile: the first offending line among the candidates, and the fix."""
    message = str(error)
    by_file: dict[str, types.FunctionType] = {}
    for fn in cands.functions:
        by_file.setdefault(_norm(fn.__code__.co_filename), fn)
    fn, line = cands.fn, cands.fn.__code__.co_firstlineno
    located: list[tuple[str, int]] = []
    for match in _FILE_LINE.finditer(message):
        name = _norm(match["file"] or match["raised"])
        if name in by_file:
            located.append((name, int(match["line"] or match["rline"])))
    if located:
        # The innermost location numba names is the line it could not type.
        name, line = located[-1]
        fn = _owner(cands, name, line) or by_file[name]
    if not message.strip():  # numba failed inside its own passes, saying nothing
        return _internal(cands, error, fn, line)
    kind, fix = _classify(cands, fn, line, message)
    if kind in ("recursion", "try/except", "with statement") and not located:
        line = _construct_line(fn, kind) or line
    return _help(fn, line, kind, fix, f"{type(error).__name__}: {message}")


def _internal(
    cands: _candidates.Candidates, error: BaseException, fn: types.FunctionType, line: int
) -> Help:
    """An error with no message from inside numba: the line from numba's IR, and the fix for
    what that line does."""
    fn, line = _internal_line(cands, error) or (fn, line)
    fix = _mask_fix(fn, line)
    message = f"{type(error).__name__} inside numba, with no message"
    if fix is not None:
        return _help(fn, line, "boolean mask indexing", fix, message)
    return _help(fn, line, "numba internal error", (
        "numba failed inside its own passes on this line, without saying why: write the line "
        "as an explicit loop over the array, or move it into a Python function around the "
        "compiled part."
    ), message)  # fmt: skip


def _internal_line(
    cands: _candidates.Candidates, error: BaseException
) -> tuple[types.FunctionType, int] | None:
    """Where numba was when it failed inside its own passes: the innermost IR location (the
    ``inst``, ``expr`` or ``loc`` of its lowering frames) in one of the candidates' files."""
    by_file = {_norm(f.__code__.co_filename): f for f in cands.functions}
    found: tuple[types.FunctionType, int] | None = None
    tb = error.__traceback__
    for _ in range(10_000):  # a traceback is finite; bounded all the same
        if tb is None:
            break
        for name in ("inst", "expr", "stmt", "loc"):
            value = tb.tb_frame.f_locals.get(name)
            try:
                loc = value if name == "loc" else getattr(value, "loc", None)
                filename, line = loc.filename, int(loc.line)  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001 - not an IR node (numba's own data models)
                continue
            fn = by_file.get(_norm(str(filename)))
            if fn is not None and line:
                found = (fn, line)
        tb = tb.tb_next
    return found


def _mask_fix(fn: types.FunctionType, line: int) -> str | None:
    """The fix for boolean mask indexing on ``line``, if that is what the line does."""
    for node, at in _candidates.nodes(fn):
        if (
            isinstance(node, ast.Subscript)
            and at == line
            and isinstance(node.slice, (ast.Compare, ast.BoolOp, ast.UnaryOp))
        ):
            return (
                "boolean mask indexing (a[a > t]) of an array of more than one dimension, "
                "which numba fails on inside its own passes: write it as an explicit loop "
                "(if a[i, j] > t: ...), or keep the shape with np.where(a > t, a, 0.0), or "
                "index the flat array (a.ravel()[(a > t).ravel()])."
            )
    return None


def _norm(path: str) -> str:
    """numba names files relative to the working directory; compare absolute paths."""
    import os

    return os.path.normpath(os.path.join(os.getcwd(), path)) if not path.startswith("<") else path


def _owner(cands: _candidates.Candidates, filename: str, line: int) -> types.FunctionType | None:
    best: types.FunctionType | None = None
    for fn in cands.functions:
        code = fn.__code__
        if _norm(code.co_filename) == filename and code.co_firstlineno <= line:
            lines = [ln for _, _, ln in code.co_lines() if ln is not None]
            if lines and line <= max(lines):
                best = fn
    return best


def _construct_line(fn: types.FunctionType, kind: str) -> int | None:
    def test(node: ast.AST) -> bool:
        if kind == "try/except":
            return isinstance(node, ast.Try)
        if kind == "with statement":
            return isinstance(node, (ast.With, ast.AsyncWith))
        return (
            kind == "recursion"
            and isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == fn.__name__
        )

    return _candidates.first_line(fn, test)


def _calls_itself(fn: types.FunctionType) -> bool:
    return fn.__name__ in _candidates.global_names(fn)


_RECURSION_FIX = (
    "recursion numba cannot type: write it as a loop (keep a running value or an explicit stack "
    "in an array)."
)
_GLOBAL_FIX = (
    "which numba cannot read: make it a NumPy array or a tuple (a global's value is fixed when "
    "the function compiles)."
)


def _unknown_library(what: str, used: str) -> tuple[str, str]:
    return "call into an unknown library", (
        f"numba does not know {what}: move the numeric part into a function of its own, which "
        f"is compiled, and call it from a Python function that uses {used}."
    )


def _classify(
    cands: _candidates.Candidates, fn: types.FunctionType, line: int, message: str
) -> tuple[str, str]:
    code = _source_line(fn, line).strip()
    untyped = re.search(r"Untyped global name '(\w+)'", message)
    if untyped:
        name = untyped[1]
        value = fn.__globals__.get(name)
        if name == fn.__name__:
            return "recursion", _RECURSION_FIX
        if isinstance(value, (list, dict, set)):
            return "global container", f"{name} is a global {type(value).__name__}, {_GLOBAL_FIX}"
        module = getattr(value, "__module__", None) or type(value).__module__
        return _unknown_library(f"{name} (from {module})", name)
    constant = re.search(r"assigned to variable '(\w+)' in globals", message)
    if constant:
        return "global container", f"{constant[1]} is a global list or dict, {_GLOBAL_FIX}"
    library = re.search(r"Unknown attribute '(\w+)' of type Module\(<module '([\w.]+)'", message)
    if library:
        return _unknown_library(f"{library[2]}.{library[1]}", f"{library[2]}.{library[1]}")
    if "context manager" in message or code.startswith(("with ", "async with ")):
        return "with statement", (
            "a with block (a file, a lock, a context manager) numba cannot compile: keep the "
            "with in a Python function that reads what it needs, and pass the arrays to a "
            "function of its own, which is compiled."
        )
    if (
        "try" in code.split()
        or code.startswith(("try:", "except", "finally"))
        or ("exception" in message.lower() and "catch" in message.lower())
        or "Use of unsupported opcode (PUSH_EXC_INFO" in message
    ):
        return "try/except", (
            "a try/except numba cannot compile: check the inputs before the loop (for example "
            "with np.isfinite) and keep the try/except in a Python function around the "
            "compiled one."
        )
    if re.search(r"(cannot type infer|recursive|recursion)", message, re.I) or (
        _calls_itself(fn) and fn.__name__ + "(" in code
    ):
        return "recursion", _RECURSION_FIX
    if "yield" in code.split():
        return "generator", "a generator: fill and return an array instead of yielding values."
    if re.search(r"list\(undefined\)|Cannot infer the type of variable .*list", message):
        return "empty list", (
            "an empty list [] has no element type: create the result as a NumPy array "
            "(np.empty(n) or np.zeros(n)), or start the list with one item of the right type."
        )
    if re.search(r"reflected list|heterogeneous list|List\(|\blist\b", message):
        return "list argument", (
            "a Python list: pass np.asarray(...) of one numeric type instead, and build results "
            "in NumPy arrays."
        )
    if "DictType" in message or re.search(r"\b[Dd]ict\b", message):
        return "dict of mixed types", (
            "a dict whose values have different types: use one NumPy array per key, or "
            "numba.typed.Dict with one key type and one value type."
        )
    if "unicode_type" in message or re.search(
        r"\bstr\b|format|join|f-string|FORMAT_VALUE", message
    ):
        return "strings in a loop", (
            "text handling numba does not compile: compute the numbers in the compiled "
            "function and build the strings afterwards in Python."
        )
    if re.search(r"pyobject|dtype\(O\)|object", message):
        return "object array", (
            "Python objects inside the computation (an object array): convert the data to a "
            "number type first (.astype(float))."
        )
    if re.search(r"none|Optional", message):
        return "None among numbers", (
            "a value may be None: replace missing values by np.nan (or a sentinel number) before "
            "the call."
        )
    unsupported = r"No implementation of function Function\(<(?:built-in )?function (\w+)"
    if found := re.search(unsupported, message):
        return "unsupported call", (
            f"numba has no version of {found[1]} for these argument types: call it outside the "
            "compiled function, or pass arguments of the types its documentation lists."
        )
    return "not compilable", (
        "numba could not type this line (its message is below): rewrite it with NumPy arrays and "
        "numbers, or move it into a Python function around the compiled part."
    )
