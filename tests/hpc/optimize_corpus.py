"""Functions written the way notebook users write them, as notebook cells.

Each cell is compiled as IPython does (its own file name, registered in ``linecache``, the
shared ``__main__``-like namespace), so line numbers are the cell's own and helpers defined in
another cell are found the way they are in a notebook.
"""

from __future__ import annotations

import itertools
import linecache
from typing import Any

import numpy as np

_counter = itertools.count(1)


class Notebook:
    """A namespace that cells run in, as a kernel's ``__main__``."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"__name__": "__main__", "np": np}

    def cell(self, source: str) -> str:
        name = f"/tmp/ipykernel_0/cell_{next(_counter)}.py"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        exec(compile(source, name, "exec"), self.ns)
        return name

    def __getitem__(self, name: str) -> Any:
        return self.ns[name]


rng = np.random.default_rng(0)

#: name -> (cell source, arguments). Each compiles, and its result must equal plain Python's.
COMPILABLE: dict[str, tuple[str, tuple[Any, ...]]] = {
    "stencil": (
        """
def stencil(a):
    out = np.zeros_like(a)
    for i in range(1, a.shape[0] - 1):
        for j in range(1, a.shape[1] - 1):
            out[i, j] = (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1]) * 0.25
    return out
""",
        (rng.random((60, 60)),),
    ),
    "pairwise": (
        """
def pairwise(x):
    n = x.shape[0]
    d = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            s = 0.0
            for k in range(x.shape[1]):
                t = x[i, k] - x[j, k]
                s += t * t
            d[i, j] = np.sqrt(s)
    return d
""",
        (rng.random((80, 3)),),
    ),
    "recurrence": (
        """
def logistic(r, x0, n):
    xs = np.empty(n)
    x = x0
    for i in range(n):
        x = r * x * (1.0 - x)
        xs[i] = x
    return xs
""",
        (3.7, 0.5, 5000),
    ),
    "histogram": (
        """
def histogram(values, bins, lo, hi):
    counts = np.zeros(bins, dtype=np.int64)
    width = (hi - lo) / bins
    for v in values:
        k = int((v - lo) / width)
        if 0 <= k < bins:
            counts[k] += 1
    return counts
""",
        (rng.random(20000), 16, 0.0, 1.0),
    ),
    "monte_carlo": (
        """
def inside(x, y):
    return x * x + y * y <= 1.0
"""
        + """
def estimate_pi(xs, ys):
    hits = 0
    for i in range(xs.shape[0]):
        if inside(xs[i], ys[i]):
            hits += 1
    return 4.0 * hits / xs.shape[0]
""",
        (rng.random(20000), rng.random(20000)),
    ),
    "in_place": (
        """
def normalize_rows(m):
    for i in range(m.shape[0]):
        s = 0.0
        for j in range(m.shape[1]):
            s += m[i, j]
        for j in range(m.shape[1]):
            m[i, j] /= s
    return m.shape[0]
