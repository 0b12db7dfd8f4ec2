"""``ClusterStatus``: a live summary of the connected cluster, refreshed while it is shown."""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as widgets
import traitlets

from ..exceptions import ClusterError

__all__ = ["ClusterStatus"]


class ClusterStatus(widgets.VBox):
    """Nodes, CPU/GPU used and total, and what waits and why; refreshes every ``interval`` s.

    Refreshing starts when the widget is displayed (or :meth:`start` is called) and stops for
    good with :meth:`close`. The HTML is ``eugo.hpc.cluster()``'s own.

    >>> status = ClusterStatus(interval=2)      # doctest: +SKIP
    >>> status                                   # doctest: +SKIP
    """

    interval = traitlets.Float(2.0, help="Seconds between refreshes (at least 0.5).")
    refreshes = traitlets.Int(0, read_only=True, help="How many times the summary was read.")
    text = traitlets.Unicode("", read_only=True, help="The summary as plain text.")

    def __init__(self, interval: float = 2.0, **kwargs: Any) -> None:
        self._html = widgets.HTML()
        super().__init__(children=[self._html], **kwargs)
        self.add_class("eugo-cluster-status")
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refresh()

    @traitlets.validate("interval")
    def _valid_interval(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not value >= 0.5:
            raise traitlets.TraitError(f"interval={value!r} is too short: use 0.5 seconds or more.")
        return value

    def refresh(self) -> None:
        """Read the cluster once and redraw."""
        import sys

        from .. import hpc
        from ..hpc import _internal

        try:
            if self.refreshes:  # later reads (the refresh thread's): what is held, never connect
                held = _internal.held()
                if held is None or not sys.modules["ray"].is_initialized():
                    raise ClusterError("not connected")
                info = _internal.describe_cluster(held)
            else:
                info = hpc.cluster()
            bundle = info._repr_mimebundle_()
            body, text = bundle["text/html"], bundle["text/plain"]
        except Exception as exc:  # noqa: BLE001 - shown in the widget, the refresh loop goes on
            text = (
                f"No cluster to show ({exc}). "
                "Connect with %eugo connect ADDRESS or run a distributed call."
            )
            body = f"<p class='eugo-cluster-status-error'>{html.escape(text)}</p>"
        self._html.value = body
        self.set_trait("text", text)
        self.set_trait("refreshes", self.refreshes + 1)

    @property
    def running(self) -> bool:
        """True while the background refresh runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start refreshing in the background (displaying the widget does this)."""
        if self.running or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._loop, name="eugo-cluster-status", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()

    def close(self) -> None:
        """Stop refreshing and close the widget."""
        if hasattr(self, "_stop"):  # also called from __del__ of a half-built widget
            self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        super().close()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        self.start()
        return super()._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return (
            f"ClusterStatus({'refreshing' if self.running else 'stopped'}, {self.refreshes} reads)"
        )
