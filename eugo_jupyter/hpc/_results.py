"""What a run with ``errors="collect"`` gives back: :class:`MapResults`, :class:`Failed`.

A failed item's slot holds a :class:`Failed` value: the item's index and short repr, the
exception (as itself when it could travel back), the worker's traceback text, the node it ran
on, how many times it was tried, and the raising frames with their locals (for
``eugo.hpc.debug``). The item itself stays in the kernel (never pickled with the value), so
``MapResults.rerun`` can run it again.

>>> out = MapResults([1, Failed(1, "0", None, "ZeroDivisionError: ...", None, 1)])
>>> len(out.failures), out.failures[0].index
(1, 1)
"""

from __future__ import annotations

import html
import pickle
from collections.abc import Callable
from typing import Any

from ._failure import Failure

__all__ = ["Failed", "Failures", "MapResults"]


class Failed:
    """A failed item's place in the results: ``.index .item .error .traceback .node
    .attempts``."""

    def __init__(
        self,
        index: int,
        item: str,
        error: BaseException | None,
        traceback: str,
        node: str | None,
        attempts: int,
        frames: list[dict[str, Any]] | None = None,
        error_bytes: bytes | None = None,
    ) -> None:
        self.index = index
        self.item = item  # the item's short repr
        self._error = error
        self._error_bytes = error_bytes
        self.traceback = traceback
        self.node = node
        self.attempts = attempts
        self.frames = frames or []
        self._value: Any = None  # the item itself, kept in this process for rerun

    @classmethod
    def of(cls, failure: Failure, value: Any) -> Failed:
        made = cls(
            failure.index,
            failure.label,
            None,
            failure.trace,
            failure.node,
            failure.attempts,
            failure.frames,
            failure.error_bytes,
        )
        made._value = value
        made.kind, made.text = failure.kind, failure.text
        return made

    kind = "Exception"
    text = ""

    @property
    def error(self) -> BaseException | None:
        """The exception the item raised (``None`` if it could not travel back)."""
        if self._error is None and self._error_bytes is not None:
            self._error = pickle.loads(self._error_bytes)
        return self._error

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_error"] = None if state["_error_bytes"] else state["_error"]
        state["_value"] = None  # the item stays where it came from
        return state

    def __repr__(self) -> str:
        return f"Failed(#{self.index} {self.item}: {self.kind}: {self.text})"


class Failures(list):  # type: ignore[type-arg]
    """The :class:`Failed` values of a run: a table in a notebook, ``.to_frame()`` for pandas."""

    COLUMNS = ("index", "item", "error", "node", "attempts")

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "index": f.index,
                "item": f.item,
                "error": f"{f.kind}: {f.text}",
                "node": f.node,
                "attempts": f.attempts,
            }
            for f in self
        ]

    def to_frame(self) -> Any:
        """A pandas DataFrame, one row per failed item."""
        import pandas as pd

        return pd.DataFrame(self.rows(), columns=list(self.COLUMNS))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{name}</th>" for name in self.COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(row[c]))}</td>" for c in self.COLUMNS) + "</tr>"
            for row in self.rows()[:200]
        )
        more = f"<p>and {len(self) - 200} more</p>" if len(self) > 200 else ""
        return (
            f"<p>{len(self)} failed item{'s' if len(self) != 1 else ''}</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"
        )


class MapResults(list):  # type: ignore[type-arg]
    """``map``'s list with ``errors="collect"``: failed positions hold :class:`Failed` values.

    >>> out = eugo.hpc.map(load, paths, errors="collect")           # doctest: +SKIP
    >>> out.failures                                                # doctest: +SKIP
    >>> out = out.rerun(load_fixed)                                 # doctest: +SKIP
    """

    _rerun: Callable[..., Any] | None = None  # map with the same keywords, set by map

    @property
    def failures(self) -> Failures:
        """The failed items, in result order."""
        return Failures(value for value in self if isinstance(value, Failed))

    def rerun(self, fn: Callable[..., Any] | None = None) -> MapResults:
        """Run only the failed items again (with ``fn`` if given, say a fixed function) and
        fill in their slots; items that fail again keep a :class:`Failed` there."""
        if self._rerun is None:
            raise TypeError("rerun() needs the MapResults that eugo.hpc.map returned.")
        slots = [(position, v) for position, v in enumerate(self) if isinstance(v, Failed)]
        if not slots:
            return self
        again = self._rerun(fn, [failed._value for _, failed in slots])
        for (position, failed), value in zip(slots, again, strict=True):
            if isinstance(value, Failed):
                value.index = failed.index
            self[position] = value
        return self
