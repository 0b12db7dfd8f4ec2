"""Is the compiled answer the plain answer? Copies of the arguments, and a comparison.

The same answer is one of the same type: arrays of the same shape and dtype, numbers of the
same NumPy type (a Python ``int`` counts as ``int64``, a ``float`` as ``float64``: what numba
returns for them), lists for lists and tuples for tuples. Then integers, booleans, strings and
other objects must be equal exactly; floating-point numbers (and complex ones) within ``RTOL``
relative or ``ATOL`` absolute, NaN equal to NaN. Arguments changed in place are compared the
same way. A difference is described in words: an integer beyond 64 bits is named as an
overflow, a dtype or type that differs is named.
"""

from __future__ import annotations

import copy
import math
import numbers
import reprlib
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["ATOL", "RTOL", "Difference", "compare", "copy_args", "tolerance_text"]

#: Relative tolerance for floats: summation-order changes (a parallel reduction) stay within it.
RTOL = 1e-9
#: Absolute tolerance for floats near zero.
ATOL = 1e-12

_INT64 = 2**63

_short = reprlib.Repr()
_short.maxstring = 80
_short.maxother = 80
_short.maxlong = 80


def tolerance_text() -> str:
    return f"integers, booleans, strings and objects exact; floats within {RTOL:g} relative"


@dataclass
class Difference:
    """Where and how the compiled answer differs from the plain one."""

    where: str  #: "result", "result[3]", "argument a" ...
    plain: str
    compiled: str
    why: str  #: "64-bit integer overflow", "values differ beyond 1e-09 relative" ...

    def text(self) -> str:
        return f"{self.where}: compiled {self.compiled}, Python {self.plain}: {self.why}"


