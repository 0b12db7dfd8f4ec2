"""What a unit sends back when the function raised (:class:`Failure`), and how the exception
travels: as itself when it pickles, else rebuilt as its own type without ``__init__``.
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any

__all__ = ["Failure"]


class Failure:
    """What a unit sends back when the function raised: where, and the original exception.

    ``where`` is the caller's words for the failing spot (``"item #37 (37)"``, ``"row 'b'"``);
    ``index`` and ``label`` identify it for the error's attributes. ``frames`` are the raising
    frames with their locals (:mod:`._remote_tb`, for a post-mortem in the notebook), ``node``
    the address of the node it ran on, ``attempts`` how many times the item was tried.
    """

    def __init__(
        self,
        where: str,
        error: BaseException,
        index: Any = None,
        label: Any = None,
        attempts: int = 1,
    ) -> None:
        from ._remote_tb import capture

        self.where = where
        self.index = index
        self.label = label
        self.attempts = attempts
        self.node = _node_address()
        self.frames = capture(error)
        self.kind = type(error).__name__
        self.text = str(error)
        self.trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        # Ray's cloudpickle: a class defined in the notebook (or pickled to the worker by value)
        # comes back as the very class the driver has, so `except ThatError:` matches.
        from ray import cloudpickle

        self.error_bytes: bytes | None = None
        for packed in (error, _Rebuilt(error)):
            try:
                self.error_bytes = cloudpickle.dumps(packed)
                pickle.loads(self.error_bytes)
                break
            except Exception:  # noqa: BLE001 - an exception that cannot travel is described
                self.error_bytes = None

    @property
    def error(self) -> BaseException | None:
        """The original exception, when it could travel back from the worker."""
        return pickle.loads(self.error_bytes) if self.error_bytes else None


def _node_address() -> str | None:
    import ray

    try:
        return ray.util.get_node_ip_address() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - where it ran is a detail; the failure is not
        return None


class _Rebuilt:
    """An exception whose ``__init__`` does not take its own ``args`` back (``def __init__(self,
    code, detail)`` calling ``super().__init__(f"{code}: {detail}")``), which plain pickling
    cannot remake: unpickled as the same type, ``args`` and attributes, without ``__init__``."""

    def __init__(self, error: BaseException) -> None:
        self.kind, self.args, self.state = type(error), error.args, dict(vars(error))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_exception, (self.kind, self.args, self.state))


def _rebuild_exception(kind: type[BaseException], args: tuple, state: dict[str, Any]) -> Any:
    error = kind.__new__(kind, *args)
    error.args = args
    vars(error).update(state)
    return error