""",
        (rng.random((200, 30)),),
    ),
}


#: name -> (cell source, arguments, expected kind, expected line in the cell). Not compiled;
#: each must name its line and a fix, and its result must still equal plain Python's.
NOT_COMPILED: dict[str, tuple[str, tuple[Any, ...], str, int]] = {
    "empty_list_argument": (
        "def total(xs):\n    s = 0.0\n    for x in xs:\n        s += x\n    return s\n",
        ([],),
        "empty list",
        1,
    ),
    "mixed_list_argument": (
        "def first_sum(rows):\n    s = 0.0\n    for r in rows:\n        s += r[0]\n    return s\n",
        ([(1, 2.5), (3.0, 1)],),
        "list argument",
        1,
    ),
    "empty_list_inside": (
        "def evens(n):\n    out = []\n    for i in range(n):\n        pass\n    return out\n",
        (5,),
        "empty list",
        2,
    ),
    "dict_argument": (
        "def price(item):\n    return item['qty'] * 2.0\n",
        ({"qty": 3.0, "name": "bolt"},),
        "dict of mixed types",
        1,
    ),
    "dict_mixed_inside": (
        "def record(n):\n    d = {}\n    d['n'] = 1.0 * n\n    d['label'] = 'x'\n    return n\n",
        (3,),
        "dict of mixed types",
        4,
    ),
    "strings_in_loop": (
        "def as_csv(xs):\n    out = ''\n    for x in xs:\n        out += f'{x:.2f};'\n"
        "    return out\n",
        (np.arange(3.0),),
        "strings in a loop",
        4,
    ),
    "pandas_argument": (
        "def series_total(s):\n    t = 0.0\n    for v in s:\n        t += v\n    return t\n",
        ("SERIES",),
        "pandas object",
        1,
    ),
    "pandas_inside": (
        "import pandas as pd\n\ndef smooth(a):\n    s = pd.Series(a)\n"
        "    return s.rolling(2).mean().to_numpy()\n",
        (np.arange(4.0),),
        "call into an unknown library",
        4,
    ),
    "unknown_library": (
        "import statistics\n\ndef mean_of(a):\n    return statistics.fmean(a)\n",
        (np.arange(1.0, 4.0),),
        "call into an unknown library",
        4,
    ),
    "library_after_loop": (
        "import json\n\ndef summary(a):\n    t = 0.0\n    for v in a:\n        t += v\n"
        "    return json.dumps(t)\n",
        (np.arange(3.0),),
        "call into an unknown library",
        7,
    ),
    "object_array": (
        "def obj_total(a):\n    t = 0.0\n    for v in a:\n        t += v\n    return t\n",
        (np.array([1.0, 2.0], dtype=object),),
        "object array",
        1,
    ),
    "recursion": (
        "def depth_sum(node):\n    if node[1] is None:\n        return node[0]\n"
        "    return node[0] + depth_sum(node[1])\n",
        ((1.0, (2.0, None)),),
        "recursion",
        4,
    ),
    "generator": (
        "def squares(n):\n    for i in range(n):\n        yield i * i\n",
        (4,),
        "generator",
        3,
    ),
    "try_except": (
        "def safe_inverse_sum(a):\n    t = 0.0\n    for v in a:\n        try:\n"
        "            t += 1.0 / v\n        except ZeroDivisionError as e:\n"
        "            t += 0.0\n    return t\n",
        (np.arange(1.0, 4.0),),
        "try/except",
        6,
    ),
    "with_open": (
        "def load_total(path):\n    t = 0.0\n    with open(path, 'rb') as f:\n"
        "        data = np.load(f)\n    for v in data:\n        t += v\n    return t\n",
        ("NPY_FILE",),
        "with statement",
        3,
    ),
    "with_lock": (
        "import threading\nLOCK = threading.Lock()\n\ndef guarded(a):\n    t = 0.0\n"
        "    with LOCK:\n        for v in a:\n            t += v\n    return t\n",
        (np.arange(3.0),),
        "with statement",
        6,
    ),
    "object_argument": (
        "class Point:\n    def __init__(self, x):\n        self.x = x\n\n"
        "def double_x(p):\n    return p.x * 2\n",
        ("POINT",),
        "unknown argument type",
        5,
    ),
    "global_list": (
        "WEIGHTS = [0.5, 2.0]\n\ndef weighted(i):\n    return WEIGHTS[i] * 2\n",
        (1,),
        "global container",
        4,
    ),
    # numba fails inside its own passes with an empty AssertionError on this (a 2-D mask).
    "mask_2d": (
        "def clean_share(a):\n    s = a.sum()\n    kept = a[a > 1e-6]\n    return kept.sum() / s\n",
        (rng.random((3, 4)),),
        "boolean mask indexing",
        3,
    ),
}

#: name -> (cell source, arguments, kind of cause, line): compiled, the answer differs, and
#: the report names the likely cause on that line.
DIFFERENT: dict[str, tuple[str, tuple[Any, ...], str, int]] = {
    "random_draws": (
        "def noisy_sum(n):\n    s = 0.0\n    for _ in range(n):\n        s += np.random.random()\n"
        "    return s\n",
        (50,),
        "random numbers",
        4,
    ),
    "int16_promoted": (
        "def shift_up(a):\n    return a + 1\n",
        (np.arange(10, dtype=np.int16),),
        "another dtype",
        2,
    ),
    "int_overflow": (
        "def big_product(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n"
        "    return r\n",
        (30,),
        "integer overflow",
        4,
    ),
}


#: A float stored into an unsigned integer array, out of its range: the conversion is undefined in
#: C, so NumPy and numba each get what the CPU gives (both wrap on most x86 machines; numba
#: saturates where LLVM vectorises the loop with AVX-512). Same shape as :data:`DIFFERENT`.
UNSIGNED_STORE: tuple[str, tuple[Any, ...], str, int] = (
    "def to_counts(a):\n    out = np.zeros(a.shape[0], dtype=np.uint16)\n"
    "    for i in range(a.shape[0]):\n        out[i] = a[i]\n    return out\n",
    (np.array([-1.0, 2.5, 300.0, 70000.2]),),
    "float into unsigned integer",
    4,
)


#: Kernels written in NumPy style (whole-array expressions), as others write them: name ->
#: (cell source, arguments). Compiled or not, the answer must equal plain Python's.
NUMPY_STYLE: dict[str, tuple[str, tuple[Any, ...]]] = {
    "softmax": (
        "def softmax(x):\n    e = np.exp(x - x.max())\n    return e / e.sum()\n",
        (rng.random(2000),),
    ),
    "zscore": (
        "def zscore(a):\n    return (a - a.mean()) / a.std()\n",
        (rng.random(5000),),
    ),
    "thresholded_sum": (
        "def thresholded_sum(a):\n    return np.where(a > 0.5, a, 0.0).sum()\n",
        (rng.random(5000),),
    ),
    "running_mean": (
        "def running_mean(a):\n    return np.cumsum(a) / np.arange(1, a.shape[0] + 1)\n",
        (rng.random(5000),),
    ),
    "row_norms": (
        "def row_norms(m):\n    return np.sqrt((m * m).sum(axis=1))\n",
        (rng.random((200, 30)),),
    ),
    "masked_share": (
        "def masked_share(a):\n    s = a.sum()\n    kept = a[a > 1e-6]\n"
        "    return kept.sum() / s\n",
        (rng.random((60, 60)),),
    ),
}