def copy_args(values: Any) -> Any:
    """A deep copy; NumPy arrays keep what numba types them by (a version each): their layout
    (C, Fortran or strided) and their read-only flag."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(values, np.ndarray):
        return _array_copy(np, values)
    if isinstance(values, tuple):
        return tuple(copy_args(v) for v in values)
    if isinstance(values, list):
        return [copy_args(v) for v in values]
    if isinstance(values, dict):
        return {k: copy_args(v) for k, v in values.items()}
    return copy.deepcopy(values)


def _array_copy(np: Any, values: Any) -> Any:
    flags = values.flags
    if flags.c_contiguous or flags.f_contiguous or values.ndim == 0:
        out = values.copy(order="K")
    else:  # strided: a view of every other element of a buffer twice the size
        buffer = np.empty([2 * n for n in values.shape], dtype=values.dtype)
        out = buffer[tuple(slice(None, None, 2) for _ in values.shape)]
        out[...] = values
    out.flags.writeable = flags.writeable
    return out


class _Compare:
    def __init__(self) -> None:
        self.max_diff = 0.0  # the largest relative difference among floats that matched

    def floats(self, a: float, b: float) -> bool:
        if math.isnan(a) and math.isnan(b):
            return True
        if math.isinf(a) or math.isinf(b):
            return a == b
        diff = abs(a - b)
        scale = max(abs(a), abs(b))
        ok = diff <= ATOL + RTOL * scale
        if ok and scale:
            self.max_diff = max(self.max_diff, diff / scale)
        return ok

    def run(self, plain: Any, compiled: Any, where: str) -> Difference | None:
        np = sys.modules.get("numpy")
        if np is not None and (isinstance(plain, np.ndarray) or isinstance(compiled, np.ndarray)):
            return self.arrays(np, plain, compiled, where)
        kinds = _number_type(np, plain), _number_type(np, compiled)
        if None not in kinds and kinds[0] != kinds[1]:
            why = f"types differ: Python gives {kinds[0]}, compiled {kinds[1]}"
            shown = [
                f"{_short.repr(v)} ({k})" for v, k in zip((plain, compiled), kinds, strict=True)
            ]
            return Difference(where, shown[0], shown[1], why)
        if isinstance(plain, (list, tuple)) and type(plain) is not type(compiled):
            return Difference(where, type(plain).__name__, type(compiled).__name__,
                              "types differ")  # fmt: skip
        if isinstance(plain, bool) or isinstance(compiled, bool):
            if bool(plain) == bool(compiled) and _boolish(plain) and _boolish(compiled):
                return None
            return Difference(where, _short.repr(plain), _short.repr(compiled), "values differ")
        if _integral(plain) and _integral(compiled):
            if int(plain) == int(compiled):
                return None
            why = "values differ"
            if abs(int(plain)) >= _INT64 and abs(int(compiled)) < _INT64:
                why = "64-bit integer overflow"
            return Difference(where, str(int(plain)), str(int(compiled)), why)
        if isinstance(plain, numbers.Real) and isinstance(compiled, numbers.Real):
            if self.floats(float(plain), float(compiled)):
                return None
            return Difference(
                where, repr(float(plain)), repr(float(compiled)), _beyond(plain, compiled)
            )
        if isinstance(plain, numbers.Complex) and isinstance(compiled, numbers.Complex):
            a, b = complex(plain), complex(compiled)
            if self.floats(a.real, b.real) and self.floats(a.imag, b.imag):
                return None
            return Difference(where, repr(a), repr(b), "values differ beyond the tolerance")
        if isinstance(plain, (list, tuple)) and isinstance(compiled, (list, tuple)):
            if len(plain) != len(compiled):
                return Difference(
                    where, f"{len(plain)} items", f"{len(compiled)} items", "lengths differ"
                )
            for i, (a, b) in enumerate(zip(plain, compiled, strict=True)):
                found = self.run(a, b, f"{where}[{i}]")
                if found:
                    return found
            return None
        if isinstance(plain, dict) and isinstance(compiled, dict):
            if set(plain) != set(compiled):
                return Difference(
                    where, _short.repr(sorted(plain)), _short.repr(sorted(compiled)), "keys differ"
                )
            for k in plain:
                found = self.run(plain[k], compiled[k], f"{where}[{k!r}]")
                if found:
                    return found
            return None
        try:
            same = bool(plain == compiled)
        except Exception:  # noqa: BLE001 - an object that cannot say: compare what it shows
            same = repr(plain) == repr(compiled)
        if same:
            return None
        return Difference(where, _short.repr(plain), _short.repr(compiled), "values differ")

    def arrays(self, np: Any, plain: Any, compiled: Any, where: str) -> Difference | None:
        a, b = np.asarray(plain), np.asarray(compiled)
        if a.shape != b.shape:
            return Difference(where, f"shape {a.shape}", f"shape {b.shape}", "shapes differ")
        if a.dtype != b.dtype and not (a.dtype.kind == "O" and b.dtype.kind == "O"):
            return Difference(where, f"dtype {a.dtype}", f"dtype {b.dtype}",
                              f"dtypes differ: Python gives {a.dtype}, compiled {b.dtype}"
                              + _bytes_note(a, b))  # fmt: skip
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
                return Difference(where, str(a.dtype), str(b.dtype), "types differ")
            close = np.isclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)
            if close.all():
                with np.errstate(all="ignore"):
                    scale = np.maximum(np.abs(a), np.abs(b))
                    rel = np.where(scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1), 0)
                finite = rel[np.isfinite(rel)]
                if finite.size:
                    self.max_diff = max(self.max_diff, float(finite.max()))
                return None
            index = tuple(int(i) for i in np.argwhere(~close)[0])
            at = f"{where}[{', '.join(map(str, index))}]" if index else where
            return Difference(
                at, repr(_item(a[index])), repr(_item(b[index])), _beyond(a[index], b[index])
            )
        if a.dtype != b.dtype and not (a.dtype.kind in "biu" and b.dtype.kind in "biu"):
            if a.dtype.kind == "O" or b.dtype.kind == "O":
                same = a.tolist() == b.tolist()
                return None if same else Difference(where, "objects", "objects", "values differ")
            return Difference(where, str(a.dtype), str(b.dtype), "types differ")
        equal = a == b
        if bool(np.all(equal)):
            return None
        index = tuple(int(i) for i in np.argwhere(~np.asarray(equal))[0])
        at = f"{where}[{', '.join(map(str, index))}]" if index else where
        return Difference(at, repr(_item(a[index])), repr(_item(b[index])), "values differ")


def _bytes_note(a: Any, b: Any) -> str:
    if a.dtype.itemsize and b.dtype.itemsize > a.dtype.itemsize:
        return f" ({b.dtype.itemsize // a.dtype.itemsize} times the bytes)"
    return ""


def _number_type(np: Any, value: Any) -> str | None:
    """The NumPy type a number is (a Python int as int64, as numba returns it), else None."""
    if isinstance(value, bool):
        return "bool"
    if np is not None and isinstance(value, np.generic):
        return str(value.dtype)
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, complex):
        return "complex128"
    return None


def _item(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _boolish(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _integral(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _beyond(plain: Any, compiled: Any) -> str:
    a, b = float(plain), float(compiled)
    scale = max(abs(a), abs(b)) or 1.0
    return f"values differ by {abs(a - b) / scale:.1e} relative, beyond the tolerance of {RTOL:g}"


def compare(plain: Any, compiled: Any, where: str = "result") -> tuple[Difference | None, float]:
    """The first difference (or None) and the largest relative float difference that matched.

    >>> compare(15511210043330985984000000, 7034535277573963776)[0].why
    '64-bit integer overflow'
    >>> compare([1.0, 2.0], [1.0, 2.0 + 1e-12])[0] is None
    True
    >>> compare((1.0, 2.0), [1.0, 2.0])[0].text()
    'result: compiled list, Python tuple: types differ'
    >>> import numpy as np
    >>> compare(np.int16(3), 3)[0].why
    'types differ: Python gives int16, compiled int64'
    """
    check = _Compare()
    return check.run(plain, compiled, where), check.max_diff
